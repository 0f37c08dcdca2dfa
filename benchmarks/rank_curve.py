"""Test error of ``DoFKernelRidge`` along the rank, at several penalties.

The certified automatic rank assumes that the error falls towards exact
kernel ridge as the nested landmarks grow.  This prints (and writes as JSON)
the test MSE of uniform landmarks at ranks 60, 128, ..., 2,048 and ``n``
(exact kernel ridge), and the rank ``"auto"`` chose, for one regression set
of ``../shared/data`` with the rows, split and kernel of
``bench_auto_rank.py``, at each penalty ``lambda`` of ``--lambdas``
(``alpha = n lambda``), so that curves that are not monotone show.

Example::

    python benchmarks/rank_curve.py --set pumadyn32nm --n-train 4000 \\
        --lambdas 1e-6,1e-4,1e-3,1e-2 \\
        --output benchmarks/results/rank_curve/pumadyn32nm_4000.json
"""

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import git_state, write_json  # noqa: E402
from bench_auto_rank import split_rows  # noqa: E402

from sklearn_dof import DoFKernelRidge  # noqa: E402

RANKS = (60, 128, 256, 512, 1024, 2048)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", default="pumadyn32nm")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--n-train", type=int, default=4000)
    parser.add_argument("--n-test", type=int, default=4000)
    parser.add_argument("--lambdas", default="1e-6,1e-4,1e-3,1e-2")
    parser.add_argument("--output", default=None)
    args = parser.parse_args(argv)
    X, y, X_test, y_test = split_rows(args.set, args.seed, args.n_train, args.n_test)
    mean, scale = y.mean(), y.std()
    y, y_test = (y - mean) / scale, (y_test - mean) / scale
    n, d = X.shape
    curves = []
    for lam in (float(v) for v in args.lambdas.split(",")):
        params = dict(
            kernel="rbf",
            gamma=1.0 / d,
            alpha=n * lam,
            fit_intercept=False,
            random_state=args.seed,
        )
        points = []
        for p in [*(q for q in RANKS if q < n), n, "auto"]:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                model = DoFKernelRidge(n_components=p, **params).fit(X, y)
            mse = float(np.mean((model.predict(X_test) - y_test) ** 2))
            points.append(dict(n_components=p, rank=int(model.n_components_), mse=mse))
        curves.append(dict(lambda_=lam, points=points))
        line = ", ".join(f"{q['n_components']}: {q['mse']:.4f}" for q in points)
        print(f"lambda={lam:g} (auto rank {points[-1]['rank']}): {line}", flush=True)
    if args.output:
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
        config = dict(vars(args), n=n, git=git_state())
        write_json(Path(args.output), dict(config=config, curves=curves))


if __name__ == "__main__":
    main()

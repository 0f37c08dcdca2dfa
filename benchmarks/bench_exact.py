"""Exact kernel ridge through this library against scikit-learn's KernelRidge.

When every training row is a landmark (``n_components = n``, or an automatic
rank whose next round would be every row) :class:`sklearn_dof.DoFKernelRidge`
fits exact kernel ridge; issue 18 asks for that at a cost close to
:class:`sklearn.kernel_ridge.KernelRidge`.  For every regression set of
``../shared/data`` (the rows, split, scaling, kernel and penalty of
``bench_auto_rank.py``'s regression part: at most ``--n-train`` training rows,
RBF ``gamma = 1 / n_features``, the penalty best for exact kernel ridge on the
held-out rows), this times, in the same process and in turn for
``--repeats`` rounds (medians reported):

* ``kernel_ridge``: ``KernelRidge(alpha, kernel="rbf", gamma)``;
* ``every_row``: ``DoFKernelRidge(n_components=n, fit_intercept=False)``;
* ``auto``: ``DoFKernelRidge(n_components="auto", fit_intercept=False)``,

with the test MSE of each over KernelRidge's, the rank and ``exact_``.  Run
the same script with ``PYTHONPATH`` on another checkout to compare commits.

Results: ``--output-dir`` (``results.json``, ``summary.md``).
"""

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.kernel_ridge import KernelRidge

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import format_table, git_state, write_json  # noqa: E402
from bench_auto_rank import REGRESSION_SETS, regression_case  # noqa: E402

from sklearn_dof import DoFKernelRidge  # noqa: E402


def systems(case, seed):
    gamma, alpha = case.gamma, case.alpha
    n = case.n_train
    ours = dict(kernel="rbf", gamma=gamma, alpha=alpha, fit_intercept=False)
    return {
        "kernel_ridge": lambda: KernelRidge(alpha=alpha, kernel="rbf", gamma=gamma),
        "every_row": lambda: DoFKernelRidge(n_components=n, random_state=seed, **ours),
        "auto": lambda: DoFKernelRidge(n_components="auto", random_state=seed, **ours),
    }


def run_case(name, args):
    case_args = argparse.Namespace(n_train=args.n_train, n_test=args.n_test)
    case = regression_case(name, args.seed, case_args)
    makers = systems(case, args.seed)
    times = {key: [] for key in makers}
    fitted = {}
    for _ in range(args.repeats):
        for key, make in makers.items():
            model = make()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                start = time.perf_counter()
                model.fit(case.X_fit, case.y)
                times[key].append(time.perf_counter() - start)
            fitted[key] = model
    mse = {
        key: float(np.mean((model.predict(case.X_eval) - case.target) ** 2))
        for key, model in fitted.items()
    }
    record = dict(set=name, n_train=case.n_train, alpha=case.alpha)
    for key, model in fitted.items():
        record[f"{key}_seconds"] = float(np.median(times[key]))
        record[f"{key}_seconds_runs"] = times[key]
        record[f"{key}_mse_ratio"] = mse[key] / mse["kernel_ridge"]
        if key != "kernel_ridge":
            record[f"{key}_rank"] = int(model.n_components_)
            record[f"{key}_exact"] = bool(model.nystroem_.exact_)
            record[f"{key}_over_kernel_ridge"] = (
                record[f"{key}_seconds"] / record["kernel_ridge_seconds"]
            )
    return record


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", default=",".join(REGRESSION_SETS))
    parser.add_argument("--n-train", type=int, default=2000)
    parser.add_argument("--n-test", type=int, default=4000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--output-dir", default="results/exact")
    args = parser.parse_args(argv)
    out = Path(args.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    records = []
    config = dict(vars(args), git=git_state())
    for name in args.sets.split(","):
        records.append(run_case(name, args))
        print(records[-1], flush=True)
        write_json(out / "results.json", dict(config=config, records=records))
    columns = [
        ("set", "set", ""),
        ("n_train", "n", "d"),
        ("kernel_ridge_seconds", "KernelRidge s", ".3f"),
        ("every_row_seconds", "n_components=n s", ".3f"),
        ("every_row_over_kernel_ridge", "/KR", ".2f"),
        ("auto_seconds", "auto s", ".3f"),
        ("auto_over_kernel_ridge", "/KR", ".2f"),
        ("auto_rank", "auto rank", "d"),
        ("auto_exact", "exact_", ""),
        ("auto_mse_ratio", "auto MSE/KR", ".4f"),
    ]
    rows = records
    table = format_table(rows, columns, markdown=True)
    (out / "summary.md").write_text(
        f"# bench_exact (n_train {args.n_train}, seed {args.seed}, "
        f"{args.repeats} rounds, medians)\n\n{table}\n"
    )
    print(table)


if __name__ == "__main__":
    main()

"""The automatic rank of one checkout of the package, per case: for A/B runs.

For every case of ``bench_auto_rank.py`` (``--part regression`` or
``classification``, ``--n-train`` rows, seeds 0, 1, 2; ``--sets`` to choose),
fits ``DoFKernelRidge`` (or ``DoFKernelLogisticRegression``) with
``n_components="auto"`` and records the rank, the test error over the
exact kernel method's at the same penalty, the loss estimate, ``exact_``
and the fit time.  No oracle, no child processes: the ranks and errors of
two checkouts side by side, fast.  ``--tree`` names the checkout whose
``sklearn_dof`` is imported (default: the one beside this script);
``--data`` the folder of the ``.npz`` files (default: ``../shared/data``).

Usage::

    python benchmarks/ab_certified_rank.py --tree /path/to/checkout-a \\
        --n-train 2000,4000 --output a.json
    python benchmarks/ab_certified_rank.py --n-train 2000,4000 --output b.json
"""

import argparse
import json
import sys
import time
import types
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, default=HERE.parent)
    parser.add_argument("--n-train", default="2000")
    parser.add_argument("--part", default="regression")
    parser.add_argument("--sets", default=None)
    parser.add_argument("--data", type=Path, default=None)
    parser.add_argument("--output", type=Path, required=True)
    args = parser.parse_args()
    sys.path.insert(0, str(args.tree.resolve()))
    sys.path.insert(1, str(HERE))
    import bench_auto_rank as bench
    import numpy as np
    from sklearn.metrics import log_loss

    import sklearn_dof
    from sklearn_dof import DoFKernelLogisticRegression, DoFKernelRidge

    if args.data is not None:
        bench.SHARED_DATA = args.data
    classification = args.part == "classification"
    sets = bench.CLASSIFICATION_SETS if classification else bench.REGRESSION_SETS
    if args.sets:
        sets = args.sets.split(",")
    records = []
    for n_train in (int(n) for n in args.n_train.split(",")):
        sizes = types.SimpleNamespace(
            n_train=n_train, n_test=4000, n_train_classification=n_train
        )
        for name in sets:
            for seed in (0, 1, 2):
                case = bench.make_case(name, seed, sizes)
                cls = DoFKernelLogisticRegression if classification else DoFKernelRidge
                model = cls(
                    alpha=case.alpha,
                    n_components="auto",
                    random_state=seed,
                    **case.params,
                )
                start = time.perf_counter()
                model.fit(case.X_fit, case.y)
                seconds = time.perf_counter() - start
                if classification:
                    proba = model.predict_proba(case.X_eval)
                    error = log_loss(case.target, proba, labels=model.classes_)
                else:
                    error = np.mean((model.predict(case.X_eval) - case.target) ** 2)
                record = {
                    "package": sklearn_dof.__file__,
                    "set": name,
                    "seed": seed,
                    "n_train": case.n_train,
                    "lambda_": case.lambda_,
                    "rank": int(model.n_components_),
                    "ratio": float(error) / case.error_exact,
                    "loss_estimate": float(model.nystroem_.loss_estimate_),
                    "exact": bool(model.nystroem_.exact_),
                    "fit_s": seconds,
                }
                records.append(record)
                print(json.dumps(record), flush=True)
                args.output.write_text(json.dumps(records, indent=1))


if __name__ == "__main__":
    main()

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

Results: ``--output-dir`` (default ``results/exact/n<n_train>``:
``results.json``, ``summary.md``); the headline (per set: each fit's time
over KernelRidge's, the automatic rank and its error ratio) appended to
``results/exact/history.jsonl``.
"""

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np
from sklearn.kernel_ridge import KernelRidge

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import format_table  # noqa: E402
from _harness import (  # noqa: E402
    add_arguments,
    alternate,
    append_history,
    median,
    results_dir,
    start_run,
    timed,
    write_results,
)
from bench_auto_rank import REGRESSION_SETS, regression_case  # noqa: E402

from sklearn_dof import DoFKernelRidge  # noqa: E402

BENCHMARK = "exact"


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
    fitted = {}

    def fit(key, make):
        model = make()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _, seconds = timed(model.fit, case.X_fit, case.y)
        fitted[key] = model
        return seconds

    # In one process, in turn: A B C A B C.
    times = alternate(fit, systems(case, args.seed), args.repeats)
    mse = {
        key: float(np.mean((model.predict(case.X_eval) - case.target) ** 2))
        for key, model in fitted.items()
    }
    record = dict(set=name, n_train=case.n_train, alpha=case.alpha)
    for key, model in fitted.items():
        record[f"{key}_seconds"] = median(times[key])
        record[f"{key}_seconds_runs"] = times[key]
        record[f"{key}_mse_ratio"] = mse[key] / mse["kernel_ridge"]
        if key != "kernel_ridge":
            record[f"{key}_rank"] = int(model.n_components_)
            record[f"{key}_exact"] = bool(model.nystroem_.exact_)
            record[f"{key}_over_kernel_ridge"] = (
                record[f"{key}_seconds"] / record["kernel_ridge_seconds"]
            )
    return record


def headline(payload):
    """Per set: the time of ``n_components=n`` and of ``"auto"`` over
    KernelRidge's, the automatic rank, whether it ended exact, and its test
    MSE over KernelRidge's; the medians of both time ratios."""
    records = payload["records"]
    return {
        "n_train": payload["config"]["n_train"],
        "every_row_over_kernel_ridge_median": median(
            [r["every_row_over_kernel_ridge"] for r in records]
        ),
        "auto_over_kernel_ridge_median": median(
            [r["auto_over_kernel_ridge"] for r in records]
        ),
        "per_set": {
            r["set"]: {
                "every_row_over_kr": r["every_row_over_kernel_ridge"],
                "auto_over_kr": r["auto_over_kernel_ridge"],
                "auto_rank": r["auto_rank"],
                "auto_exact": r["auto_exact"],
                "auto_mse_ratio": r["auto_mse_ratio"],
            }
            for r in records
        },
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", default=",".join(REGRESSION_SETS))
    parser.add_argument("--n-train", type=int, default=2000)
    parser.add_argument("--n-test", type=int, default=4000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=2)
    add_arguments(parser, BENCHMARK, threads=None, output_dir=False, child=False)
    parser.add_argument(
        "--output-dir", type=Path, default=None, help="default results/exact/n<n>"
    )
    args = parser.parse_args(argv)
    out = args.output_dir or results_dir(BENCHMARK, f"n{args.n_train}")
    out.mkdir(parents=True, exist_ok=True)
    run = start_run()
    records = []
    config = {k: v for k, v in vars(args).items() if k not in ("child",)}
    for name in args.sets.split(","):
        records.append(run_case(name, args))
        print(records[-1], flush=True)
        write_results(out / "results.json", dict(config=config, records=records), run)
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
    payload = dict(config=config, records=records)
    append_history(out, BENCHMARK, run, headline(payload), results=out / "results.json")


if __name__ == "__main__":
    main()

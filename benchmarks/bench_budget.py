"""The memory budget of the automatic rank: large problems finish inside it.

Two fits with every default of ``DoFKernelRidge`` but the penalty, each in
a fresh child process (peak RSS from ``VmHWM``, reset before the fit):

* ``synthetic``: issue 5's problem (``X ~ N(0, I_8)``, a smooth target plus
  noise of 0.1, RBF ``gamma = 1/18``) at ``n = 100,000`` and
  ``lambda = 1e-6``, where the certified rank asks for more than the cap;
* ``kin40k``: all 40,000 rows of kin40k, 36,000 for training (a seeded
  split), standardised, ``gamma = 1/8``, ``lambda = 1e-5``.

Reported: fit time, rank, whether the cap bound and the warning fired, the
rank the certificate asks for, its estimated loss, test MSE and peak RSS
against the budget (3 GiB).

Usage::

    python benchmarks/bench_budget.py                  # about 10 minutes

Results: ``results/budget/results.json`` (``--output-dir``), its headline
(per case: fit seconds, rank, rank asked for, peak RSS) appended to
``results/budget/history.jsonl``.
"""

import argparse

import numpy as np
from _harness import (
    SHARED_DATA,
    add_arguments,
    append_history,
    child_main,
    rss_probe,
    run_child,
    start_run,
    timed_fit,
    write_results,
)
from bench_scaling import GAMMA, make_data

BENCHMARK = "budget"
DATA = SHARED_DATA
BUDGET_MB = 3 * 1024
CASES = {
    "synthetic": {"n": 100_000, "lambda": 1e-6},
    "kin40k": {"n": 36_000, "lambda": 1e-5},
}


def load(name, n):
    if name == "synthetic":
        X, y, X_test, y_test, _ = make_data(n, 8)
        return X, y, X_test, y_test, GAMMA
    d = np.load(DATA / "kin40k.npz")
    order = np.random.RandomState(0).permutation(d["X"].shape[0])
    X, y = d["X"][order], d["y"][order]
    mean, scale = X[:n].mean(axis=0), X[:n].std(axis=0)
    X = (X - mean) / scale
    return X[:n], y[:n], X[n:], y[n:], 1.0 / X.shape[1]


def child(case):
    from sklearn_dof import DoFKernelRidge

    X, y, X_test, y_test, gamma = load(case["name"], case["n"])
    model = DoFKernelRidge(alpha=case["lambda"] * X.shape[0], gamma=gamma)
    stop = rss_probe()
    seconds, messages = timed_fit(model, X, y)
    nystroem = model.nystroem_
    return dict(
        case,
        **stop(),
        fit_seconds=seconds,
        n_components=int(model.n_components_),
        requested_components=nystroem.requested_components_,
        estimated_loss=float(nystroem.loss_estimate_),
        warnings=messages,
        test_mse=float(np.mean((model.predict(X_test) - y_test) ** 2)),
    )


def headline(payload):
    """Per case: fit seconds, rank (and the rank the certificate asked
    for), peak RSS and whether it stayed within the budget, test MSE."""
    return {
        r["name"]: {
            "n": r["n"],
            "fit_s": r.get("fit_seconds"),
            "rank": r.get("n_components"),
            "asked": r.get("requested_components"),
            "peak_rss_mb": r.get("peak_rss_mb"),
            "within_budget": r.get("within_budget"),
            "test_mse": r.get("test_mse"),
            **({"error": r["error"]} if "error" in r else {}),
        }
        for r in payload["records"]
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument(
        "--n", type=int, default=None, help="rows of every case (smoke runs)"
    )
    add_arguments(parser, BENCHMARK)
    args = parser.parse_args(argv)
    if args.child:
        return child_main(child, args.child)
    run = start_run(args.threads)
    out = args.output_dir / "results.json"
    records = []
    for name in args.cases.split(","):
        case = dict(CASES[name], name=name)
        if args.n:
            case["n"] = args.n
        row = run_child(__file__, case, args.threads, check=False)
        if "peak_rss_mb" in row:
            row["within_budget"] = row["peak_rss_mb"] <= BUDGET_MB
        records.append(row)
        print(row, flush=True)
        write_results(out, {"threads": args.threads, "records": records}, run)
    payload = {"threads": args.threads, "records": records}
    append_history(args.output_dir, BENCHMARK, run, headline(payload), results=out)


if __name__ == "__main__":
    main()

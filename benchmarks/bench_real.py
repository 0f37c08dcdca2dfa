"""Equal test error on real data: DoFKernelRidge against scikit-learn.

For each data set with a fixed train/test split in ``../shared/data``
(kin40k: 10,000 training rows of 8 features; pumadyn32nm in the Snelson
split: 7,168 rows of 32 features), the RBF bandwidth and the penalty are
picked once on a validation split of the training rows (grid below, uniform
``p = 1000``), then ``DoFKernelRidge`` (uniform landmarks) and scikit-learn's
``make_pipeline(Nystroem, Ridge)`` are fitted at every rank of a grid with
the same landmarks' count, each in a child process with ``--threads`` BLAS
threads.  Reported per system: the smallest rank whose test error is within
1% of the best test error of the whole grid, and its fit time.  Falkon is
compared by ``bench_falkon.py``.

Usage::

    python benchmarks/bench_real.py                # about 5 minutes
    python benchmarks/bench_real.py --threads 1

Results: ``results/real/results.json``; the headline (per data set: the
rank each system needs and its fit seconds, the speed-up at equal error)
appended to ``results/real/history.jsonl``.
"""

import argparse
import json
import time

import numpy as np
from _harness import (
    SHARED_DATA,
    add_arguments,
    append_history,
    child_main,
    run_child,
    start_run,
    write_results,
)

BENCHMARK = "real"
DATA = SHARED_DATA
DATASETS = ("kin40k", "pumadyn32nm_snelson")
RANKS = (250, 500, 1000, 2000, 3000)
GAMMAS = (0.02, 0.05, 0.1, 0.2, 0.5)
LAMBDAS = (1e-3, 1e-4, 1e-5, 1e-6)


def load(name, n_train=None):
    d = np.load(DATA / f"{name}.npz")
    test = d["is_test"]
    X, y = d["X"], d["y"]
    if n_train is not None:  # the first n_train training rows (smoke runs)
        keep = test | (np.cumsum(~test) <= n_train)
        X, y, test = X[keep], y[keep], test[keep]
    mean, scale = X[~test].mean(0), X[~test].std(0)
    X = (X - mean) / np.where(scale > 0, scale, 1.0)
    return X[~test], y[~test], X[test], y[test]


def make_model(system, n, p, gamma, lam):
    if system == "ours":
        from sklearn_dof import DoFKernelRidge

        return DoFKernelRidge(
            alpha=n * lam, gamma=gamma, n_components=p, random_state=0
        )
    from sklearn.kernel_approximation import Nystroem
    from sklearn.linear_model import Ridge
    from sklearn.pipeline import make_pipeline

    return make_pipeline(
        Nystroem(gamma=gamma, n_components=p, random_state=0), Ridge(alpha=n * lam)
    )


def child(case):
    X, y, X_test, y_test = load(case["data"], case.get("n_train"))
    if case["system"] == "select":
        # Hold out a fifth of the training rows; uniform p = 1000.
        rng = np.random.default_rng(0)
        val = rng.permutation(X.shape[0])[: X.shape[0] // 5]
        mask = np.zeros(X.shape[0], bool)
        mask[val] = True
        best = None
        for gamma in GAMMAS:
            for lam in LAMBDAS:
                n = int((~mask).sum())
                p = min(1000, n // 2)
                model = make_model("ours", n, p, gamma, lam).fit(X[~mask], y[~mask])
                err = float(np.mean((model.predict(X[mask]) - y[mask]) ** 2))
                if best is None or err < best[0]:
                    best = (err, gamma, lam)
        return dict(case, gamma=best[1], lam=best[2], val_mse=best[0])
    model = make_model(
        case["system"], X.shape[0], case["p"], case["gamma"], case["lam"]
    )
    t = time.perf_counter()
    model.fit(X, y)
    fit_s = time.perf_counter() - t
    mse = float(np.mean((model.predict(X_test) - y_test) ** 2))
    return dict(case, fit_s=fit_s, test_mse=mse)


def run(case, threads):
    result = run_child(__file__, case, threads)
    print(result, flush=True)
    return result


def summarise(rows):
    best = min(r["test_mse"] for r in rows)
    out = {"best_test_mse": best}
    for system in ("ours", "sklearn"):
        mine = sorted((r for r in rows if r["system"] == system), key=lambda r: r["p"])
        ok = [r for r in mine if r["test_mse"] <= 1.01 * best]
        out[system] = {"p_needed": ok[0]["p"], "fit_s": ok[0]["fit_s"]} if ok else None
    if out["ours"] and out["sklearn"]:
        out["speedup_at_equal_error"] = out["sklearn"]["fit_s"] / out["ours"]["fit_s"]
    return out


def headline(payload):
    """Per data set: the penalty and bandwidth chosen, the best test MSE,
    the smallest rank within 1% of it for each system with its fit
    seconds, and the speed-up at equal error."""
    return {
        name: {
            "gamma": entry["selection"]["gamma"],
            "lambda": entry["selection"]["lam"],
            **entry["summary"],
        }
        for name, entry in payload["results"].items()
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default=",".join(DATASETS))
    parser.add_argument(
        "--ranks", default=",".join(map(str, RANKS)), help="ranks of the grid"
    )
    parser.add_argument(
        "--n-train", type=int, default=None, help="training rows (smoke runs)"
    )
    add_arguments(parser, BENCHMARK)
    args = parser.parse_args(argv)
    if args.child:
        return child_main(child, args.child)
    run_record = start_run(args.threads)
    start = time.perf_counter()
    results = {}
    small = {} if args.n_train is None else {"n_train": args.n_train}
    for name in args.datasets.split(","):
        chosen = run({"data": name, "system": "select", **small}, args.threads)
        rows = [
            run(
                dict(
                    data=name,
                    system=system,
                    p=p,
                    gamma=chosen["gamma"],
                    lam=chosen["lam"],
                    **small,
                ),
                args.threads,
            )
            for p in (int(q) for q in args.ranks.split(","))
            for system in ("ours", "sklearn")
        ]
        results[name] = {
            "selection": chosen,
            "rows": rows,
            "summary": summarise(rows),
        }
        print(json.dumps(results[name]["summary"], indent=1), flush=True)
    out = args.output_dir / "results.json"
    payload = {"threads": args.threads, "seconds": time.perf_counter() - start}
    payload["results"] = results
    write_results(out, payload, run_record)
    append_history(
        args.output_dir, BENCHMARK, run_record, headline(payload), results=out
    )
    print(f"total {payload['seconds']:.0f} s -> {out}")


if __name__ == "__main__":
    main()

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

Results: ``results/real/results.json``.
"""

import argparse
import json
import time
from pathlib import Path

import numpy as np
from _common import run_child

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
DEFAULT_OUTPUT = ROOT / "benchmarks" / "results" / "real"
DATASETS = ("kin40k", "pumadyn32nm_snelson")
RANKS = (250, 500, 1000, 2000, 3000)
GAMMAS = (0.02, 0.05, 0.1, 0.2, 0.5)
LAMBDAS = (1e-3, 1e-4, 1e-5, 1e-6)


def load(name):
    d = np.load(DATA / f"{name}.npz")
    test = d["is_test"]
    X, y = d["X"], d["y"]
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
    X, y, X_test, y_test = load(case["data"])
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
                model = make_model("ours", n, 1000, gamma, lam).fit(X[~mask], y[~mask])
                err = float(np.mean((model.predict(X[mask]) - y[mask]) ** 2))
                if best is None or err < best[0]:
                    best = (err, gamma, lam)
        print(json.dumps(dict(case, gamma=best[1], lam=best[2], val_mse=best[0])))
        return
    model = make_model(
        case["system"], X.shape[0], case["p"], case["gamma"], case["lam"]
    )
    t = time.perf_counter()
    model.fit(X, y)
    fit_s = time.perf_counter() - t
    mse = float(np.mean((model.predict(X_test) - y_test) ** 2))
    print(json.dumps(dict(case, fit_s=fit_s, test_mse=mse)))


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


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--output-dir", type=Path, default=DEFAULT_OUTPUT)
    args = parser.parse_args(argv)
    if args.child:
        child(json.loads(args.child))
        return
    start = time.perf_counter()
    results = {}
    for name in DATASETS:
        chosen = run({"data": name, "system": "select"}, args.threads)
        rows = [
            run(
                dict(
                    data=name,
                    system=system,
                    p=p,
                    gamma=chosen["gamma"],
                    lam=chosen["lam"],
                ),
                args.threads,
            )
            for p in RANKS
            for system in ("ours", "sklearn")
        ]
        results[name] = {
            "selection": chosen,
            "rows": rows,
            "summary": summarise(rows),
        }
        print(json.dumps(results[name]["summary"], indent=1), flush=True)
    args.output_dir.mkdir(parents=True, exist_ok=True)
    out = args.output_dir / "results.json"
    payload = {"threads": args.threads, "seconds": time.perf_counter() - start}
    out.write_text(json.dumps({**payload, "results": results}, indent=1) + "\n")
    print(f"total {payload['seconds']:.0f} s -> {out}")


if __name__ == "__main__":
    main()

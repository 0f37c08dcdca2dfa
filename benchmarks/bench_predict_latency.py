"""Predict latency of fitted models: one row and a 10,000-row batch.

What a model server pays per request.  Each model is fitted once on
``X ~ N(0, I_8)`` with a smooth target, then ``predict`` is timed on a single
row (median of many calls) and on 10,000 rows (best of a few), side by side
with exact ``KernelRidge`` on the same training set, whose predict cost grows
with ``n`` instead of ``p``.

    python benchmarks/bench_predict_latency.py [--n-train 20000] [--threads 2]

The fits and the timings share one process, on ``--threads`` BLAS threads:
what a serving process pays, warm.  Results: ``results/predict_latency/
results.json``; the headline (per model: one row's milliseconds, rows per
second in batches, pickle size) appended to
``results/predict_latency/history.jsonl``.
"""

import argparse
import pickle
import time

import numpy as np
from _harness import (
    add_arguments,
    append_history,
    median,
    start_run,
    timed,
    write_results,
)
from sklearn.kernel_ridge import KernelRidge
from threadpoolctl import threadpool_limits

from sklearn_dof import DoFKernelRidge

BENCHMARK = "predict_latency"


def _median_seconds(fn, repeat):
    times = [timed(fn)[1] for _ in range(repeat)]
    return median(times), min(times)


def headline(payload):
    """Per model: fit seconds, one row's milliseconds (median), rows per
    second in batches of 10,000 (best), pickle kilobytes."""
    return {
        row["model"]: {
            "n_train": row["n_train"],
            "p": row["p"],
            "one_row_ms": 1e3 * row["single_row_seconds"],
            "rows_per_s": row["rows_per_second"],
            "pickle_kb": row["pickle_kb"],
        }
        for row in payload["rows"]
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-train", type=int, default=20000)
    parser.add_argument("--exact-n-train", type=int, default=5000)
    add_arguments(parser, BENCHMARK, child=False)
    args = parser.parse_args(argv)
    run = start_run(args.threads)
    with threadpool_limits(args.threads):
        rows = measure(args)
    payload = {"rows": rows}
    out = args.output_dir / "results.json"
    write_results(out, payload, run)
    append_history(args.output_dir, BENCHMARK, run, headline(payload), results=out)


def measure(args):

    rng = np.random.RandomState(0)
    gamma = 1 / 18  # Gaussian kernel of width 3, as in the performance issue
    X = rng.randn(args.n_train, 8)
    y = np.sin(X[:, 0]) + 0.5 * np.cos(X[:, 1] * X[:, 2]) + 0.1 * rng.randn(len(X))
    X_batch = rng.randn(10_000, 8)
    row = X_batch[:1]

    models = {}
    for n_components in ("auto", min(500, args.n_train), min(2000, args.n_train)):
        model = DoFKernelRidge(
            alpha=args.n_train * 1e-4,
            gamma=gamma,
            n_components=n_components,
            random_state=0,
        )
        start = time.perf_counter()
        model.fit(X, y)
        models[f"DoFKernelRidge(n_components={n_components!r})"] = (
            model,
            time.perf_counter() - start,
            args.n_train,
            model.n_components_,
        )
    n_exact = min(args.exact_n_train, args.n_train)
    exact = KernelRidge(alpha=n_exact * 1e-4, kernel="rbf", gamma=gamma)
    start = time.perf_counter()
    exact.fit(X[:n_exact], y[:n_exact])
    models["KernelRidge (exact)"] = (exact, time.perf_counter() - start, n_exact, None)

    rows = []
    print(
        f"{'model':40s} {'n':>6s} {'p':>5s} {'fit s':>7s} {'1 row ms':>9s} "
        f"{'10k rows ms':>12s} {'rows/s':>10s} {'pickle KB':>10s}"
    )
    for name, (model, fit_s, n, p) in models.items():
        single, _ = _median_seconds(lambda m=model: m.predict(row), 200)
        _, batch = _median_seconds(lambda m=model: m.predict(X_batch), 5)
        size = len(pickle.dumps(model)) / 1024
        rows.append(
            dict(
                model=name,
                n_train=n,
                p=p,
                fit_seconds=fit_s,
                single_row_seconds=single,
                batch_10k_seconds=batch,
                rows_per_second=10_000 / batch,
                pickle_kb=size,
            )
        )
        print(
            f"{name:40s} {n:6d} {str(p or '-'):>5s} {fit_s:7.2f} "
            f"{1e3 * single:9.3f} {1e3 * batch:12.1f} {10_000 / batch:10.0f} "
            f"{size:10.0f}"
        )
    return rows


if __name__ == "__main__":
    main()

"""Fits on a Dask cluster whose workers cannot hold the data.

A ``distributed.LocalCluster`` of 2 worker processes (1 thread each) with a
small memory limit per worker (1 GiB by default).  ``X`` (``n x d``) and ``y``
are generated chunk by chunk *on the workers* (``dask.array.random``) and
never persisted, so that every pass regenerates them: at the largest ``n``
``X`` (1.43 GiB) is larger than one worker's memory limit.
For each ``n`` the script fits :class:`~sklearn_dof.DoFKernelRidge` and
reports the fit time and the peak resident memory of each worker, sampled
every 20 ms by a worker plugin; a fit that gathered ``X`` on one worker
would be killed by the nanny at 95% of the limit (and the script would
stop with ``KilledWorker``).  At the smallest ``n`` the same model is also
fitted in memory on ``X.compute()`` and the coefficients compared.

    python benchmarks/bench_dask.py [--memory-limit 1GiB] [--sizes 375000 ...]
        [--n-features 64] [--chunk-rows 50000] [--n-components 100]
        [--output-dir benchmarks/results/dask]

Results (figures and the run record) go to ``results.json`` in
``--output-dir``, the scaling table to ``table.rst`` and ``table.md``
beside it; the headline (per ``n``: fit seconds, peak worker memory over
the limit) is appended to ``results/dask/history.jsonl``.  The workers are
the processes of the cluster, not children of this script.
"""

import argparse
import os
import threading
import time
from pathlib import Path

import dask
import dask.array as da
import numpy as np
import psutil
from _harness import add_arguments, append_history, start_run, write_results
from dask.utils import format_bytes, parse_bytes
from distributed import Client, LocalCluster
from distributed.diagnostics.plugin import WorkerPlugin

from sklearn_dof import DoFKernelRidge

BENCHMARK = "dask"


class PeakMemory(WorkerPlugin):
    """Peak resident memory of the worker process, sampled every 20 ms."""

    name = "peak-memory"

    def setup(self, worker):
        self.peak = 0
        self._stop = threading.Event()
        process = psutil.Process()

        def sample():
            while not self._stop.wait(0.02):
                self.peak = max(self.peak, process.memory_info().rss)

        self._thread = threading.Thread(target=sample, daemon=True)
        self._thread.start()

    def teardown(self, worker):
        self._stop.set()


def _read_peak(dask_worker, reset):
    plugin = dask_worker.plugins["peak-memory"]
    peak = plugin.peak
    if reset:
        plugin.peak = psutil.Process().memory_info().rss
    return peak


def make_data(n_samples, n_features, chunk_rows, seed=0):
    """Lazy ``X`` (standard normal, scaled) and a smooth noisy ``y``."""
    rs = da.random.RandomState(seed)
    X = rs.standard_normal((n_samples, n_features), chunks=(chunk_rows, n_features))
    noise = da.random.RandomState(seed + 1).standard_normal(
        n_samples, chunks=chunk_rows
    )
    y = da.sin(X[:, 0]) + 0.5 * da.cos(X[:, 1] * X[:, 2]) + 0.1 * noise
    return X, y


def fit_once(client, n_samples, args):
    X, y = make_data(n_samples, args.n_features, args.chunk_rows)
    model = DoFKernelRidge(
        alpha=args.alpha,
        gamma=1.0 / args.n_features,
        n_components=args.n_components,
        random_state=0,
    )
    client.run(_read_peak, reset=True)
    start = time.perf_counter()
    model.fit(X, y)
    fit_seconds = time.perf_counter() - start
    peaks = client.run(_read_peak, reset=False)
    # One more pass: the training R^2, computed lazily on the workers.
    residual = y - model.predict(X)
    r2 = float(1.0 - (residual**2).mean() / y.var())
    row = {
        "n_samples": n_samples,
        "n_features": args.n_features,
        "chunks": int(X.numblocks[0]),
        "chunk_rows": args.chunk_rows,
        "X_bytes": int(X.nbytes),
        "n_components": int(model.n_components_),
        "fit_seconds": round(fit_seconds, 2),
        "peak_worker_memory_bytes": int(max(peaks.values())),
        "peak_memory_per_worker": {k: int(v) for k, v in peaks.items()},
        "train_r2": round(r2, 4),
    }
    return row, model, X, y


def write_tables(result, directory):
    """The scaling table as ``table.rst`` (for the docs) and ``table.md``."""
    limit = result["worker_memory_limit_bytes"]
    header = ["n", "chunks", "X", "X / worker limit", "p", "fit (s)", "peak worker"]
    lines = [
        [
            f"{row['n_samples']:,}",
            str(row["chunks"]),
            format_bytes(row["X_bytes"]),
            f"{row['X_bytes'] / limit:.2f}",
            str(row["n_components"]),
            f"{row['fit_seconds']:.1f}",
            format_bytes(row["peak_worker_memory_bytes"]),
        ]
        for row in result["rows"]
    ]
    rst = [".. list-table::", "   :header-rows: 1", ""]
    for cells in [header, *lines]:
        rst.append(f"   * - {cells[0]}")
        rst.extend(f"     - {cell}" for cell in cells[1:])
    md = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    md.extend("| " + " | ".join(cells) + " |" for cells in lines)
    directory = Path(directory)
    (directory / "table.rst").write_text("\n".join(rst) + "\n")
    (directory / "table.md").write_text("\n".join(md) + "\n")
    return "\n".join(md)


def headline(result):
    """Per ``n``: fit seconds, ``X`` and the peak worker memory over the
    worker's limit, training R^2; the agreement with the in-memory fit."""
    limit = result["worker_memory_limit_bytes"]
    return {
        "worker_limit_gib": limit / 2**30,
        "numpy_agreement": result["numpy_agreement"],
        "per_n": {
            f"n={row['n_samples']}": {
                "fit_s": row["fit_seconds"],
                "X_over_limit": row["X_bytes"] / limit,
                "peak_worker_over_limit": row["peak_worker_memory_bytes"] / limit,
                "train_r2": row["train_r2"],
            }
            for row in result["rows"]
        },
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memory-limit", default="1GiB")
    parser.add_argument(
        "--sizes",
        type=int,
        nargs="+",
        default=[375_000, 750_000, 1_500_000, 3_000_000],
    )
    parser.add_argument("--n-features", type=int, default=64)
    parser.add_argument("--chunk-rows", type=int, default=50_000)
    parser.add_argument("--n-components", type=int, default=100)
    parser.add_argument("--alpha", type=float, default=1.0)
    add_arguments(parser, BENCHMARK, threads=None, child=False)
    args = parser.parse_args(argv)
    run = start_run(1)

    limit = parse_bytes(args.memory_limit)
    # Spilling to disk would hide a fit that does not fit: keep it in memory.
    with dask.config.set({"distributed.worker.memory.spill": False}):
        cluster = LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            memory_limit=args.memory_limit,
            dashboard_address=None,
        )
        client = Client(cluster)
        client.register_plugin(PeakMemory())
        client.run(lambda: __import__("sklearn_dof"))  # imports off the clock

        rows, check = [], None
        for n_samples in sorted(args.sizes):
            row, model, X, y = fit_once(client, n_samples, args)
            row["X_over_worker_limit"] = round(row["X_bytes"] / limit, 2)
            rows.append(row)
            print(
                f"n={n_samples:>9,}  chunks={row['chunks']:>3}  "
                f"X={format_bytes(row['X_bytes']):>9}  "
                f"fit={row['fit_seconds']:7.2f}s  "
                f"peak worker={format_bytes(row['peak_worker_memory_bytes']):>9}  "
                f"R2={row['train_r2']:.3f}",
                flush=True,
            )
            if check is None:  # the in-memory path on the same data and seed
                X_np, y_np = dask.compute(X, y)
                reference = DoFKernelRidge(**model.get_params()).fit(X_np, y_np)
                check = {
                    "n_samples": n_samples,
                    "max_abs_coef_difference": float(
                        np.abs(reference.coef_ - model.coef_).max()
                    ),
                    "same_landmarks": bool(
                        np.array_equal(
                            reference.nystroem_.component_indices_,
                            model.nystroem_.component_indices_,
                        )
                    ),
                }
                del X_np, y_np, reference
        client.close()
        cluster.close()

    result = {
        "description": (
            "DoFKernelRidge fitted on a dask array generated on the workers "
            "(never persisted), LocalCluster 2 workers x 1 thread, spilling "
            "off; peak worker memory is the resident set size sampled every "
            "20 ms."
        ),
        "worker_memory_limit_bytes": int(limit),
        "n_workers": 2,
        "threads_per_worker": 1,
        "numpy_agreement": check,
        "rows": rows,
        "dask": dask.__version__,
        "load_average_1min": round(os.getloadavg()[0], 2),
    }
    output = Path(args.output_dir) / "results.json"
    write_results(output, result, run)
    print(write_tables(result, output.parent))
    print("numpy agreement:", check)
    append_history(args.output_dir, BENCHMARK, run, headline(result), results=output)


if __name__ == "__main__":
    main()

"""Fit time and memory against n, beside the physical floor and scikit-learn.

Each fit runs in its own child process on ``--threads`` BLAS threads and
measures the float64 GEMM rate just after its fit: the *physical floor*
beside each time is ``n p^2 / (GEMM rate)`` plus the kernel block
``K(X, I)`` by a fused numpy RBF (:func:`rbf_block`).  The problem
(``X ~ N(0, I_d)``, a smooth target plus noise, ``gamma = 1 / 18``,
``lambda = 1e-6``) and the parts (``scaling``, ``sklearn``, ``auto``,
``predict``, ``cores``): ``benchmarks/README.rst``, "bench_scaling.py".

Usage::

    python benchmarks/bench_scaling.py                 # every part
    python benchmarks/bench_scaling.py --quick         # small sizes
    python benchmarks/bench_scaling.py --parts auto --auto-sizes 100000,1000000 \
        --auto-lambdas 1e-3,1e-5 --auto-samplers uniform
    python benchmarks/bench_scaling.py --resummarise   # summaries, plot again

Results: ``results.json`` and ``scaling.png`` in ``--output-dir`` (default
``benchmarks/results/scaling``), the headline in
``results/scaling/history.jsonl``.  Use an idle machine.
"""

import argparse
import json
import os
import resource
import threading
import time

import numpy as np
import sklearn
from _harness import (
    add_arguments,
    alternate,
    append_history,
    append_jsonl,
    child_main,
    display_path,
    folder_label,
    median,
    results_dir,
    run_child,
    start_run,
    write_json,
)

BENCHMARK = "scaling"
DEFAULT_OUTPUT = results_dir(BENCHMARK)
GAMMA = 1.0 / 18.0
LAMBDA = 1e-6
N_TEST = 10_000
# ----------------------------------------------------------------- the child


def make_data(n, d, seed=0, dtype=np.float64):
    """X ~ N(0, I_d), y = f(X) + N(0, 0.1^2), plus N_TEST test rows (with
    their noisy targets and the noise-free ``f``)."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n + N_TEST, d))
    # A smooth target of a few directions, of unit scale.
    f = np.sin(X[:, 0]) + 0.5 * np.cos(X[:, 1] - X[:, 2]) + 0.25 * X[:, 3 % d]
    y = f + 0.1 * rng.standard_normal(n + N_TEST)
    X = X.astype(dtype)
    return X[:n], y[:n], X[n:], y[n:], f[n:]


def gemm_rate(size=2000, rows=20000):
    """Float64 GEMM flop rate (best of 3) on a (rows x size) @ (size x size)."""
    rng = np.random.default_rng(1)
    A = rng.standard_normal((rows, size))
    B = rng.standard_normal((size, size))
    best = np.inf
    for _ in range(3):
        t = time.perf_counter()
        A @ B
        best = min(best, time.perf_counter() - t)
    return 2.0 * rows * size * size / best


# Entries per chunk of the elementwise part of the RBF kernel: a chunk stays
# in a core's cache from its product through the clip and the exponential
# (2**16 until commit 62f3b76, with np.clip, whose Python wrapper made the
# floor's kernel slower on 16 threads than on 8).
RBF_CHUNK = 2**18


def _rbf_rows(X, landmarks, gamma, out):
    """``exp(-gamma ||x - l||^2)`` into ``out``, a cache-sized chunk of rows
    at a time.

    The squared norms ride in the product, on augmented rows
    ``[x, 1, |x|^2] . [2 gamma l, -gamma |l|^2, -gamma]`` (the expansion of
    scikit-learn's ``euclidean_distances``), and each chunk's product, clip
    and exponential run in place while it is in cache, so the block goes to
    memory once (faster than separate passes over the norms; the kernel is
    bound by memory traffic, not flops).
    """
    x_sq = np.einsum("ij,ij->i", X, X)[:, None]
    l_sq = np.einsum("ij,ij->i", landmarks, landmarks)[:, None]
    X_aug = np.hstack([X, np.ones_like(x_sq), x_sq])
    L_aug = np.hstack(
        [2.0 * gamma * landmarks, -gamma * l_sq, np.full_like(l_sq, -gamma)]
    )
    L_aug_t = np.ascontiguousarray(L_aug.T)
    rows = max(1, RBF_CHUNK // max(landmarks.shape[0], 1))
    for lo in range(0, X.shape[0], rows):
        chunk = out[lo : lo + rows]
        np.matmul(X_aug[lo : lo + rows], L_aug_t, out=chunk)
        # Rounding can leave a tiny positive exponent for nearby points.
        np.minimum(chunk, 0.0, out=chunk)
        np.exp(chunk, out=chunk)


def rbf_block(X, landmarks, gamma, threads):
    """``K(X, landmarks)`` of the RBF kernel, one group of rows per thread
    (the BLAS on one thread each: numpy releases the GIL in the product and
    the exponential)."""
    out = np.empty((X.shape[0], landmarks.shape[0]))
    bounds = np.linspace(0, X.shape[0], threads + 1).astype(int)
    workers = [
        threading.Thread(target=_rbf_rows, args=(X[a:b], landmarks, gamma, out[a:b]))
        for a, b in zip(bounds[:-1], bounds[1:], strict=True)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return out


def kernel_seconds(X, landmarks, n):
    """Time of K(X, landmarks) for n rows, from one block of 20,000 rows:
    the floor's kernel cost, by :func:`rbf_block` on as many threads as the
    fit (``OMP_NUM_THREADS``), so that the floor is not padded."""
    from threadpoolctl import threadpool_limits

    threads = int(os.environ.get("OMP_NUM_THREADS") or os.cpu_count())
    block = np.asarray(X[:20000], dtype=np.float64)
    landmarks = np.asarray(landmarks, dtype=np.float64)
    best = np.inf
    with threadpool_limits(1, user_api="blas"):
        for _ in range(3):
            t = time.perf_counter()
            rbf_block(block, landmarks, GAMMA, threads)
            best = min(best, time.perf_counter() - t)
    return best * n / block.shape[0]


def peak_rss():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def make_model(system, n, p, sampling="uniform", lam=LAMBDA):
    alpha = n * lam
    if system == "ours":
        from sklearn_dof import DoFKernelRidge

        return DoFKernelRidge(
            alpha=alpha,
            gamma=GAMMA,
            n_components=p,
            sampling=sampling,
            random_state=0,
        )
    if system == "sklearn":
        from sklearn.kernel_approximation import Nystroem
        from sklearn.linear_model import Ridge
        from sklearn.pipeline import make_pipeline

        return make_pipeline(
            Nystroem(gamma=GAMMA, n_components=p, random_state=0), Ridge(alpha=alpha)
        )
    raise ValueError(system)


def child(case):
    """Run one case; its record."""
    n, d, p = case["n"], case["d"], case.get("p")
    dtype = np.float32 if case.get("float32") else np.float64
    X, y, X_test, y_test, f_test = make_data(n, d, dtype=dtype)
    out = dict(case)
    lam = case.get("lambda", LAMBDA)
    model = make_model(case["system"], n, p, case.get("sampling", "uniform"), lam)
    rss_before = peak_rss()
    # A case may set scikit-learn's working_memory (MiB) for its fit: the
    # budget that decides between private and shared Gram sums.
    budget = case.get("working_memory", sklearn.get_config()["working_memory"])
    t = time.perf_counter()
    with sklearn.config_context(working_memory=budget):
        model.fit(X, y)
    out["fit_s"] = time.perf_counter() - t
    t = time.perf_counter()
    pred = model.predict(X_test)
    out["predict_s"] = time.perf_counter() - t
    # Against the noise-free target (the excess risk), and against noisy
    # test labels as in the reference table.
    out["test_mse"] = float(np.mean((pred - f_test) ** 2))
    out["test_mse_noisy"] = float(np.mean((pred - y_test) ** 2))
    out["threads"] = os.environ.get("OMP_NUM_THREADS")
    if case["system"] == "ours":
        # The library's pool names its worker threads "sklearn_dof-<i>".
        out["pool_threads"] = sum(
            t.name.startswith("sklearn_dof-") for t in threading.enumerate()
        )
    out["rss_before_fit_bytes"] = rss_before
    out["peak_rss_bytes"] = peak_rss()
    if hasattr(model, "n_components_"):
        out["n_components_"] = int(model.n_components_)
    if hasattr(model, "_n_refine_passes"):
        out["refine_passes"] = model._n_refine_passes
        out["refined"] = bool(model._refined)
    if case.get("latency"):
        row = X_test[:1]
        times = []
        for _ in range(200):
            t = time.perf_counter()
            model.predict(row)
            times.append(time.perf_counter() - t)
        out["latency_ms_median"] = 1e3 * float(np.median(times))
        # The first call pays the first touch of its blocks' memory; the
        # best of five later calls is the steady rate of a serving process.
        out["throughput_rows_per_s"] = N_TEST / out["predict_s"]
        repeats = []
        for _ in range(5):
            t = time.perf_counter()
            model.predict(X_test)
            repeats.append(time.perf_counter() - t)
        out["throughput_best_rows_per_s"] = N_TEST / min(repeats)
    if case.get("floor"):
        # Measured after the fit, so that its buffers do not count in the
        # fit's peak memory, and right after it, so that the machine is the
        # same.
        rate = gemm_rate()
        kernel = kernel_seconds(X, X[:p], n)
        out.update(gemm_gflops=rate / 1e9, kernel_s=kernel)
        out["floor_s"] = n * p * p / rate + kernel
        out["fit_over_floor"] = out["fit_s"] / out["floor_s"]
    return out


# ---------------------------------------------------------------- the parent


def run_case(case, threads, timeout=3600):
    threads = case.get("threads", threads)
    start = time.perf_counter()
    result = run_child(__file__, case, threads, check=False, timeout=timeout)
    result.pop("child_wall_s", None)
    result["wall_s"] = time.perf_counter() - start
    print(_line(result), flush=True)
    return result


def _auto_against_int(case, result, args):
    """``"auto"`` against the same fit at the rank it chose, given as an int,
    each in a fresh process (the first touch of a process's memory costs
    about 2 ms per MB), A B A B ``--auto-repeat`` times (the first ``"auto"``
    fit is ``result``); the medians, as fit times vary by 10-20%."""
    fixed = {k: v for k, v in case.items() if k != "then_int"}
    fixed.update(part="auto_int", p=result["n_components_"])
    first_int = run_case(fixed, args.threads)
    more = alternate(
        lambda _, c: run_case(c, args.threads),
        {"auto": case, "int": fixed},
        args.auto_repeat - 1,
    )
    auto_times = [r.get("fit_s") for r in [result, *more["auto"]]]
    int_times = [r.get("fit_s") for r in [first_int, *more["int"]]]
    if None in auto_times or None in int_times:
        return result
    result.update(
        fit_s_runs=auto_times,
        int_fit_s_runs=int_times,
        fit_s=median(auto_times),
        int_fit_s=median(int_times),
    )
    return result


_LINE_KEYS = (
    "part system sampling n d lambda p float32 n_components_ fit_s floor_s "
    "fit_over_floor int_fit_s refine_passes test_mse test_mse_noisy "
    "peak_rss_bytes threads pool_threads latency_ms_median "
    "throughput_rows_per_s throughput_best_rows_per_s error"
).split()


def _line(r):
    parts = []
    for k in _LINE_KEYS:
        if r.get(k) is not None:
            v = r[k]
            if k == "peak_rss_bytes":
                v = f"{v / 2**30:.2f}GiB"
            elif isinstance(v, float):
                v = f"{v:.4g}"
            parts.append(f"{k}={v}")
    return " ".join(parts)


def _physical_memory():
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # pragma: no cover
        return float("inf")


def _thread_counts(spec):
    """Thread counts to measure: a comma-separated list, or the powers of two
    up to the machine's cores."""
    if spec:
        return [int(t) for t in spec.split(",")]
    return [t for t in (1, 2, 4, 8, 16, 32, 64) if t <= (os.cpu_count() or 1)]


AUTO_SAMPLERS = ("uniform", "pivoted", "rpcholesky", "leverage")


def cases(parts, args):
    """The cases of ``parts`` under the options ``args``, in order."""
    quick = args.quick
    p = 500 if quick else 2000
    out = []
    if "scaling" in parts:
        ns = [10_000, 100_000] if quick else [10_000, 100_000, 1_000_000]
        for d in (8, 32):
            for n in ns:
                out.append(dict(part="scaling", system="ours", n=n, d=d, p=p, floor=1))
        out.append(
            dict(part="scaling", system="ours", n=ns[-1], d=8, p=p, floor=1, float32=1)
        )
    if "sklearn" in parts:
        ns = [10_000, 50_000] if quick else [10_000, 50_000, 100_000, 200_000]
        for n in ns:
            for system in ("ours", "sklearn"):
                out.append(dict(part="sklearn", system=system, n=n, d=8, p=p, floor=1))
    if "auto" in parts:
        # lambda = 1e-3: at 1e-6 the tails of a Gaussian in 8-D are isolated
        # points, d_max is close to n, and the uniform rule rightly asks for
        # p close to n.
        sizes = args.auto_sizes or ("20000" if quick else "100000")
        for n in (int(float(n)) for n in sizes.split(",")):
            for lam in (float(lam) for lam in args.auto_lambdas.split(",")):
                for s in args.auto_samplers.split(","):
                    case = dict(part="auto", system="ours", sampling=s, n=n, d=8)
                    out.append(dict(case, p="auto", then_int=1, **{"lambda": lam}))
    if "cores" in parts:
        counts = _thread_counts(args.core_counts)
        for n in (20_000, 50_000) if quick else (200_000, 1_000_000):
            for t in counts:
                if n >= 1_000_000 and t < min(4, counts[-1]):
                    continue  # minutes each, and the shape is known from 2e5
                case = dict(part="cores", system="ours", n=n, d=8, p=p, floor=1)
                out.append(dict(case, threads=t))
            if args.compare_working_memory:
                case = dict(part="cores", system="ours", n=n, d=8, p=p, floor=1)
                wm = args.compare_working_memory
                out.append(dict(case, threads=counts[-1], working_memory=wm))
            # scikit-learn holds the n x p features about twice over (31 GB
            # at 1e6 x 2000): only where the machine has that memory.
            if 2 * 8 * n * p < _physical_memory():
                sk = dict(part="cores", system="sklearn", n=n, d=8, p=p)
                out.append(dict(sk, threads=counts[-1]))
        n = 20_000 if quick else 100_000
        for t in _thread_counts(args.aux_counts):
            auto = dict(part="cores_auto", system="ours", n=n)
            out.append(dict(auto, d=8, p="auto", threads=t, **{"lambda": 1e-3}))
            predict = dict(part="cores_predict", system="ours", n=n, d=8, p=p)
            out.append(dict(predict, threads=t, latency=1))
    if "predict" in parts:
        n = 20_000 if quick else 100_000
        out.append(dict(part="predict", system="ours", n=n, d=8, p=p, latency=1))
        out.append(dict(part="predict", system="sklearn", n=n, d=8, p=p, latency=1))
    return out


def summarise(results):
    """The ratios the issue asks for, from the raw results."""
    summary = {}
    by = {}
    for r in results:
        by.setdefault(r["part"], []).append(r)
    pairs = {}
    for r in by.get("sklearn", []):
        pairs.setdefault(r["n"], {})[r["system"]] = r
    summary["vs_sklearn"] = [
        {
            "n": n,
            "speedup": v["sklearn"]["fit_s"] / v["ours"]["fit_s"],
            "memory_ratio": v["sklearn"]["peak_rss_bytes"]
            / v["ours"]["peak_rss_bytes"],
            "mse_ours": v["ours"]["test_mse"],
            "mse_sklearn": v["sklearn"]["test_mse"],
        }
        for n, v in sorted(pairs.items())
        if all("fit_s" in v.get(system, {}) for system in ("ours", "sklearn"))
    ]
    summary["auto_cost"] = [
        {
            "sampling": r["sampling"],
            "n": r["n"],
            "lambda": r.get("lambda"),
            "n_components": r.get("n_components_"),
            "auto_s": r["fit_s"],
            "int_s": r["int_fit_s"],
            "auto_over_int": r["fit_s"] / r["int_fit_s"],
        }
        for r in by.get("auto", [])
        if r.get("int_fit_s")
    ]
    summary["cores"] = _cores_rows(by)
    return summary


def _cores_rows(by):
    """Fit time against threads: speed-up over one thread (or the fewest
    measured), the floor ratio, scikit-learn's time at the largest count."""
    rows = []
    for part in ("cores", "cores_auto", "cores_predict"):
        done = [r for r in by.get(part, []) if "fit_s" in r]
        for n in sorted({r["n"] for r in done}):
            ours = sorted(
                (r for r in done if r["n"] == n and r["system"] == "ours"),
                key=lambda r: int(r["threads"]),
            )
            sk = [r for r in done if r["n"] == n and r["system"] == "sklearn"]
            if not ours:
                continue
            key = "predict_s" if part == "cores_predict" else "fit_s"
            base = ours[0]
            for r in ours:
                row = {
                    "part": part,
                    "n": n,
                    "threads": int(r["threads"]),
                    "seconds": r[key],
                    # Over the fewest threads measured at this n.
                    "speedup": base[key] / r[key],
                    "speedup_over_threads": int(base["threads"]),
                    "pool_threads": r.get("pool_threads"),
                    "working_memory": r.get("working_memory"),
                    "peak_rss_gib": r["peak_rss_bytes"] / 2**30,
                    "test_mse": r["test_mse"],
                    "n_components": r.get("n_components_"),
                }
                if "fit_over_floor" in r:
                    row["fit_over_floor"] = r["fit_over_floor"]
                if sk and int(sk[0]["threads"]) == int(r["threads"]):
                    row["sklearn_fit_s"] = sk[0]["fit_s"]
                    row["sklearn_over_ours"] = sk[0]["fit_s"] / r["fit_s"]
                    row["sklearn_peak_rss_gib"] = sk[0]["peak_rss_bytes"] / 2**30
                rows.append(row)
    return rows


def _pyplot():
    """matplotlib's pyplot on a file back-end, or None without matplotlib
    (the JSON is written before any plot)."""
    try:
        import matplotlib
    except ImportError:
        print("matplotlib is not installed: no plot")
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot(runs, path):
    """Fit time and peak memory against n, of every run in ``results.json``."""
    plt = _pyplot()
    if plt is None:
        return

    results = [r for run in runs.values() for r in run["results"]]
    scal = [r for r in results if r["part"] in ("scaling", "sklearn") and "fit_s" in r]
    if not scal:  # (a run of other parts: no empty figure)
        return
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    series = {}
    for r in scal:
        label = f"{r['system']} d={r['d']}" + (" float32" if r.get("float32") else "")
        series.setdefault(label, []).append(r)
    for label, rs in sorted(series.items()):
        rs = sorted({r["n"]: r for r in rs}.values(), key=lambda r: r["n"])
        ns = [r["n"] for r in rs]
        axes[0].plot(ns, [r["fit_s"] for r in rs], "o-", label=label)
        axes[1].plot(ns, [r["peak_rss_bytes"] / 2**30 for r in rs], "o-", label=label)
        if label.startswith("ours") and all("floor_s" in r for r in rs):
            axes[0].plot(ns, [r["floor_s"] for r in rs], "k:", lw=0.8)
    axes[0].set_title("fit time (dotted: floor n p^2 / GEMM rate + kernel)")
    axes[1].set_title("peak resident memory of the fitting process")
    for ax, ylabel in zip(axes, ["seconds", "GiB"], strict=True):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("n (training rows)")
        ax.set_ylabel(ylabel)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_cores(results, path):
    """Fit time against threads, beside the floor and scikit-learn."""
    plt = _pyplot()
    if plt is None:
        return

    rs = [r for r in results if r["part"] == "cores" and "fit_s" in r]
    if not rs:
        return
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    for n in sorted({r["n"] for r in rs}):
        ours = sorted(
            (r for r in rs if r["n"] == n and r["system"] == "ours"),
            key=lambda r: int(r["threads"]),
        )
        t = [int(r["threads"]) for r in ours]
        line = ax.plot(t, [r["fit_s"] for r in ours], "o-", label=f"ours n={n:.0e}")
        ax.plot(t, [r["floor_s"] for r in ours], ":", color=line[0].get_color())
        for r in rs:
            if r["n"] == n and r["system"] == "sklearn":
                ax.plot(
                    [int(r["threads"])],
                    [r["fit_s"]],
                    "s",
                    color=line[0].get_color(),
                    label=f"scikit-learn n={n:.0e}",
                )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("threads")
    ax.set_ylabel("fit seconds (dotted: floor)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def headline(results, summary):
    """The figures of a run, by part: fit seconds and fit over the floor
    (``scaling``), the speed-up over scikit-learn's pipeline per ``n``,
    ``"auto"`` over the int fit at its rank, fit seconds (and over the
    floor) per thread count, and prediction throughput."""
    out = {"parts": sorted({r["part"] for r in results})}
    scal = [r for r in results if r["part"] == "scaling" and "fit_s" in r]
    if scal:
        out["scaling"] = {
            f"n={r['n']} d={r['d']} p={r['p']}"
            + (" float32" if r.get("float32") else ""): {
                "fit_s": r["fit_s"],
                "fit_over_floor": r.get("fit_over_floor"),
                "peak_rss_gib": r["peak_rss_bytes"] / 2**30,
            }
            for r in scal
        }
    if summary.get("vs_sklearn"):
        out["vs_sklearn"] = {
            f"n={r['n']}": {"speedup": r["speedup"], "memory": r["memory_ratio"]}
            for r in summary["vs_sklearn"]
        }
    if summary.get("auto_cost"):
        out["auto_cost"] = {
            f"{r['sampling']} n={r['n']} lambda={r['lambda']:g}": {
                "rank": r["n_components"],
                "auto_s": r["auto_s"],
                "int_s": r["int_s"],
                "auto_over_int": r["auto_over_int"],
            }
            for r in summary["auto_cost"]
        }
    if summary.get("cores"):
        out["cores"] = {
            f"{r['part']} n={r['n']} threads={r['threads']}"
            + (f" wm={r['working_memory']:g}" if r.get("working_memory") else ""): {
                "seconds": r["seconds"],
                "fit_over_floor": r.get("fit_over_floor"),
                "sklearn_over_ours": r.get("sklearn_over_ours"),
            }
            for r in summary["cores"]
        }
    latency = [r for r in results if r["part"] == "predict" and "predict_s" in r]
    if latency:
        out["predict"] = {
            r["system"]: {
                "latency_ms": r.get("latency_ms_median"),
                "rows_per_s": r.get("throughput_best_rows_per_s"),
            }
            for r in latency
        }
    failed = [r for r in results if "error" in r]
    if failed:
        out["failed"] = len(failed)
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--auto-repeat",
        type=int,
        default=3,
        help="alternating runs of each auto fit and its int fit (medians)",
    )
    parser.add_argument("--parts", default="scaling,sklearn,auto,predict")
    add_arguments(parser, BENCHMARK)
    parser.add_argument(
        "--core-counts",
        help="thread counts of the cores part, e.g. 1,2,4 (default: powers "
        "of two up to the machine's cores)",
    )
    parser.add_argument(
        "--aux-counts",
        help="thread counts of the cores part's auto and predict cases "
        "(default: as --core-counts' default)",
    )
    parser.add_argument(
        "--compare-working-memory",
        type=float,
        help="cores part: also fit each n at the most threads under this "
        "working_memory (MiB), e.g. 4096 for a private Gram sum per worker "
        "where the default 1024 shares one",
    )
    parser.add_argument(
        "--auto-samplers",
        default=",".join(AUTO_SAMPLERS),
        help="samplers of the auto part (default all four)",
    )
    parser.add_argument(
        "--auto-sizes",
        help="rows of the auto part, e.g. 100000,1000000 (default 1e5; 2e4 quick)",
    )
    parser.add_argument(
        "--auto-lambdas",
        default="1e-3",
        help="penalties (lambda) of the auto part, e.g. 1e-3,1e-5",
    )
    parser.add_argument(
        "--resummarise",
        action="store_true",
        help="recompute the summaries and the plot of --output-dir's results.json",
    )
    args = parser.parse_args(argv)
    if args.child:
        return child_main(child, args.child)
    if args.resummarise:
        out = args.output_dir / "results.json"
        runs = json.loads(out.read_text())["runs"]
        for run in runs.values():
            run["summary"] = summarise(run["results"])
            print(json.dumps(run["summary"], indent=1))
        out.write_text(json.dumps({"runs": runs}, indent=1) + "\n")
        return plot(runs, args.output_dir / "scaling.png")
    parts = set(args.parts.split(","))
    args.output_dir.mkdir(parents=True, exist_ok=True)
    run = start_run(args.threads)
    start = time.perf_counter()
    results = []
    todo = cases(parts, args)
    # Each result also goes to progress.jsonl as it comes: a run stopped by a
    # time limit keeps what it measured.
    progress = args.output_dir / "progress.jsonl"
    for case in todo:
        result = run_case(case, args.threads)
        if case.get("then_int") and "n_components_" in result:
            results.append(_auto_against_int(case, result, args))
        else:
            results.append(result)
        append_jsonl(progress, results[-1])
    summary = summarise(results)
    print(json.dumps(summary, indent=1))
    out = args.output_dir / "results.json"
    previous = json.loads(out.read_text()) if out.exists() else {}
    runs = previous.get("runs", {})
    key = ",".join(sorted(parts)) + (" quick" if args.quick else "")
    runs[f"{key} threads={args.threads}"] = {
        "results": results,
        "summary": summary,
        "seconds": time.perf_counter() - start,
        "run": run,
    }
    write_json(out, {"runs": runs})
    plot(runs, args.output_dir / "scaling.png")
    if "cores" in parts:
        plot_cores(results, args.output_dir / "cores.png")
    append_history(
        args.output_dir,
        BENCHMARK,
        run,
        headline(results, summary),
        results=out,
        label=f"{folder_label(args.output_dir, BENCHMARK)}: {key} threads="
        f"{args.threads}",
    )
    print(f"total {time.perf_counter() - start:.0f} s -> {display_path(out)}")


if __name__ == "__main__":
    main()

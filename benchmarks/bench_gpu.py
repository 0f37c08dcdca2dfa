"""GPU (or CPU torch) fits through scikit-learn's array API, side by side.

Issue 20's table: X ~ N(0, I_8), RBF gamma = 1/18, lambda = 1e-6
(alpha = n lambda), p = 2000 uniform landmarks, the target of
``bench_scaling.make_data``; for each n, in one process:

* ``ours_xp``: :class:`~sklearn_dof.DoFKernelRidge` on torch tensors under
  ``array_api_dispatch`` (float64, and float32 input);
* ``sklearn_xp``: scikit-learn's ``Nystroem + Ridge`` under the same
  dispatch, on the same device;
* ``reference``: a few lines of torch doing this library's mathematics
  without it (kernel blocks, the Gram sum, a solve of
  ``G + alpha K(I, I)``), the yardstick of the issue;
* ``ours_numpy``: the NumPy path on the CPU, all threads.

Large ranks (issue 33; ``--centres 10000,20000 --systems
ours_cg,falkon_reference,ours_direct --repeats 2``):

* ``ours_cg`` / ``ours_direct``: :class:`~sklearn_dof.DoFKernelRidge` with
  ``solver="cg"`` (Falkon's method) or ``solver="direct"`` (the Gram matrix
  and a Cholesky factorisation) on the tensors, float64;
* ``falkon_reference``: Falkon's algorithm (Rudi, Carratino and Rosasco,
  NeurIPS 2017, Algorithm 1) in plain torch, float64, the same centres and
  penalty, with Falkon 0.9's defaults: ``K(I, I) + 1e-13 M I``, conjugate
  gradients from zero, at most 20 steps, stopped once the residual's norm
  is below ``1e-7``.  Falkon's GPU build needs its CUDA extensions compiled
  on the device machine, which has no network; this is the yardstick in
  its place.

The systems run in the order A B A B (``--repeats``, the harness's
:func:`_harness.alternate`) within one process, each fit warm and
synchronised, with its peak GPU memory: one process for all the fits, since
every new process would pay CUDA's start-up again.

Each GPU fit is timed warm (a small fit first pays CUDA's initialisation)
and synchronised; the first fit's time is recorded too.  Test error is the
mean squared error against noisy test labels (``test_mse_noisy``, the
issue's column) and against the noise-free target.

Run::

    SCIPY_ARRAY_API=1 python benchmarks/bench_gpu.py --output-dir DIR

On a machine without CUDA the torch rows run on the CPU.  Results:
``results/gpu/results.json`` (issue 20's table; ``results/gpu/large_ranks``
for issue 33's), the run record with the device, the headline (per system,
``n`` and ``p``: median fit seconds and the ratios to the yardsticks)
appended to ``results/gpu/history.jsonl``.
"""

import argparse
import json
import os
import sys
import time
import traceback
from pathlib import Path

os.environ.setdefault("SCIPY_ARRAY_API", "1")

import numpy as np  # noqa: E402
import sklearn  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import (  # noqa: E402
    add_arguments,
    alternate,
    append_history,
    append_jsonl,
    display_path,
    start_run,
    write_results,
)
from bench_scaling import GAMMA, make_data  # noqa: E402

BENCHMARK = "gpu"
LAMBDA = 1e-6
P = 2000
# Falkon 0.9's defaults (FalkonOptions, Falkon(maxiter=20)).
FALKON_EPSILON_64 = 1e-13
FALKON_MAX_ITER = 20
FALKON_CG_TOLERANCE = 1e-7


def _sync(torch):
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def reference_fit(torch, X, y, p, alpha, gamma, block=65536):
    """This library's mathematics in plain torch: the yardstick."""
    n = X.shape[0]
    generator = torch.Generator().manual_seed(0)
    idx = torch.randperm(n, generator=generator)[:p].to(X.device)
    L = X[idx]

    def rbf(A, B):
        d = (A * A).sum(1)[:, None] + (B * B).sum(1)[None, :] - 2 * A @ B.T
        return torch.exp(-gamma * d.clamp_min_(0))

    y_mean = y.mean()
    G = torch.zeros((p, p), dtype=torch.float64, device=X.device)
    b = torch.zeros((p,), dtype=torch.float64, device=X.device)
    for start in range(0, n, block):
        K = rbf(X[start : start + block], L).double()
        G += K.T @ K
        b += K.T @ (y[start : start + block].double() - y_mean)
    A = G + alpha * rbf(L, L).double()
    w = torch.linalg.solve(A, b)
    return lambda Z: rbf(Z, L).double() @ w + y_mean


def _rbf(torch, A, B, gamma):
    d = (A * A).sum(1)[:, None] + (B * B).sum(1)[None, :] - 2 * A @ B.T
    return torch.exp(-gamma * d.clamp_min_(0))


def falkon_reference_fit(torch, X, y, p, alpha, gamma, working_memory=1024):
    """Falkon's Algorithm 1 (Rudi, Carratino and Rosasco, 2017) in torch.

    ``lambda = alpha / n``; ``T^T T = K_MM + eps M I``, ``A^T A = T T^T / M
    + lambda I``; conjugate gradients on ``B^T H B beta = B^T K_nM^T y / n``
    for ``B = T^{-1} A^{-1}`` and ``H = K_nM^T K_nM / n + lambda K_MM``, the
    products with ``K_nM`` by blocks of rows within ``working_memory`` MiB
    (three ``b x M`` float64 buffers, as ours).  The targets are centred
    (Falkon fits no intercept).  The same centres as ours
    (``uniform_columns(n, M, random_state=0)``).
    """
    from sklearn_dof import uniform_columns

    solve = torch.linalg.solve_triangular
    n = X.shape[0]
    lam = alpha / n
    idx = torch.asarray(uniform_columns(n, p, random_state=0), device=X.device)
    C = X[idx]
    y_mean = y.double().mean()
    y_c = (y.double() - y_mean).reshape(n, 1)
    block = max(1, int(working_memory * 2**20 // (3 * 8 * p)))
    eye = torch.eye(p, dtype=torch.float64, device=X.device)
    T = torch.linalg.cholesky(
        _rbf(torch, C, C, gamma).double() + FALKON_EPSILON_64 * p * eye, upper=True
    )
    A = torch.linalg.cholesky(T @ T.T / p + lam * eye, upper=True)

    def knm_t(v):
        out = torch.zeros((p, v.shape[1]), dtype=torch.float64, device=X.device)
        for start in range(0, n, block):
            K = _rbf(torch, X[start : start + block], C, gamma).double()
            out += K.T @ v[start : start + block]
        return out

    def knm_t_knm(v):
        out = torch.zeros((p, v.shape[1]), dtype=torch.float64, device=X.device)
        for start in range(0, n, block):
            K = _rbf(torch, X[start : start + block], C, gamma).double()
            out += K.T @ (K @ v)
        return out

    def bhb(u):
        w = solve(A, u, upper=True)
        c = knm_t_knm(solve(T, w, upper=True)) / n
        c = solve(T.T, c, upper=False)
        return solve(A.T, c + lam * w, upper=False)

    r = solve(A.T, solve(T.T, knm_t(y_c) / n, upper=False), upper=False)
    beta = torch.zeros_like(r)
    R, P = r.clone(), r.clone()
    rs = float((R * R).sum())
    steps = 0
    while steps < FALKON_MAX_ITER:
        steps += 1
        Q = bhb(P)
        step = rs / float((P * Q).sum())
        beta += step * P
        R -= step * Q
        rs_new = float((R * R).sum())
        if rs_new < FALKON_CG_TOLERANCE**2:
            break
        P = R + (rs_new / rs) * P
        rs = rs_new
    weights = solve(T, solve(A, beta, upper=True), upper=True)

    def predict(Z):
        return _rbf(torch, Z, C, gamma).double() @ weights[:, 0] + y_mean

    predict.n_iter_ = steps
    return predict


def _call(model, Z):
    return model(Z)


def _record(out, name, n, fit, args, predict, X_test, y_test, f_test, torch=None):
    cuda = torch is not None and torch.cuda.is_available()
    if cuda:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    t = time.perf_counter()
    model = fit(*args)
    if torch is not None:
        _sync(torch)
    fit_s = time.perf_counter() - t
    pred = predict(model, X_test)
    if torch is not None:
        pred = pred.cpu().numpy()
    pred = np.asarray(pred, dtype=np.float64).ravel()
    row = dict(
        system=name,
        n=n,
        fit_s=fit_s,
        test_mse_noisy=float(np.mean((pred - y_test) ** 2)),
        test_mse=float(np.mean((pred - f_test) ** 2)),
    )
    if hasattr(model, "n_components_"):
        row["n_components"] = int(model.n_components_)
    if getattr(model, "n_iter_", None) is not None:
        row["n_iter"] = int(model.n_iter_)
    if cuda:
        row["peak_gpu_gib"] = torch.cuda.max_memory_allocated() / 2**30
    out.append(row)
    print(json.dumps(row), flush=True)
    return row


def run(n_values, output_dir, systems, centres=(P,), repeats=1, time_limit=None):
    import torch
    from sklearn.kernel_approximation import Nystroem
    from sklearn.linear_model import Ridge
    from sklearn.pipeline import make_pipeline

    from sklearn_dof import DoFKernelRidge

    started = time.perf_counter()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    results = []
    meta = dict(
        device=torch.cuda.get_device_name(0) if device == "cuda" else "cpu",
        torch=torch.__version__,
        p=list(centres),
        lam=LAMBDA,
        gamma=GAMMA,
    )
    progress = output_dir / "progress.jsonl"

    def ours(X, y, alpha, p=P, solver="auto"):
        with sklearn.config_context(array_api_dispatch=True):
            return DoFKernelRidge(
                alpha=alpha, gamma=GAMMA, n_components=p, solver=solver, random_state=0
            ).fit(X, y)

    def ours_predict(model, Z):
        with sklearn.config_context(array_api_dispatch=True):
            return model.predict(Z)

    def sk(X, y, alpha, p=P):
        with sklearn.config_context(array_api_dispatch=True):
            return make_pipeline(
                Nystroem(gamma=GAMMA, n_components=p, random_state=0),
                Ridge(alpha=alpha),
            ).fit(X, y)

    # Warm-up: CUDA context, cuBLAS and cuSOLVER handles.  At a moderate
    # rank, both solvers: their predictions agree to the tolerance of the
    # conjugate gradients (a check of the device path, recorded).
    n_warm = min(20_000, min(n_values))
    Xw, yw, Xw_test, *_ = make_data(n_warm, 8)
    Xw, yw = torch.asarray(Xw, device=device), torch.asarray(yw, device=device)
    Xw_test = torch.asarray(Xw_test, device=device)
    p_warm = min(P, n_warm // 2)
    t = time.perf_counter()
    warm = ours(Xw, yw, n_warm * LAMBDA, p_warm)
    _sync(torch)
    meta[f"first_fit_s_{n_warm}"] = time.perf_counter() - t
    if {"ours_cg", "ours_direct"} & systems:
        p_check = min(1000, n_warm // 2)
        by_solver = {
            solver: ours_predict(
                ours(Xw, yw, n_warm * LAMBDA, p_check, solver), Xw_test
            )
            for solver in ("cg", "direct")
        }
        gap = torch.max(torch.abs(by_solver["cg"] - by_solver["direct"]))
        meta[f"cg_vs_direct_max_abs_prediction_gap_n{n_warm}_p{p_check}"] = float(gap)
    del warm
    for n in n_values:
        X, y, X_test, y_test, f_test = make_data(n, 8)
        alpha = n * LAMBDA
        tests = (X_test, y_test, f_test)
        Xt, yt = torch.asarray(X, device=device), torch.asarray(y, device=device)
        Xt_test = torch.asarray(X_test, device=device)
        for p in centres:
            todo = []
            if "ours_cg" in systems:
                todo.append(
                    ("ours_cg_float64", ours, (Xt, yt, alpha, p, "cg"), ours_predict)
                )
            if "falkon_reference" in systems:
                todo.append(
                    (
                        "falkon_reference_float64",
                        falkon_reference_fit,
                        (torch, Xt, yt, p, alpha, GAMMA),
                        _call,
                    )
                )
            if "ours_xp" in systems:
                todo.append(("ours_xp_float64", ours, (Xt, yt, alpha, p), ours_predict))
                todo.append(
                    (
                        "ours_xp_float32",
                        ours,
                        (Xt.float(), yt.float(), alpha, p),
                        ours_predict,
                    )
                )
            if "reference" in systems:
                todo.append(
                    (
                        "reference_float64",
                        reference_fit,
                        (torch, Xt, yt, p, alpha, GAMMA),
                        _call,
                    )
                )
            if "sklearn_xp" in systems:
                todo.append(
                    ("sklearn_xp_float64", sk, (Xt, yt, alpha, p), ours_predict)
                )

            def one(name, spec, p=p, n=n, tests=tests, Xt_test=Xt_test):
                fit, args, predict = spec
                Z = Xt_test.float() if name.endswith("float32") else Xt_test
                if time_limit and time.perf_counter() - started > time_limit:
                    row = dict(system=name, n=n, p=p, error="skipped: time limit")
                    results.append(row)
                    print(json.dumps(row), flush=True)
                    return row
                try:
                    _record(
                        results, name, n, fit, args, predict, Z, *tests[1:], torch=torch
                    )
                    results[-1]["p"] = p
                except Exception as error:  # a failure is a result (sklearn at 1e6)
                    row = dict(
                        system=name,
                        n=n,
                        p=p,
                        error=f"{type(error).__name__}: {error}"[:300],
                    )
                    results.append(row)
                    print(json.dumps(row), flush=True)
                    traceback.print_exc()
                append_jsonl(progress, results[-1])
                return results[-1]

            # A B A B, then the direct solve once.
            alternate(one, {name: spec for name, *spec in todo}, repeats)
            if "ours_direct" in systems:
                direct = (ours, (Xt, yt, alpha, p, "direct"), ours_predict)
                one("ours_direct_float64", direct)
        if "ours_numpy" in systems:
            _record(
                results,
                "ours_numpy_float64",
                n,
                _numpy_fit,
                (X, y, alpha),
                lambda m, Z: m.predict(Z),
                X_test,
                y_test,
                f_test,
            )
            append_jsonl(progress, results[-1])
    return meta, results


def _numpy_fit(X, y, alpha):
    from sklearn_dof import DoFKernelRidge

    return DoFKernelRidge(alpha=alpha, gamma=GAMMA, n_components=P, random_state=0).fit(
        X, y
    )


def summarise(results):
    """Median fit time per (system, n, p), and its ratio to the yardsticks
    at the same (n, p)."""
    fits = {}
    for r in results:
        if "fit_s" in r:
            fits.setdefault((r["system"], r["n"], r.get("p", P)), []).append(r)
    median = {k: float(np.median([r["fit_s"] for r in rs])) for k, rs in fits.items()}
    rows = []
    for (system, n, p), rs in sorted(fits.items(), key=lambda kv: (kv[0][1:], kv[0])):
        fit_s = median[(system, n, p)]
        row = dict(system=system, n=n, p=p, fit_s=round(fit_s, 3), runs=len(rs))
        for yardstick, column in (
            ("reference_float64", "over_reference"),
            ("falkon_reference_float64", "over_falkon_reference"),
        ):
            if (yardstick, n, p) in median:
                row[column] = round(fit_s / median[(yardstick, n, p)], 2)
        if ("sklearn_xp_float64", n, p) in median:
            sklearn_s = median[("sklearn_xp_float64", n, p)]
            row["sklearn_over_this"] = round(sklearn_s / fit_s, 2)
        row["test_mse_noisy"] = round(rs[-1]["test_mse_noisy"], 5)
        for key in ("n_iter", "peak_gpu_gib"):
            if key in rs[-1]:
                row[key] = round(rs[-1][key], 2)
        rows.append(row)
    return rows


def headline(payload):
    """Per system, ``n`` and ``p``: median fit seconds, over the yardsticks,
    scikit-learn's time over it, test MSE (noisy labels), peak GPU memory;
    the device."""
    return {
        "device": payload["meta"]["device"],
        "fits": {
            f"{r['system']} n={r['n']} p={r.get('p', P)}": {
                k: v for k, v in r.items() if k not in ("system", "n", "p")
            }
            for r in payload["summary"]
        },
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", default="100000,1000000")
    parser.add_argument("--centres", default=str(P), help="landmark counts p")
    parser.add_argument("--systems", default="ours_xp,reference,sklearn_xp,ours_numpy")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument(
        "--time-limit", type=float, default=None, help="seconds; later fits skipped"
    )
    add_arguments(parser, BENCHMARK, threads=None, child=False)
    args = parser.parse_args(argv)
    run_record = start_run(
        os.cpu_count(), argv=None if argv is None else [__file__, *argv]
    )
    args.output_dir.mkdir(parents=True, exist_ok=True)
    n_values = [int(float(v)) for v in args.n.split(",")]
    centres = [int(float(v)) for v in args.centres.split(",")]
    meta, results = run(
        n_values,
        args.output_dir,
        set(args.systems.split(",")),
        centres,
        args.repeats,
        args.time_limit,
    )
    summary = summarise(results)
    for row in summary:
        print(row)
    out = args.output_dir / "results.json"
    payload = dict(meta=meta, results=results, summary=summary)
    write_results(out, payload, run_record)
    append_history(
        args.output_dir, BENCHMARK, run_record, headline(payload), results=out
    )
    print(f"-> {display_path(out)}")


if __name__ == "__main__":
    main()

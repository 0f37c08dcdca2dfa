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

Each GPU fit is timed warm (a small fit first pays CUDA's initialisation)
and synchronised; the first fit's time is recorded too.  Test error is the
mean squared error against noisy test labels (``test_mse_noisy``, the
issue's column) and against the noise-free target.

Run::

    SCIPY_ARRAY_API=1 python benchmarks/bench_gpu.py --output-dir DIR

On a machine without CUDA the torch rows run on the CPU.
"""

import argparse
import json
import os
import platform
import sys
import time
import traceback
from pathlib import Path

os.environ.setdefault("SCIPY_ARRAY_API", "1")

import numpy as np  # noqa: E402
import sklearn  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_scaling import GAMMA, make_data  # noqa: E402

LAMBDA = 1e-6
P = 2000
DEFAULT_OUTPUT = Path(__file__).resolve().parent / "results" / "gpu"


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


def _call(model, Z):
    return model(Z)


def _record(out, name, n, fit, args, predict, X_test, y_test, f_test, torch=None):
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
    out.append(row)
    print(json.dumps(row), flush=True)
    return row


def run(n_values, output_dir, systems):
    import torch
    from sklearn.kernel_approximation import Nystroem
    from sklearn.linear_model import Ridge
    from sklearn.pipeline import make_pipeline

    from sklearn_dof import DoFKernelRidge

    device = "cuda" if torch.cuda.is_available() else "cpu"
    results = []
    meta = dict(
        device=torch.cuda.get_device_name(0)
        if device == "cuda"
        else platform.processor(),
        torch=torch.__version__,
        sklearn=sklearn.__version__,
        numpy=np.__version__,
        cpu_count=os.cpu_count(),
        p=P,
        lam=LAMBDA,
        gamma=GAMMA,
    )
    progress = output_dir / "progress.jsonl"

    def ours(X, y, alpha):
        with sklearn.config_context(array_api_dispatch=True):
            return DoFKernelRidge(
                alpha=alpha, gamma=GAMMA, n_components=P, random_state=0
            ).fit(X, y)

    def ours_predict(model, Z):
        with sklearn.config_context(array_api_dispatch=True):
            return model.predict(Z)

    def sk(X, y, alpha):
        with sklearn.config_context(array_api_dispatch=True):
            return make_pipeline(
                Nystroem(gamma=GAMMA, n_components=P, random_state=0),
                Ridge(alpha=alpha),
            ).fit(X, y)

    # Warm-up: CUDA context, cuBLAS and cuSOLVER handles.
    Xw, yw, *_ = make_data(20_000, 8)
    t = time.perf_counter()
    ours(
        torch.asarray(Xw, device=device),
        torch.asarray(yw, device=device),
        20_000 * LAMBDA,
    )
    _sync(torch)
    meta["first_fit_s_20000"] = time.perf_counter() - t
    for n in n_values:
        X, y, X_test, y_test, f_test = make_data(n, 8)
        alpha = n * LAMBDA
        tests = (X_test, y_test, f_test)
        Xt, yt = torch.asarray(X, device=device), torch.asarray(y, device=device)
        Xt_test = torch.asarray(X_test, device=device)
        todo = []
        if "ours_xp" in systems:
            todo.append(
                ("ours_xp_float64", ours, (Xt, yt, alpha), ours_predict, Xt_test)
            )
            todo.append(
                (
                    "ours_xp_float32",
                    ours,
                    (Xt.float(), yt.float(), alpha),
                    ours_predict,
                    Xt_test.float(),
                )
            )
        if "reference" in systems:
            todo.append(
                (
                    "reference_float64",
                    reference_fit,
                    (torch, Xt, yt, P, alpha, GAMMA),
                    _call,
                    Xt_test,
                )
            )
        if "sklearn_xp" in systems:
            todo.append(
                ("sklearn_xp_float64", sk, (Xt, yt, alpha), ours_predict, Xt_test)
            )
        for name, fit, args, predict, Z in todo:
            try:
                _record(
                    results, name, n, fit, args, predict, Z, *tests[1:], torch=torch
                )
            except Exception as error:  # a failure is a result (sklearn at 1e6)
                row = dict(
                    system=name, n=n, error=f"{type(error).__name__}: {error}"[:300]
                )
                results.append(row)
                print(json.dumps(row), flush=True)
                traceback.print_exc()
            with progress.open("a") as f:
                f.write(json.dumps(results[-1]) + "\n")
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
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
            with progress.open("a") as f:
                f.write(json.dumps(results[-1]) + "\n")
    return meta, results


def _numpy_fit(X, y, alpha):
    from sklearn_dof import DoFKernelRidge

    return DoFKernelRidge(alpha=alpha, gamma=GAMMA, n_components=P, random_state=0).fit(
        X, y
    )


def summarise(results):
    by = {(r["system"], r["n"]): r for r in results if "fit_s" in r}
    rows = []
    for (system, n), r in sorted(by.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        row = dict(system=system, n=n, fit_s=round(r["fit_s"], 3))
        ref = by.get(("reference_float64", n))
        sk = by.get(("sklearn_xp_float64", n))
        if ref:
            row["over_reference"] = round(r["fit_s"] / ref["fit_s"], 2)
        if sk:
            row["sklearn_over_this"] = round(sk["fit_s"] / r["fit_s"], 2)
        row["test_mse_noisy"] = round(r["test_mse_noisy"], 5)
        rows.append(row)
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", default="100000,1000000")
    parser.add_argument("--systems", default="ours_xp,reference,sklearn_xp,ours_numpy")
    parser.add_argument("--output-dir", type=Path, default=DEFAULT_OUTPUT)
    args = parser.parse_args(argv)
    args.output_dir.mkdir(parents=True, exist_ok=True)
    n_values = [int(float(v)) for v in args.n.split(",")]
    meta, results = run(n_values, args.output_dir, set(args.systems.split(",")))
    summary = summarise(results)
    for row in summary:
        print(row)
    out = args.output_dir / "results.json"
    out.write_text(
        json.dumps(dict(meta=meta, results=results, summary=summary), indent=1) + "\n"
    )
    print(f"-> {out}")


if __name__ == "__main__":
    main()

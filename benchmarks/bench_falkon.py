"""DoFKernelRidge against Falkon on CPU, equal centres and penalty, real data.

Falkon (Meanti et al., NeurIPS 2020; ``FalkonML/falkon``) is not a
dependency of this project: build it from source in a virtual environment
of its own and pass that interpreter as ``--falkon-python``::

    python3 -m venv /tmp/falkon-venv && . /tmp/falkon-venv/bin/activate
    pip install torch==2.13.0 numpy scipy scikit-learn ninja psutil
    git clone https://github.com/FalkonML/falkon && cd falkon
    FORCE_ONLY_CPU=1 pip install --no-build-isolation -e .

The problem: kin40k (its files pooled, standardised, shuffled once, 32,000
training and 8,000 test rows), RBF ``gamma = 1/8`` (Falkon's
``GaussianKernel(sigma=2)``), ``lambda = 1e-5``.  Both systems get the same
``M`` uniform centres, ``uniform_columns(n, M, random_state=0)`` (Falkon by
``FixedSelector``), their defaults otherwise.  Each fit runs in a child
process with ``--threads`` threads, A B A B per ``M``; reported: every run,
the medians and their ratio.  ``--data synthetic``: the problem of
``bench_scaling.py`` at ``n = 10^6`` (``gamma = 1/18``, ``lambda = 1e-6``).
``--systems ours-auto``: ``n_components="auto"`` with ``max_components=M``,
then the int fit at its rank in the same child (``auto_over_int_fit_s``).

Usage::

    python benchmarks/bench_falkon.py --falkon-python /tmp/falkon-venv/bin/python
    python benchmarks/bench_falkon.py --falkon-python /tmp/falkon-venv/bin/python \
        --data synthetic --centres 10000,20000 --repeat 1
    # the solvers of DoFKernelRidge side by side (no Falkon needed):
    python benchmarks/bench_falkon.py --systems ours-direct,ours-cg \
        --centres 1000,2000,4000,8000

Results: ``results/falkon/results.json`` (``results/falkon/solvers/`` for
the solvers); the headline in ``results/falkon/history.jsonl``.
"""

import argparse
import json
import resource
import sys
import time

import numpy as np
from _common import load_pooled
from _harness import (
    ROOT,
    add_arguments,
    alternate,
    append_history,
    child_main,
    median,
    run_child,
    start_run,
    write_results,
)

BENCHMARK = "falkon"
# (gamma, lambda, default training rows) of each problem: kin40k, and the
# synthetic problem of bench_scaling.py (X ~ N(0, I_8), a smooth target of
# unit scale, noise 0.1; its 10,000 test rows) at the penalty of the GPU
# measurements (doc/gpus.rst), where 10,000-20,000 centres are the regime.
PROBLEMS = {
    "kin40k": (1.0 / 8.0, 1e-5, 32_000),
    "synthetic": (1.0 / 18.0, 1e-6, 1_000_000),
}
# Falkon's CPU memory for its blocks (``FalkonOptions.max_cpu_mem``) on the
# synthetic problem: unbounded (its default) it allocates ``K(X, I)`` whole,
# 80 GB at 1e6 rows and 10,000 centres, and fails.
FALKON_CPU_MEM = 4 * 2**30
GAMMA, LAMBDA, N_TRAIN = PROBLEMS["kin40k"]


def load(n_train=N_TRAIN, data="kin40k"):
    if data == "synthetic":
        from bench_scaling import make_data

        X, y, X_test, y_test, _ = make_data(n_train, 8)
        return X, y, X_test, y_test
    return load_pooled("kin40k", n_train)


def centres(n, M):
    from sklearn_dof import uniform_columns

    return uniform_columns(n, M, random_state=0)


def fit_ours(X, y, idx, threads, solver="auto", gamma=GAMMA, lam=LAMBDA):
    from sklearn_dof import DoFKernelRidge

    # The default uniform sampler draws exactly ``idx`` (checked below).
    model = DoFKernelRidge(
        alpha=X.shape[0] * lam,
        gamma=gamma,
        n_components=len(idx),
        solver=solver,
        random_state=0,
    )

    def fit():
        model.fit(X, y)
        assert np.array_equal(model.nystroem_.component_indices_, idx)

    return model, fit, model.predict


def fit_ours_auto(X, y, idx, threads, solver="auto", gamma=GAMMA, lam=LAMBDA):
    """The automatic rank up to ``max_components = len(idx)`` (the same
    problem; its landmarks are its own)."""
    from sklearn_dof import DoFKernelRidge

    model = DoFKernelRidge(
        alpha=X.shape[0] * lam,
        gamma=gamma,
        n_components="auto",
        max_components=len(idx),
        random_state=0,
    )
    return model, lambda: model.fit(X, y), model.predict


def fit_falkon(
    X, y, idx, threads, solver=None, gamma=GAMMA, lam=LAMBDA, max_cpu_mem=np.inf
):
    import falkon
    import torch
    from falkon.center_selection import FixedSelector

    torch.set_num_threads(threads)
    Xt, yt = torch.from_numpy(X), torch.from_numpy(y[:, None])
    options = falkon.FalkonOptions(
        use_cpu=True, keops_active="no", max_cpu_mem=max_cpu_mem
    )
    # k(x, x') = exp(-|x - x'|^2 / (2 sigma^2)) = exp(-gamma |x - x'|^2).
    kernel = falkon.kernels.GaussianKernel(sigma=np.sqrt(0.5 / gamma), opt=options)
    model = falkon.Falkon(
        kernel=kernel,
        penalty=lam,
        M=len(idx),
        center_selection=FixedSelector(Xt[idx]),
        options=options,
    )

    def predict(X_test):
        return model.predict(torch.from_numpy(X_test)).numpy().ravel()

    return model, lambda: model.fit(Xt, yt), predict


def child(case):
    data = case.get("data", "kin40k")
    gamma, lam, n_train = PROBLEMS[data]
    X, y, X_test, y_test = load(case.get("n_train", n_train), data)
    idx = centres(X.shape[0], case["M"])
    system = case["system"]
    build = {"falkon": fit_falkon, "ours-auto": fit_ours_auto}.get(system, fit_ours)
    solver = system.partition("-")[2] or "auto"  # ours, ours-direct, ours-cg
    solver = "auto" if system == "ours-auto" else solver
    extra = {}
    if system == "falkon" and data == "synthetic":
        extra["max_cpu_mem"] = FALKON_CPU_MEM
    model, fit, predict = build(X, y, idx, case["threads"], solver, gamma, lam, **extra)
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    t = time.perf_counter()
    fit()
    fit_s = time.perf_counter() - t
    out = dict(case, fit_s=fit_s, rss_before_fit_bytes=rss_before)
    out["peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    out["test_mse"] = float(np.mean((predict(X_test) - y_test) ** 2))
    if system != "falkon":
        out["n_iter"] = model.n_iter_  # None: the direct solve
    if system == "ours-auto":
        # The int fit at the rank chosen, in the same process after it.
        rank = int(model.n_components_)
        out["n_components_"] = rank
        out["loss_estimate_"] = model.nystroem_.loss_estimate_
        int_model, int_fit, int_predict = fit_ours(
            X, y, centres(X.shape[0], rank), case["threads"], "auto", gamma, lam
        )
        t = time.perf_counter()
        int_fit()
        out["int_fit_s"] = time.perf_counter() - t
        out["int_test_mse"] = float(np.mean((int_predict(X_test) - y_test) ** 2))
        out["auto_over_int_fit_s"] = fit_s / out["int_fit_s"]
    return out


def run_case(case, python, threads):
    # The children import this project from the checkout, whatever venv.
    return run_child(
        __file__, case, threads, check=False, python=python, pythonpath=ROOT
    )


def headline(payload):
    """Per ``M``: each system's median fit seconds, peak RSS and test MSE,
    and each system's time over the first one's."""
    return {f"M={row['M']}": row for row in payload["summary"]}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--falkon-python", required=False)
    parser.add_argument("--centres", default="1000,3000")
    parser.add_argument("--repeat", type=int, default=2, help="A B rounds per M")
    parser.add_argument(
        "--data",
        default="kin40k",
        choices=sorted(PROBLEMS),
        help="kin40k (32,000 training rows) or synthetic (1e6 rows)",
    )
    parser.add_argument(
        "--n-train", type=int, default=None, help="training rows (smoke runs)"
    )
    add_arguments(parser, BENCHMARK)
    parser.add_argument(
        "--systems",
        default="ours,falkon",
        help="ours (solver='auto'), ours-direct, ours-cg, ours-auto "
        "(n_components='auto' up to max_components=M, then the int fit at its "
        "rank), falkon; the first is the base of the ratios",
    )
    args = parser.parse_args(argv)
    if args.child:
        return child_main(child, args.child)
    run = start_run(args.threads)
    systems = args.systems.split(",")
    if "falkon" in systems and not args.falkon_python:
        parser.error("--falkon-python is required (see the module docstring)")
    python = {s: sys.executable for s in systems}
    python["falkon"] = args.falkon_python
    gamma, lam, n_train = PROBLEMS[args.data]
    if args.n_train is None:
        args.n_train = n_train
    results, summary = [], []
    for M in (int(m) for m in args.centres.split(",")):
        small = {} if args.n_train == n_train else {"n_train": args.n_train}
        if args.data != "kin40k":
            small["data"] = args.data

        def fit(system, case):
            return run_case(case, python[system], args.threads)

        def show(_, r):
            print(json.dumps(r), flush=True)
            results.append(r)

        runs = alternate(
            fit,
            {s: dict(system=s, M=M, threads=args.threads, **small) for s in systems},
            args.repeat,
            on_result=show,
        )
        done = {s: [r for r in rs if "fit_s" in r] for s, rs in runs.items()}
        if all(done.values()):
            base = systems[0]
            row = {"M": M}
            for s, rs in done.items():
                row[f"{s}_fit_s"] = median([r["fit_s"] for r in rs])
                row[f"{s}_peak_rss_gib"] = max(r["peak_rss_bytes"] for r in rs) / 2**30
                row[f"{s}_test_mse"] = rs[0]["test_mse"]
                if "n_iter" in rs[0]:
                    row[f"{s}_n_iter"] = rs[0]["n_iter"]
                for key in ("n_components_", "int_fit_s", "auto_over_int_fit_s"):
                    if key in rs[0]:
                        row[f"{s}_{key}"] = median([r[key] for r in rs])
            for s in systems[1:]:
                row[f"{s}_over_{base}_fit_s"] = row[f"{s}_fit_s"] / row[f"{base}_fit_s"]
            summary.append(row)
    print(json.dumps(summary, indent=1))
    out = {
        "config": {
            "data": (
                f"kin40k pooled, {args.n_train:,} train, the rest test"
                if args.data == "kin40k"
                else f"bench_scaling.make_data({args.n_train:,}, 8), its test rows"
            ),
            "gamma": gamma,
            "lambda": lam,
            "threads": args.threads,
            "systems": systems,
        },
        "results": results,
        "summary": summary,
    }
    path = args.output_dir / "results.json"
    write_results(path, out, run)
    append_history(args.output_dir, BENCHMARK, run, headline(out), results=path)


if __name__ == "__main__":
    main()

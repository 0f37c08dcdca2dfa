"""Four column samplers: the smallest rank reaching 1% of exact, fit time, auto.

For each problem and each sampler of :class:`sklearn_dof.DoFNystroem`
(``uniform``, ``pivoted``, ``leverage``, ``rpcholesky``):

1. the sampler's landmark sequence (``component_indices_`` of a fit at the
   largest rank; every prefix is a landmark set of that sampler), one per
   seed;
2. the error of kernel ridge regression on the Nystroem approximation of each
   prefix on a geometric grid of ranks, over the error of exact kernel ridge
   at the same penalty (the oracle penalty of exact kernel ridge);
3. the smallest rank from which the seed-averaged ratio stays within 1%,
   ``p_min``, and the fit time of :class:`sklearn_dof.DoFKernelRidge` at it;
4. where ``n_components="auto"`` lands (rank, ratio, fit time) and the
   constant ``p_min / d`` that each problem needs (``d = d_max`` for uniform
   and pivoted, ``d_eff`` for leverage and rpcholesky), which calibrates
   the ``rank_factor`` of :data:`sklearn_dof.SAMPLING_RULES`.

Problems: the periodic spline problems of Bach (2013) (in-sample error against
the noiseless target), :func:`sklearn_dof.datasets.make_clustered` (clusters
of very different density and outliers: ``d_max >> d_eff``; in-sample error
against the noiseless target), and two real data sets from ``../shared/data``
(abalone, pumadyn-32nm; RBF kernel, test error on held-out rows).

Usage::

    python benchmarks/bench_samplers.py            # about 10 minutes
    python benchmarks/bench_samplers.py --quick    # about 1 minute

One process on one BLAS thread (the error curves are many small solves).
Results: ``results/samplers/`` (``results.json``, ``table.md``,
``samplers.png``); the headline (per problem and sampler: ``p_min``,
``p_min / d``, the automatic rank and its error ratio) appended to
``results/samplers/history.jsonl``.
"""

import argparse
import math
import time

import numpy as np
from _common import (
    DEFAULT_LAMBDAS,
    format_table,
    make_problem,
    smallest_sufficient_rank,
)
from _harness import (
    SHARED_DATA,
    add_arguments,
    append_history,
    start_run,
    timed,
    write_results,
)
from scipy import linalg
from sklearn.metrics.pairwise import rbf_kernel
from threadpoolctl import threadpool_limits

from sklearn_dof import (
    SAMPLING_RULES,
    DoFKernelRidge,
    DoFNystroem,
    degrees_of_freedom,
)
from sklearn_dof.datasets import make_clustered

BENCHMARK = "samplers"
SAMPLINGS = ("uniform", "pivoted", "leverage", "rpcholesky")


class Problem:
    """Training kernel, targets, and the rows the error is measured on.

    ``K_eval`` (m, n) holds the kernel between evaluation rows and training
    rows, ``target`` (m,) what predictions there are compared with: the
    noiseless target on the training rows (in-sample), or held-out ``y``.
    ``fit_args`` rebuild the problem for an estimator (data, kernel, gamma).
    """

    def __init__(self, name, K, y, K_eval, target, fit_X, kernel, gamma):
        self.name, self.K, self.y = name, K, y
        self.K_eval, self.target = K_eval, target
        self.fit_X, self.kernel, self.gamma = fit_X, kernel, gamma

    @property
    def n(self):
        return self.K.shape[0]

    def estimator_params(self):
        if self.kernel == "precomputed":
            return {"kernel": "precomputed"}
        return {"kernel": "rbf", "gamma": self.gamma}


def spline_problem(n, beta, delta, seed):
    data = make_problem(n, beta=beta, delta=delta, seed=seed)
    return Problem(
        f"spline b={beta} d={delta}",
        data.K,
        data.y,
        data.K,
        data.f,
        data.K,
        "precomputed",
        None,
    )


def clustered_problem(n, seed, gamma=1.0):
    data = make_clustered(n, random_state=seed)
    K = rbf_kernel(data.X, gamma=gamma)
    return Problem("clustered", K, data.y, K, data.f, data.X, "rbf", gamma)


def real_problem(name, n_train, n_test, seed, gamma_scale=1.0):
    path = SHARED_DATA / f"{name}.npz"
    if not path.exists():
        return None
    d = np.load(path)
    X, y = d["X"].astype(np.float64), d["y"].astype(np.float64)
    rng = np.random.RandomState(seed)
    rows = rng.permutation(X.shape[0])[: n_train + n_test]
    X, y = X[rows], y[rows]
    mean, std = X[:n_train].mean(0), X[:n_train].std(0)
    X = (X - mean) / np.where(std > 0, std, 1.0)
    y = (y - y[:n_train].mean()) / y[:n_train].std()
    gamma = gamma_scale / X.shape[1]
    K_all = rbf_kernel(X, gamma=gamma)
    tr, te = slice(0, n_train), slice(n_train, None)
    return Problem(
        name, K_all[tr, tr], y[tr], K_all[te, tr], y[te], X[tr], "rbf", gamma
    )


def exact_errors(problem, alphas):
    """Error of exact kernel ridge at each penalty (one eigendecomposition)."""
    eigvals, U = linalg.eigh(problem.K)
    eigvals = np.clip(eigvals, 0, None)
    Uy = U.T @ problem.y
    KU = problem.K_eval @ U
    errors = []
    for a in alphas:
        pred = KU @ (Uy / (eigvals + a))
        errors.append(np.mean((pred - problem.target) ** 2))
    return np.array(errors)


def prefix_errors(problem, pivots, alpha, ranks):
    """Error of Nystroem kernel ridge on ``pivots[:p]`` for each ``p`` of ``ranks``.

    The features are those of :class:`sklearn_dof.DoFNystroem`,
    ``K(:, I) K(I, I)^{+1/2}`` by one symmetric eigendecomposition per rank:
    growing one Cholesky factor a pivot at a time in a random order is
    numerically unstable on kernels of low numerical rank (dense clusters),
    and would put rounding errors into the curves of the random samplers.
    """
    errors = []
    for p in ranks:
        idx = np.asarray(pivots[: min(p, len(pivots))])
        eigvals, U = linalg.eigh(problem.K[np.ix_(idx, idx)])
        keep = eigvals > 1e-12 * eigvals.max()
        W = U[:, keep] / np.sqrt(eigvals[keep])
        Phi = problem.K[:, idx] @ W
        Phi_eval = problem.K_eval[:, idx] @ W
        w = linalg.solve(
            Phi.T @ Phi + alpha * np.eye(Phi.shape[1]),
            Phi.T @ problem.y,
            assume_a="pos",
        )
        errors.append(np.mean((Phi_eval @ w - problem.target) ** 2))
    return np.array(errors)


def rank_grid(n, start=4, factor=1.15):
    ranks = [start]
    while ranks[-1] < n:
        ranks.append(min(n, max(ranks[-1] + 1, int(math.ceil(ranks[-1] * factor)))))
    return ranks


def fit_timed(problem, alpha, sampling, n_components, seed):
    model = DoFKernelRidge(
        alpha=alpha,
        n_components=n_components,
        sampling=sampling,
        fit_intercept=False,
        random_state=seed,
        **problem.estimator_params(),
    )
    return timed(model.fit, problem.fit_X, problem.y)


def auto_ratio(problem, model, error_exact):
    """Error ratio of a fitted model's landmarks, through the same factor."""
    idx = model.nystroem_.component_indices_
    p = len(idx)
    return float(prefix_errors(problem, idx, model.alpha, [p])[0] / error_exact)


def run_problem(make, seeds, max_rank_factor):
    """Every measurement on one problem (several seeds)."""
    records = []
    for seed in seeds:
        problem = make(seed)
        n = problem.n
        alphas = n * DEFAULT_LAMBDAS
        errs = exact_errors(problem, alphas)
        best = int(np.argmin(errs))
        alpha, error_exact = float(alphas[best]), float(errs[best])
        exact = degrees_of_freedom(problem.K, alpha)
        p_max = min(n, max(64, int(max_rank_factor * exact.d_max)))
        ranks = [p for p in rank_grid(n) if p <= p_max]
        rec = {
            "seed": seed,
            "n": n,
            "alpha": alpha,
            "lambda": alpha / n,
            "error_exact": error_exact,
            "d_max": exact.d_max,
            "d_eff": exact.d_eff,
            "d_ave": exact.d_ave,
            "ranks": ranks,
            "ratios": {},
            "auto": {},
        }
        for s in SAMPLINGS:
            nys = DoFNystroem(
                alpha=alpha,
                n_components=ranks[-1],
                sampling=s,
                random_state=seed,
                **problem.estimator_params(),
            ).fit(problem.fit_X)
            errors = prefix_errors(problem, nys.component_indices_, alpha, ranks)
            rec["ratios"][s] = errors / error_exact
            model, seconds = fit_timed(problem, alpha, s, "auto", seed)
            rec["auto"][s] = {
                "n_components": int(model.n_components_),
                "d_max_est": float(model.dof_),
                "d_eff_est": float(model.effective_dof_),
                "ratio": auto_ratio(problem, model, error_exact),
                "fit_seconds": seconds,
            }
        records.append((problem, rec))
    return records


def summarise(name, records):
    """One row per sampler: p_min, constants, auto rank and its promise."""
    problems = [p for p, _ in records]
    recs = [r for _, r in records]
    ranks = recs[0]["ranks"]
    n_common = min(len(r["ranks"]) for r in recs)
    ranks = ranks[:n_common]
    rows = []
    for s in SAMPLINGS:
        mean_ratio = np.mean([r["ratios"][s][:n_common] for r in recs], axis=0)
        p_min = smallest_sufficient_rank(ranks, mean_ratio)
        basis = SAMPLING_RULES[s].rank_statistic
        d = float(np.mean([r[basis] for r in recs]))
        seconds = None
        if p_min is not None:
            _, seconds = fit_timed(
                problems[0], recs[0]["alpha"], s, int(p_min), recs[0]["seed"]
            )
        autos = [r["auto"][s] for r in recs]
        rows.append(
            {
                "problem": name,
                "sampling": s,
                "n": recs[0]["n"],
                "d_max": float(np.mean([r["d_max"] for r in recs])),
                "d_eff": float(np.mean([r["d_eff"] for r in recs])),
                "p_min": p_min,
                "c_needed": None if p_min is None else p_min / d,
                "fit_s_at_p_min": seconds,
                "p_auto": float(np.mean([a["n_components"] for a in autos])),
                "ratio_auto": float(np.mean([a["ratio"] for a in autos])),
                "fit_s_auto": float(np.mean([a["fit_seconds"] for a in autos])),
                "c": SAMPLING_RULES[s].rank_factor,
                "basis": basis,
                "curve_ranks": ranks,
                "curve_ratio": mean_ratio,
            }
        )
    uniform = rows[0]["p_min"]
    for row in rows:
        row["p_min_over_uniform"] = (
            None if row["p_min"] is None or uniform is None else row["p_min"] / uniform
        )
    return rows


COLUMNS = [
    ("problem", "problem", "s"),
    ("sampling", "sampler", "s"),
    ("n", "n", "d"),
    ("d_max", "d_max", ".1f"),
    ("d_eff", "d_eff", ".1f"),
    ("p_min", "p_min", "d"),
    ("p_min_over_uniform", "/uniform", ".2f"),
    ("c_needed", "p_min/d", ".2f"),
    ("fit_s_at_p_min", "fit s", ".3f"),
    ("p_auto", "p_auto", ".0f"),
    ("ratio_auto", "ratio auto", ".4f"),
    ("fit_s_auto", "fit s auto", ".3f"),
]


def plot(rows, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(dict.fromkeys(r["problem"] for r in rows))
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.8))
    width = 0.2
    for k, s in enumerate(SAMPLINGS):
        values = [
            next(r["p_min"] for r in rows if r["problem"] == nm and r["sampling"] == s)
            or np.nan
            for nm in names
        ]
        axes[0].bar(np.arange(len(names)) + (k - 1.5) * width, values, width, label=s)
    axes[0].set_xticks(np.arange(len(names)), names, rotation=30, ha="right")
    axes[0].set_yscale("log")
    axes[0].set_ylabel("smallest rank within 1% of exact (p_min)")
    axes[0].set_title("Columns each sampler needs")
    axes[0].legend()
    target = "clustered" if "clustered" in names else names[0]
    for s in SAMPLINGS:
        row = next(r for r in rows if r["problem"] == target and r["sampling"] == s)
        axes[1].plot(row["curve_ranks"], row["curve_ratio"], label=s)
        axes[1].axvline(row["p_auto"], ls=":", color=axes[1].lines[-1].get_color())
    axes[1].axhline(1.01, color="k", lw=0.8, ls="--")
    axes[1].set_xscale("log")
    axes[1].set_yscale("log")
    axes[1].set_xlabel("rank p")
    axes[1].set_ylabel("error ratio to exact kernel ridge")
    axes[1].set_title(f"{target}: error against rank (dotted: auto rank)")
    axes[1].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def headline(payload):
    """Per problem and sampler: ``p_min`` (the smallest rank within 1% of
    exact), ``p_min / d``, the automatic rank and its error ratio."""
    out = {}
    for row in payload["rows"]:
        out.setdefault(row["problem"], {})[row["sampling"]] = {
            "p_min": row["p_min"],
            "p_min_over_d": row["c_needed"],
            "p_auto": row["p_auto"],
            "ratio_auto": row["ratio_auto"],
        }
    return {"quick": payload["quick"], "problems": out}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes")
    parser.add_argument(
        "--n", type=int, default=None, help="points of each problem (smoke runs)"
    )
    parser.add_argument(
        "--problems", default=None, help="comma-separated subset of the problems"
    )
    add_arguments(parser, BENCHMARK, threads=1, child=False)
    args = parser.parse_args(argv)
    args.output_dir.mkdir(parents=True, exist_ok=True)
    run = start_run(args.threads)
    start = time.perf_counter()

    n = args.n or (500 if args.quick else 1000)
    seeds = range(2) if args.quick else range(4)
    splines = (
        [(1, 2), (2, 8), (4, 8)]
        if args.quick
        else [(1, 2), (1, 8), (2, 2), (2, 8), (4, 2), (4, 8)]
    )
    makers = [
        (f"spline b={b} d={d}", lambda seed, b=b, d=d: spline_problem(n, b, d, seed))
        for b, d in splines
    ]
    makers.append(("clustered", lambda seed: clustered_problem(n, seed)))
    n_real = args.n or (1000 if args.quick else 2000)
    for name in ("abalone", "pumadyn32nm"):
        if real_problem(name, 10, 10, 0) is not None:
            makers.append(
                (name, lambda seed, nm=name: real_problem(nm, n_real, 1000, seed))
            )

    if args.problems:
        makers = [m for m in makers if m[0] in args.problems.split(",")]
    rows = []
    with threadpool_limits(args.threads):
        for name, make in makers:
            t0 = time.perf_counter()
            rows += summarise(name, run_problem(make, seeds, 12.0))
            print(f"{name}: {time.perf_counter() - t0:.1f} s", flush=True)

    table = format_table(rows, COLUMNS)
    print(table)
    (args.output_dir / "table.md").write_text(
        format_table(rows, COLUMNS, markdown=True) + "\n"
    )
    plot(rows, args.output_dir / "samplers.png")
    payload = {
        "quick": args.quick,
        "seeds": list(seeds),
        "seconds": time.perf_counter() - start,
        "rows": rows,
    }
    out = args.output_dir / "results.json"
    write_results(out, payload, run)
    append_history(args.output_dir, BENCHMARK, run, headline(payload), results=out)
    print(f"total {time.perf_counter() - start:.0f} s -> {args.output_dir}")


if __name__ == "__main__":
    main()

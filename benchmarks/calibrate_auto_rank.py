"""Calibrate the constants of ``n_components="auto"`` (:func:`sklearn_dof.auto_rank`).

The automatic rank is ``p = ceil(c * d_max) + offset`` with ``d_max`` the
estimated maximal marginal degrees of freedom.  This script measures, on the
periodic spline problems of Bach (2013, Section 4), how many columns the
Nystroem approximation really needs, and which ``c`` (per column sampling
rule) that implies.

For every problem (``beta`` in {1, 2, 4}, ``delta`` in {2, 8}, random design,
``n`` in {500, 1000, 2000}) and seed (which draws the points, the noise and the
uniform columns):

1. ``lambda`` minimises the in-sample error of exact kernel ridge regression
   on a log grid (the paper's oracle choice), ``alpha = n * lambda``;
2. exact ``d_max``, ``d_eff``, ``d_ave`` and their estimates by
   :func:`sklearn_dof.estimate_degrees_of_freedom`;
3. the in-sample error ratio ``err(L_p) / err(K)`` for every ``p`` up to a
   multiple of ``d_max``, for a few uniform column draws and for greedy
   pivoting (one nested factor each), and the smallest ``p`` from which the
   ratio averaged over seeds (and draws) stays within 1%;
4. the rank :class:`sklearn_dof.DoFNystroem` chooses and its error ratio;
5. the constants ``c`` each problem needs, and how far ``y``-free adaptive
   stopping rules for the number of pivots get.

Results go to ``--output-dir`` (default ``results/calibrate_auto_rank``):
``results.json`` (every scalar, the analysis and the run record),
``curves.json.gz`` (gzipped JSON, not kept in git: per seed and draw, the
error ratio and the residual statistics for every ``p`` up to the range the
analysis uses), ``table.csv`` and ``table.md``; the headline (per sampler:
the current constant, the constant each problem needs, the worst error
ratio of the automatic rank) is appended to
``results/calibrate_auto_rank/history.jsonl``.  One process on one BLAS
thread: a calibration, whose timings are not the point.

Usage::

    python benchmarks/calibrate_auto_rank.py            # about 6 minutes
    python benchmarks/calibrate_auto_rank.py --quick    # about 15 seconds
"""

import argparse
import csv
import math
import time

import numpy as np
from _common import (
    DEFAULT_LAMBDAS,
    SpectralKRR,
    best_penalty,
    format_table,
    in_sample_error,
    make_problems,
    nested_factor,
    prefix_path,
    smallest_sufficient_rank,
)
from _harness import (
    add_arguments,
    append_history,
    start_run,
    write_json,
    write_results,
)
from sklearn.linear_model import Ridge
from threadpoolctl import threadpool_limits

from sklearn_dof import SAMPLING_RULES, DoFNystroem, estimate_degrees_of_freedom

# The current constants of n_components="auto" (ceil(c * d_max) for the
# uniform and pivoted rules calibrated here).
AUTO_RANK_FACTOR = {s: rule.rank_factor for s, rule in SAMPLING_RULES.items()}

# auto_rank is ceil(c * d_max) with no additive offset; other offsets are
# still scored below for comparison.
AUTO_RANK_OFFSET = 0

TOL = 0.01
SAMPLINGS = ("uniform", "pivoted")
BETAS = (1, 2, 4)
DELTAS = (2, 8)
OFFSETS = (0, 1, 2, 4)
C_GRID = np.round(np.arange(0.05, 20.0 + 1e-9, 0.05), 2)
EPS_GRID = np.logspace(-4, 1, 51)
HALVES = (slice(0, None, 2), slice(1, None, 2))
# Round constants around the calibrated ones, to see the margins.
CANDIDATES = {
    "uniform": (2.0, 2.25, 2.5, 2.75, 3.0, 3.5),
    "pivoted": (1.0, 1.25, 1.5, 1.75, 2.0),
}
CANDIDATE_OFFSETS = (0, 1, 2, 4)
BENCHMARK = "calibrate_auto_rank"


def _dof_move(stats):
    """Relative growth of ``tr L (L + alpha I)^-1`` since half as many pivots."""
    dof = stats["dof_lower"]
    half = dof[..., np.arange(dof.shape[-1]) // 2]
    with np.errstate(divide="ignore", invalid="ignore"):
        move = (dof - half) / dof
    move[..., :2] = np.inf  # nothing to compare with yet
    return move


# y-free statistics of a growing factor; a rule stops at the first p where the
# statistic is <= eps.  tr(E) / alpha is the width of the certified bracket of
# d_eff, max_i E_ii / alpha the quantity greedy pivoting drives down, and the
# last one is "the lower bound on d_eff stopped moving".
RULES = {
    "trace": (
        "tr(K - L) / alpha <= eps",
        lambda s: s["residual_trace"] / s["alpha"],
    ),
    "trace_rel": (
        "tr(K - L) / alpha <= eps * tr L(L + alpha I)^-1",
        lambda s: s["residual_trace"] / (s["alpha"] * s["dof_lower"]),
    ),
    "max": (
        "max_i (K - L)_ii / alpha <= eps",
        lambda s: s["residual_max"] / s["alpha"],
    ),
    "dof_move": (
        "d_lower(p) - d_lower(p // 2) <= eps * d_lower(p)",
        _dof_move,
    ),
}


def _column_seed(seed, draw):
    # Draw 0 is the permutation DoFNystroem(random_state=seed) uses, so its
    # curve must reproduce the automatic fit; other draws are independent.
    return seed if draw == 0 else np.random.RandomState([seed, draw])


def _auto_fit(K, y, f, alpha, sampling, seed, error_exact):
    nys = DoFNystroem(
        kernel="precomputed", alpha=alpha, sampling=sampling, random_state=seed
    ).fit(K)
    features = nys.transform(K)
    fitted = Ridge(alpha=alpha, fit_intercept=False).fit(features, y).predict(features)
    return {
        "n_components": int(nys.n_components_),
        "d_max_est": float(nys.dof_),
        "d_eff_est": float(nys.effective_dof_),
        "dof_columns": int(nys.dof_columns_),
        "error_ratio": in_sample_error(fitted, f) / error_exact,
    }


def run_seed(data, krr, seed, n_draws):
    """Every measurement on one problem instance; arrays are indexed by p."""
    K, y, f = data.K, data.y, data.f
    n = K.shape[0]
    best = best_penalty(krr, y, f, DEFAULT_LAMBDAS)
    alpha = best.alpha
    exact = krr.degrees_of_freedom(alpha)
    est = estimate_degrees_of_freedom(K, alpha, kernel="precomputed", random_state=seed)
    record = {
        "seed": seed,
        "lambda": best.lambda_,
        "alpha": alpha,
        "lambda_index": best.index,
        "error_exact": best.error,
        "errors_exact_grid": best.errors,
        "d_max": exact.d_max,
        "d_eff": exact.d_eff,
        "d_ave": exact.d_ave,
        "estimate": {
            "d_max": est.d_max,
            "d_eff": est.d_eff,
            "d_ave": est.d_ave,
            "n_columns": est.n_columns,
        },
        "auto": {s: _auto_fit(K, y, f, alpha, s, seed, best.error) for s in SAMPLINGS},
    }
    # Far enough past both d_max and the automatic ranks that the tail of the
    # curve settles (uniform columns need up to ~10 d_max on beta = 1); every
    # p up to there is scored, with one QR per factor.
    p_auto = max(a["n_components"] for a in record["auto"].values())
    n_pivots = min(n, max(64, math.ceil(16 * exact.d_max), 4 * p_auto))
    record["n_pivots"] = n_pivots

    record["curves"] = {}
    for sampling in SAMPLINGS:
        draws = range(n_draws if sampling == "uniform" else 1)
        stats = {
            k: [] for k in ("ratio", "dof_lower", "residual_trace", "residual_max")
        }
        for draw in draws:
            grown = nested_factor(
                K, n_pivots, sampling=sampling, random_state=_column_seed(seed, draw)
            )
            path = prefix_path(grown.factor, y, f, alpha)
            stats["ratio"].append(path.errors[grown.rank] / best.error)
            stats["dof_lower"].append(path.dof_lower[grown.rank])
            stats["residual_trace"].append(grown.residual_trace)
            stats["residual_max"].append(grown.residual_max)
        record["curves"][sampling] = {k: np.array(v) for k, v in stats.items()}
        auto = record["auto"][sampling]
        # Same columns and alpha, so the two computations agree up to rounding
        # (which near-duplicate landmarks amplify in DoFNystroem's K(I, I)^-1/2
        # to about 1e-3 of the ratio).
        auto["curve_error_ratio"] = float(
            stats["ratio"][0][min(auto["n_components"], n_pivots)]
        )
    return record


def _ratio_at(curves, p):
    """Mean over seeds and draws of ``curves[s, d, p[s, d]]`` (p clipped)."""
    p = np.clip(np.broadcast_to(p, curves.shape[:2]), 0, curves.shape[2] - 1)
    picked = np.take_along_axis(curves, p[..., None].astype(np.intp), axis=2)
    return float(picked.mean())


def _constant_rule(d_est, offset, c):
    # The same arithmetic as auto_rank, without its cap at n: ranks past the
    # scored curve are clipped to its end by _ratio_at.
    return np.ceil(c * d_est) + offset


def needed_constant(curves, d_est, offset):
    """Smallest c of the grid from which ``ceil(c d_est) + offset`` suffices.

    Sufficient means the error ratio averaged over seeds and draws is within
    ``TOL``, for this c and every larger one of the grid (ranks beyond the
    scored curve count as the last scored rank).  ``d_est`` holds one
    estimate per seed, DoFNystroem's, which all the uniform draws of that
    seed share.
    """
    ok = np.array(
        [
            _ratio_at(curves, _constant_rule(d_est, offset, c)[:, None]) <= 1 + TOL
            for c in C_GRID
        ]
    )
    return smallest_sufficient_rank(C_GRID, np.where(ok, 1.0, np.inf), tol=0.0)


def needed_threshold(curves, statistic):
    """Largest eps of the grid below which a stopping rule always suffices."""
    ok = np.array(
        [_ratio_at(curves, _first_below(statistic, eps)) <= 1 + TOL for eps in EPS_GRID]
    )
    if not ok[0]:
        return None
    bad = np.flatnonzero(~ok)
    return float(EPS_GRID[-1] if bad.size == 0 else EPS_GRID[bad[0] - 1])


def _first_below(statistic, eps):
    """First p >= 1 with ``statistic[..., p] <= eps``, else the last p."""
    below = statistic[..., 1:] <= eps
    first = np.argmax(below, axis=-1) + 1
    return np.where(below.any(axis=-1), first, statistic.shape[-1] - 1)


def _stack(records, sampling, key, n_columns):
    return np.stack([r["curves"][sampling][key][:, :n_columns] for r in records])


def summarise_problem(beta, delta, n, records):
    """Aggregate over seeds; curves are cut to the shortest seed's range."""
    P = min(r["n_pivots"] for r in records)
    ranks = np.arange(1, P + 1)
    row = {
        "problem": f"b={beta},d={delta}",
        "beta": beta,
        "delta": delta,
        "n": n,
        "n_seeds": len(records),
        "p_max_scored": P,
        "lambda": float(np.median([r["lambda"] for r in records])),
        "lambdas": [r["lambda"] for r in records],
    }
    for key in ("d_max", "d_eff", "d_ave"):
        row[key] = float(np.mean([r[key] for r in records]))
    for key in ("d_max", "d_eff", "d_ave", "n_columns"):
        row[f"est_{key}"] = float(np.mean([r["estimate"][key] for r in records]))

    curves, statistics = {}, {}
    for s in SAMPLINGS:
        curves[s] = _stack(records, s, "ratio", P + 1)
        alphas = np.array([r["alpha"] for r in records])[:, None, None]
        stats = {
            key: _stack(records, s, key, P + 1)
            for key in ("dof_lower", "residual_trace", "residual_max")
        }
        stats["alpha"] = alphas
        # Before the first pivot the relative statistics divide by zero.
        with np.errstate(divide="ignore", invalid="ignore"):
            statistics[s] = {name: rule(stats) for name, (_, rule) in RULES.items()}

        mean_curve = curves[s].mean(axis=(0, 1))
        p_min = smallest_sufficient_rank(ranks, mean_curve[1:], TOL)
        auto = [r["auto"][s] for r in records]
        p_auto = float(np.mean([a["n_components"] for a in auto]))
        d_est = np.array([a["d_max_est"] for a in auto])
        row.update(
            {
                f"p_min_{s}": p_min,
                f"p_min_over_d_max_{s}": _div(p_min, row["d_max"]),
                f"p_min_over_d_eff_{s}": _div(p_min, row["d_eff"]),
                f"auto_p_{s}": p_auto,
                f"auto_d_max_est_{s}": float(d_est.mean()),
                f"auto_d_max_est_seeds_{s}": d_est,
                f"auto_ratio_{s}": float(np.mean([a["error_ratio"] for a in auto])),
                f"auto_ratio_all_draws_{s}": _ratio_at(
                    curves[s], np.array([a["n_components"] for a in auto])[:, None]
                ),
                f"auto_over_p_min_{s}": _div(p_auto, p_min),
                f"curve_check_{s}": float(
                    max(abs(a["error_ratio"] - a["curve_error_ratio"]) for a in auto)
                ),
                f"mean_ratio_curve_{s}": mean_curve,
            }
        )
        for offset in OFFSETS:
            row[f"c_{s}_offset{offset}"] = needed_constant(curves[s], d_est, offset)
            # The same on two disjoint halves of the seeds: how much of the
            # calibration is seed noise.
            row[f"c_{s}_offset{offset}_halves"] = [
                needed_constant(curves[s][half], d_est[half], offset) for half in HALVES
            ]
        row[f"c_{s}"] = row[f"c_{s}_offset{AUTO_RANK_OFFSET}"]
        for name in RULES:
            row[f"eps_{s}_{name}"] = needed_threshold(curves[s], statistics[s][name])
    return row, curves, statistics


def _div(a, b):
    return None if a is None or b is None or b == 0 else float(a) / float(b)


def _summary(values):
    values = [v for v in values if v is not None]
    if not values:
        return {"median": None, "max": None}
    return {"median": float(np.median(values)), "max": float(np.max(values))}


def analyse(rows, curves, statistics):
    """Which constants, or which adaptive thresholds, meet both requirements.

    Requirement 1: the error ratio, averaged over seeds (and uniform draws),
    within ``TOL`` on every problem.  Requirement 2: the chosen p at most
    about twice the smallest sufficient p, as a median over problems.
    """
    out = {"constant": {}, "candidates": {}, "adaptive": {}, "current": {}}

    def evaluate(choose, sampling):
        ratios, factors, ps = [], [], []
        for row, problem_curves, problem_stats in zip(
            rows, curves, statistics, strict=True
        ):
            p = choose(row, problem_stats[sampling])
            ratios.append(_ratio_at(problem_curves[sampling], p))
            ps.append(float(np.mean(p)))
            factors.append(_div(ps[-1], row[f"p_min_{sampling}"]))
        return {
            "ratio_max": float(max(ratios)),
            "n_problems_failing": int(sum(r > 1 + TOL for r in ratios)),
            "p_over_p_min": _summary(factors),
            "per_problem_ratio": ratios,
            "per_problem_p": ps,
        }

    def constant(sampling, c, offset):
        return lambda row, _: _constant_rule(
            np.array(row[f"auto_d_max_est_seeds_{sampling}"])[:, None], offset, c
        )

    for s in SAMPLINGS:
        c, offset = AUTO_RANK_FACTOR[s], AUTO_RANK_OFFSET
        out["current"][s] = {
            "c": c,
            "offset": offset,
            **evaluate(constant(s, c, offset), s),
        }
        out["constant"][s] = {}
        for offset in OFFSETS:
            needed = [row[f"c_{s}_offset{offset}"] for row in rows]
            entry = {"needed": _summary(needed)}
            halves = zip(
                *(row[f"c_{s}_offset{offset}_halves"] for row in rows), strict=True
            )
            entry["c_required_halves"] = [
                None if None in half else max(half) for half in halves
            ]
            if None not in needed:
                c = max(needed)
                entry["c_required"] = c
                entry.update(evaluate(constant(s, c, offset), s))
            out["constant"][s][str(offset)] = entry
        out["candidates"][s] = [
            {
                "c": c,
                "offset": offset,
                **evaluate(constant(s, c, offset), s),
            }
            for offset in CANDIDATE_OFFSETS
            for c in CANDIDATES[s]
        ]
        out["adaptive"][s] = {}
        for name, (description, _) in RULES.items():
            needed = [row[f"eps_{s}_{name}"] for row in rows]
            entry = {"rule": description, "needed": needed}
            if None not in needed:
                eps = min(needed)
                entry["eps_required"] = eps
                entry.update(
                    evaluate(
                        lambda row, stats, eps=eps, name=name: _first_below(
                            stats[name], eps
                        ),
                        s,
                    )
                )
            out["adaptive"][s][name] = entry
    return out


TABLE_LEGEND = """\
Means over seeds.  est: d_max estimated by estimate_degrees_of_freedom.
pmin: smallest p from which the error ratio err(L_p) / err(K), averaged over
seeds (and uniform draws), stays <= 1.01 (U uniform, P pivoted).  auto:
DoFNystroem's n_components_; err: its error ratio (one draw per seed).
c: smallest c for which p = ceil(c * d_max_est) + 4 suffices (averaged over
seeds and draws, for that c and all larger).
"""

TABLE_COLUMNS = [
    ("problem", "problem", "s"),
    ("n", "n", "d"),
    ("lambda", "lambda", ".1e"),
    ("d_max", "d_max", ".1f"),
    ("d_eff", "d_eff", ".1f"),
    ("d_ave", "d_ave", ".1f"),
    ("est_d_max", "est", ".1f"),
    ("p_min_uniform", "pmin U", "d"),
    ("p_min_pivoted", "pmin P", "d"),
    ("p_min_over_d_max_uniform", "pmin/dmax U", ".2f"),
    ("p_min_over_d_max_pivoted", "pmin/dmax P", ".2f"),
    ("auto_p_uniform", "auto U", ".1f"),
    ("auto_p_pivoted", "auto P", ".1f"),
    ("auto_ratio_uniform", "err U", ".4f"),
    ("auto_ratio_pivoted", "err P", ".4f"),
    ("auto_over_p_min_uniform", "auto/pmin U", ".2f"),
    ("auto_over_p_min_pivoted", "auto/pmin P", ".2f"),
    ("c_uniform", "c U", ".2f"),
    ("c_pivoted", "c P", ".2f"),
]


def _fmt(value, fmt=".3g"):
    return "-" if value is None else format(value, fmt)


def report(rows, analysis):
    """The text printed and saved next to the table."""
    lines = []
    for s in SAMPLINGS:
        cur = analysis["current"][s]
        needed = analysis["constant"][s][str(AUTO_RANK_OFFSET)]["needed"]
        lines.append(
            f"{s}: needed c (offset {AUTO_RANK_OFFSET}) median "
            f"{_fmt(needed['median'])}, max {_fmt(needed['max'])}; "
            f"current c={cur['c']:g}: worst ratio {cur['ratio_max']:.4f}, "
            f"{cur['n_problems_failing']} failing, p/p_min median "
            f"{_fmt(cur['p_over_p_min']['median'])} max "
            f"{_fmt(cur['p_over_p_min']['max'])}"
        )
    lines.append("")
    lines.append("Constant rule p = ceil(c * d_max_est) + offset, c = max needed:")
    for s in SAMPLINGS:
        for offset, entry in analysis["constant"][s].items():
            if "c_required" not in entry:
                lines.append(f"  {s:8s} offset {offset}: some problem never suffices")
                continue
            halves = ", ".join(_fmt(c) for c in entry["c_required_halves"])
            lines.append(
                f"  {s:8s} offset {offset}: c={entry['c_required']:.2f} "
                f"(halves of the seeds {halves}; median needed "
                f"{_fmt(entry['needed']['median'])}), worst ratio "
                f"{entry['ratio_max']:.4f}, p/p_min median "
                f"{_fmt(entry['p_over_p_min']['median'])} max "
                f"{_fmt(entry['p_over_p_min']['max'])}"
            )
    lines.append("")
    lines.append(
        "Candidate constants, per offset: worst ratio, failing problems, "
        "median and max of p / p_min:"
    )
    for s in SAMPLINGS:
        cells = {(e["c"], e["offset"]): e for e in analysis["candidates"][s]}
        header = "".join(f"{'offset ' + str(o):>29s}" for o in CANDIDATE_OFFSETS)
        lines.append(f"  {s:8s} c  {header}")
        for c in CANDIDATES[s]:
            row = ""
            for o in CANDIDATE_OFFSETS:
                e = cells[c, o]
                row += (
                    f"   {e['ratio_max']:.4f} {e['n_problems_failing']:2d} "
                    f"{_fmt(e['p_over_p_min']['median'], '5.2f')} "
                    f"{_fmt(e['p_over_p_min']['max'], '5.2f')}"
                )
            lines.append(f"  {'':8s} {c:<4g}{row}")
    lines.append("")
    lines.append("Adaptive y-free stopping rules, eps = min over problems of needed:")
    for s in SAMPLINGS:
        for name, entry in analysis["adaptive"][s].items():
            if "eps_required" not in entry:
                lines.append(f"  {s:8s} {name:9s}: no eps of the grid suffices")
                continue
            needed = [e for e in entry["needed"] if e is not None]
            lines.append(
                f"  {s:8s} {name:9s} [{entry['rule']}]: eps={entry['eps_required']:.3g}"
                f" (median needed {np.median(needed):.3g}), worst ratio "
                f"{entry['ratio_max']:.4f}, p/p_min median "
                f"{_fmt(entry['p_over_p_min']['median'])} max "
                f"{_fmt(entry['p_over_p_min']['max'])}"
            )
    checks = [row[f"curve_check_{s}"] for row in rows for s in SAMPLINGS]
    lines.append("")
    lines.append(
        "Max |DoFNystroem+Ridge ratio - nested-factor ratio| at the auto rank: "
        f"{max(checks):.2e}"
    )
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="n in {500, 1000}, fewer seeds"
    )
    add_arguments(parser, BENCHMARK, threads=None, child=False)
    parser.add_argument(
        "--seeds", type=int, default=None, help="number of seeds (20, quick: 3)"
    )
    parser.add_argument(
        "--draws",
        type=int,
        default=None,
        help="uniform column draws per seed (8, quick: 3)",
    )
    parser.add_argument(
        "--blas-threads",
        type=int,
        default=1,
        help="BLAS threads (default 1; see the comment in main)",
    )
    args = parser.parse_args(argv)
    # Almost every BLAS call here is small (one pivot at a time, p x p
    # solves): with threads, OpenBLAS spends more time waking them than
    # computing, up to 50x slower on a busy 2-core machine.  The one large
    # call, eigh of K, loses about 30% single-threaded.
    with threadpool_limits(limits=args.blas_threads, user_api="blas"):
        run(args)


def headline(payload):
    """Per sampler: the current constant and, with it, the worst error ratio,
    the problems that fail and the median and max ``p / p_min``; the constant
    the problems need (offset 0) and the range of ``p_min / d_max``."""
    analysis, problems = payload["analysis"], payload["problems"]
    out = {"mode": payload["config"]["mode"], "problems": len(problems)}
    for s in SAMPLINGS:
        current = analysis["current"][s]
        needed = [r[f"p_min_over_d_max_{s}"] for r in problems]
        needed = [v for v in needed if v is not None]
        out[s] = {
            "c": current["c"],
            "ratio_max": current["ratio_max"],
            "failing": current["n_problems_failing"],
            "p_over_p_min_median": current["p_over_p_min"]["median"],
            "p_over_p_min_max": current["p_over_p_min"]["max"],
            "c_required": analysis["constant"][s]["0"].get("c_required"),
            "p_min_over_d_max": [min(needed, default=None), max(needed, default=None)],
        }
    return out


def run(args):
    record = start_run(args.blas_threads)
    ns = (500, 1000) if args.quick else (500, 1000, 2000)
    n_seeds = args.seeds or (3 if args.quick else 20)
    n_draws = args.draws or (3 if args.quick else 8)
    args.output_dir.mkdir(parents=True, exist_ok=True)

    start = time.perf_counter()
    rows, all_curves, all_stats, per_seed = [], [], [], []
    for n in ns:
        for beta in BETAS:
            tic = time.perf_counter()
            records = {delta: [] for delta in DELTAS}
            for seed in range(n_seeds):
                # Both targets share the points, hence K and its eigenvectors.
                problems = make_problems(n, beta=beta, deltas=DELTAS, seed=seed)
                krr = SpectralKRR(problems[0].K)
                for delta, data in zip(DELTAS, problems, strict=True):
                    records[delta].append(run_seed(data, krr, seed, n_draws))
                del problems, krr
            for delta in DELTAS:
                row, curves, stats = summarise_problem(beta, delta, n, records[delta])
                rows.append(row)
                all_curves.append(curves)
                all_stats.append(stats)
                per_seed.append(records[delta])
                print(
                    f"n={n:5d} beta={beta} delta={delta}: d_max={row['d_max']:.1f} "
                    f"p_min U/P={row['p_min_uniform']}/{row['p_min_pivoted']} "
                    f"auto U/P={row['auto_p_uniform']:.0f}/"
                    f"{row['auto_p_pivoted']:.0f}",
                    flush=True,
                )
            print(f"  ({time.perf_counter() - tic:.1f}s)", flush=True)
    analysis = analyse(rows, all_curves, all_stats)
    elapsed = time.perf_counter() - start

    table = format_table(rows, TABLE_COLUMNS)
    text = report(rows, analysis)
    print()
    print(table)
    print()
    print(text)
    print(f"\nTotal time {elapsed:.0f}s")

    config = {
        "mode": "quick" if args.quick else "full",
        "n_values": ns,
        "betas": BETAS,
        "deltas": DELTAS,
        "design": "uniform",
        "noise": 1.0,
        "n_seeds": n_seeds,
        "n_uniform_draws": n_draws,
        "blas_threads": args.blas_threads,
        "lambdas": DEFAULT_LAMBDAS,
        "tol": TOL,
        "offsets": OFFSETS,
        "c_grid": [float(C_GRID[0]), float(C_GRID[-1]), 0.05],
        "eps_grid": EPS_GRID,
        "current_constants": {"factor": AUTO_RANK_FACTOR, "offset": AUTO_RANK_OFFSET},
        "elapsed_seconds": elapsed,
    }
    scalar_rows = [
        {k: v for k, v in row.items() if not k.startswith("mean_ratio_curve")}
        for row in rows
    ]
    seeds_out = [
        {
            "problem": row["problem"],
            "n": row["n"],
            "seeds": [{k: v for k, v in r.items() if k != "curves"} for r in records],
        }
        for row, records in zip(rows, per_seed, strict=True)
    ]
    payload = {
        "config": config,
        "problems": scalar_rows,
        "analysis": analysis,
        "per_seed": seeds_out,
    }
    write_results(args.output_dir / "results.json", payload, record)
    curves_out = [
        {
            "problem": row["problem"],
            "n": row["n"],
            "mean_ratio": {s: row[f"mean_ratio_curve_{s}"] for s in SAMPLINGS},
            "seeds": [
                {
                    "seed": r["seed"],
                    "curves": {
                        s: {
                            k: _round(v[:, : row["p_max_scored"] + 1], k)
                            for k, v in r["curves"][s].items()
                        }
                        for s in SAMPLINGS
                    },
                }
                for r in records
            ],
        }
        for row, records in zip(rows, per_seed, strict=True)
    ]
    write_json(args.output_dir / "curves.json.gz", curves_out, compact=True)
    with open(args.output_dir / "table.csv", "w", newline="") as stream:
        writer = csv.writer(stream)
        writer.writerow([key for key, _, _ in TABLE_COLUMNS])
        for row in rows:
            writer.writerow([row[key] for key, _, _ in TABLE_COLUMNS])
    with open(args.output_dir / "table.md", "w") as stream:
        stream.write(
            f"# calibrate_auto_rank ({config['mode']}, {n_seeds} seeds, "
            f"{n_draws} uniform draws)\n\n"
        )
        stream.write(format_table(rows, TABLE_COLUMNS, markdown=True))
        stream.write("\n\n" + TABLE_LEGEND.replace("\n", " ").strip())
        stream.write("\n\n```\n" + text + f"\n\nTotal time {elapsed:.0f}s\n```\n")
    append_history(
        args.output_dir,
        BENCHMARK,
        record,
        headline(payload),
        results=args.output_dir / "results.json",
    )


def _round(values, key):
    """Curves to 5 significant digits (ratios near 1 need them), the residual
    statistics to 4: a few MB instead of tens."""
    digits = 5 if key == "ratio" else 4
    return [[float(f"{v:.{digits}g}") for v in row] for row in np.atleast_2d(values)]


if __name__ == "__main__":
    main()

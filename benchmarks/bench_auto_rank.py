"""Automatic rank rules against the oracle rank: success, p / p_oracle, cost.

Per problem, seed, sampler and rule (``--rules``: values of
``n_components``, estimator keywords after a colon, joined by ``+``:
``auto:loss_tol=0.02+max_components=3000``): **success** (the rule's error
at most 1.01 times exact at the same penalty), **p / p_oracle** (the oracle:
the smallest int rank meeting that bar, by bisection), the **time ratio**
over the int fit at the rule's rank (same child, A B A B) and the child's
**peak RSS**.  The problems, the oracle's search and the results files:
``benchmarks/README.rst``, "bench_auto_rank.py".

Usage::

    python benchmarks/bench_auto_rank.py                   # several hours
    python benchmarks/bench_auto_rank.py --quick --rules auto   # < 1 minute
    python benchmarks/bench_auto_rank.py --part classification --seeds 0
    python benchmarks/bench_auto_rank.py --sets abalone,spline_b1_d2 \
        --samplers uniform,pivoted --rules auto,auto:loss_tol=0.05
"""

import argparse
import math
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
from _common import (
    DEFAULT_LAMBDAS,
    SpectralKRR,
    best_penalty,
    format_table,
    load_data,
    make_problems,
)
from _harness import (
    add_arguments,
    alternate,
    append_history,
    child_main,
    display_path,
    median,
    results_dir,
    rss_probe,
    run_child,
    start_run,
    timed_fit,
    write_results,
)
from scipy import linalg
from sklearn.kernel_ridge import KernelRidge
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import log_loss
from sklearn.metrics.pairwise import rbf_kernel
from threadpoolctl import threadpool_limits

import sklearn_dof
from sklearn_dof import DoFKernelLogisticRegression, DoFKernelRidge

BENCHMARK = "auto_rank"

TOL = 0.01  # success: error <= (1 + TOL) x exact at the same penalty
ORACLE_RESOLUTION = 1.02  # bisection stops when hi / lo <= this
ORACLE_START = 16  # first rank of the doubling when nothing is scored yet

REGRESSION_SETS = tuple(
    "pumadyn32nm pumadyn32nm_snelson bank32nh bank32nm kin40k pol cpu_small "
    "cpu_act ailerons abalone".split()
)
CLASSIFICATION_SETS = ("a9a_adult", "ijcnn1")
SPLINE_BETAS = (1, 2, 4)
SPLINE_DELTAS = (2, 8)
SPLINE_SETS = tuple(f"spline_b{b}_d{d}" for b in SPLINE_BETAS for d in SPLINE_DELTAS)
SAMPLINGS = ("uniform", "pivoted", "leverage", "rpcholesky")
LAMBDAS = np.logspace(-6, -1, 11)
CLASSIFICATION_LAMBDAS = np.logspace(-5, -1, 5)
QUICK_SETS = ("abalone", "spline_b1_d2")

TARGETS = {
    "success_rate": (">=", 0.95),
    "p_over_oracle_median": ("<=", 1.5),
    "p_over_oracle_max": ("<=", 3.0),
    "time_ratio_median": ("<=", 1.5),
}


# ---------------------------------------------------------------------------
# Rules


def parse_rule(text):
    """``"auto"``, ``"dof"``, ``"300"`` or ``"auto:loss_tol=0.02+max_components=3000"``.

    Returns ``(n_components, extra estimator keywords)``; values are read as
    int, float, None, True/False or kept as strings.
    """
    head, _, tail = text.partition(":")
    n_components = int(head) if head.isdigit() else head
    extra = {}
    for pair in filter(None, tail.split("+")):
        key, _, value = pair.partition("=")
        extra[key.strip()] = _parse_value(value.strip())
    return n_components, extra


def _parse_value(value):
    for cast in (int, float):
        try:
            return cast(value)
        except ValueError:
            pass
    return {"None": None, "True": True, "False": False}.get(value, value)


# ---------------------------------------------------------------------------
# Problems


class Case:
    """One problem instance (set and seed), with its exact reference.

    ``X_fit`` / ``y`` are what the estimators fit (X or, for the splines, the
    kernel matrix), ``X_eval`` / ``target`` where and against what the error
    is measured; ``estimator`` is ``"ridge"`` or ``"logistic"``; ``params``
    the estimator keywords other than the rank, sampler and seed.
    """

    INFO = (
        "set part seed metric n_train n_eval n_features gamma lambda_ alpha "
        "lambda_at_edge error_exact error_exact_spectral lambdas errors_exact_grid "
        "exact_seconds"
    ).split()

    def __init__(self, **kw):
        self.__dict__.update(kw)
        self.n_train, self.n_eval = self.X_fit.shape[0], self.X_eval.shape[0]

    def info(self):
        return {k: getattr(self, k, None) for k in self.INFO}


def part_of(name):
    if name in CLASSIFICATION_SETS:
        return "classification"
    if name.startswith("spline_"):
        return "spline"
    return "regression"


def split_rows(name, seed, n_train, n_test):
    """Standardised train/test rows of a shared data set (see the docstring)."""
    X, y, is_test = load_data(name)
    rng = np.random.RandomState(seed)
    if is_test is None:
        order = rng.permutation(X.shape[0])
        cut = int(round(0.8 * X.shape[0]))
        train, test = order[:cut], order[cut:]
    else:
        train, test = np.flatnonzero(~is_test), np.flatnonzero(is_test)
    train = rng.permutation(train)[:n_train]
    test = rng.permutation(test)[:n_test]
    mean, scale = X[train].mean(0), X[train].std(0)
    scale = np.where(scale > 0, scale, 1.0)
    X = (X - mean) / scale
    return X[train], y[train], X[test], y[test]


def regression_case(name, seed, args):
    start = time.perf_counter()
    X_train, y_train, X_test, y_test = split_rows(name, seed, args.n_train, args.n_test)
    y_mean, y_scale = y_train.mean(), y_train.std()
    y_train = (y_train - y_mean) / y_scale
    y_test = (y_test - y_mean) / y_scale
    n, d = X_train.shape
    gamma = 1.0 / d
    # Exact kernel ridge at every penalty of the grid from one eigh:
    # predictions K_test U diag(1 / (s + alpha)) U^T y.
    eigvals, U = linalg.eigh(rbf_kernel(X_train, gamma=gamma))
    eigvals = np.clip(eigvals, 0, None)
    KU = rbf_kernel(X_test, X_train, gamma=gamma) @ U
    Uy = U.T @ y_train
    del U
    alphas = n * LAMBDAS
    grid = np.array(
        [np.mean((KU @ (Uy / (eigvals + a)) - y_test) ** 2) for a in alphas]
    )
    del KU
    best = int(np.argmin(grid))
    alpha = float(alphas[best])
    exact = KernelRidge(alpha=alpha, kernel="rbf", gamma=gamma).fit(X_train, y_train)
    error_exact = float(np.mean((exact.predict(X_test) - y_test) ** 2))
    return Case(
        set=name,
        part="regression",
        seed=seed,
        estimator="ridge",
        metric="test_mse",
        X_fit=X_train,
        y=y_train,
        X_eval=X_test,
        target=y_test,
        params={"kernel": "rbf", "gamma": gamma, "fit_intercept": False},
        n_features=d,
        gamma=gamma,
        lambda_=float(LAMBDAS[best]),
        alpha=alpha,
        lambda_at_edge=best in (0, LAMBDAS.size - 1),
        error_exact=error_exact,
        error_exact_spectral=float(grid[best]),
        lambdas=LAMBDAS,
        errors_exact_grid=grid,
        exact_seconds=time.perf_counter() - start,
    )


_SPLINE_CACHE = {}


def spline_case(name, seed, args):
    """A periodic spline problem; the two targets of one beta share K."""
    start = time.perf_counter()
    beta, delta = (float(part[1:]) for part in name.split("_")[1:])
    key = (beta, seed, args.spline_n)
    if key not in _SPLINE_CACHE:
        _SPLINE_CACHE.clear()
        problems = make_problems(
            args.spline_n, beta=beta, deltas=SPLINE_DELTAS, seed=seed
        )
        _SPLINE_CACHE[key] = (problems, SpectralKRR(problems[0].K))
    problems, krr = _SPLINE_CACHE[key]
    data = problems[SPLINE_DELTAS.index(delta)] if delta in SPLINE_DELTAS else None
    if data is None:
        data = make_problems(args.spline_n, beta=beta, deltas=(delta,), seed=seed)[0]
    best = best_penalty(krr, data.y, data.f, DEFAULT_LAMBDAS)
    return Case(
        set=name,
        part="spline",
        seed=seed,
        estimator="ridge",
        metric="in_sample_error",
        X_fit=data.K,
        y=data.y,
        X_eval=data.K,
        target=data.f,
        params={"kernel": "precomputed", "fit_intercept": False},
        n_features=1,
        gamma=None,
        lambda_=best.lambda_,
        alpha=best.alpha,
        lambda_at_edge=best.index in (0, DEFAULT_LAMBDAS.size - 1),
        error_exact=best.error,
        error_exact_spectral=best.error,
        lambdas=DEFAULT_LAMBDAS,
        errors_exact_grid=best.errors,
        exact_seconds=time.perf_counter() - start,
    )


def exact_logistic(L, y, L_test, y_test, alpha):
    """Test log-loss of exact kernel logistic regression (see the docstring)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = LogisticRegression(
            C=1.0 / alpha, solver="newton-cholesky", tol=1e-8, max_iter=200
        ).fit(L, y)
    return float(log_loss(y_test, model.predict_proba(L_test), labels=model.classes_))


def classification_case(name, seed, args):
    start = time.perf_counter()
    X_train, y_train, X_test, y_test = split_rows(
        name, seed, args.n_train_classification, args.n_test
    )
    n, d = X_train.shape
    gamma = 1.0 / d
    K = rbf_kernel(X_train, gamma=gamma)
    K[np.diag_indices_from(K)] += 1e-8
    L = linalg.cholesky(K, lower=True)
    del K
    L_test = linalg.solve_triangular(
        L, rbf_kernel(X_train, X_test, gamma=gamma), lower=True
    ).T
    alphas = n * CLASSIFICATION_LAMBDAS
    grid = np.array([exact_logistic(L, y_train, L_test, y_test, a) for a in alphas])
    best = int(np.argmin(grid))
    return Case(
        set=name,
        part="classification",
        seed=seed,
        estimator="logistic",
        metric="test_log_loss",
        X_fit=X_train,
        y=y_train,
        X_eval=X_test,
        target=y_test,
        params={"kernel": "rbf", "gamma": gamma},
        n_features=d,
        gamma=gamma,
        lambda_=float(CLASSIFICATION_LAMBDAS[best]),
        alpha=float(alphas[best]),
        lambda_at_edge=best in (0, CLASSIFICATION_LAMBDAS.size - 1),
        error_exact=float(grid[best]),
        error_exact_spectral=None,
        lambdas=CLASSIFICATION_LAMBDAS,
        errors_exact_grid=grid,
        exact_seconds=time.perf_counter() - start,
    )


def make_case(name, seed, args):
    part = part_of(name)
    if part == "spline":
        return spline_case(name, seed, args)
    if part == "classification":
        return classification_case(name, seed, args)
    return regression_case(name, seed, args)


# ---------------------------------------------------------------------------
# Fits (shared by the parent and the child processes)


def make_estimator(spec, n_components, extra):
    """The estimator of ``spec`` (its kind, parameters, penalty, sampler and
    seed) at ``n_components``, with the keywords ``extra``."""
    ridge = spec["estimator"] == "ridge"
    return (DoFKernelRidge if ridge else DoFKernelLogisticRegression)(
        alpha=spec["alpha"],
        n_components=n_components,
        sampling=spec["sampling"],
        random_state=spec["seed"],
        **spec["params"],
        **extra,
    )


def score(model, X_eval, target, metric):
    if metric == "test_log_loss":
        proba = model.predict_proba(X_eval)
        return float(log_loss(target, proba, labels=model.classes_))
    return float(np.mean((model.predict(X_eval) - target) ** 2))


def fit_rule(arrays, spec, measure_rss):
    """Fit a rule, then an int fit at its rank; what the record needs.

    ``arrays``: ``X_fit``, ``y``, ``X_eval``, ``target``; ``spec``: the
    estimator, its parameters, the rule, sampler, seed and metric.
    """
    X, y = arrays["X_fit"], arrays["y"]
    evaluation = arrays["X_eval"], arrays["target"], spec["metric"]
    # Warm-up: imports and thread pools touched before anything is timed.
    warm_rows = min(200, X.shape[0])
    X_warm = (
        X[:warm_rows, :warm_rows]
        if spec["params"]["kernel"] == "precomputed"
        else X[:warm_rows]
    )
    try:
        timed_fit(make_estimator(spec, min(10, warm_rows), {}), X_warm, y[:warm_rows])
    except Exception:  # noqa: BLE001 - a warm-up failure is not a result
        pass
    out = {}
    stop_rss = rss_probe() if measure_rss else None
    n_components, extra = parse_rule(spec["rule"])
    try:
        model = make_estimator(spec, n_components, extra)
        seconds, messages = timed_fit(model, X, y)
    except Exception as exc:  # noqa: BLE001 - recorded, the run goes on
        return {"error_message": f"{type(exc).__name__}: {exc}"[:1000]}
    if measure_rss:
        out.update(stop_rss())
    rank = int(model.n_components_)
    out.update(
        n_components=rank,
        fit_seconds=seconds,
        warnings=messages,
        error=score(model, *evaluation),
        estimated_loss=_estimated_loss(model),
        dof=_attribute(model, "dof_"),
        effective_dof=_attribute(model, "effective_dof_"),
    )
    del model
    try:
        int_model = make_estimator(spec, rank, _int_keywords(extra))
        int_seconds, _ = timed_fit(int_model, X, y)
        out["int_error"] = score(int_model, *evaluation)
    except Exception as exc:  # noqa: BLE001
        out["int_error_message"] = f"{type(exc).__name__}: {exc}"[:1000]
        return out
    del int_model
    # The first fit of a process pays the first touch of its memory, which
    # the int fit after it finds already mapped: both fits again, in turn
    # (A B A B), and the fastest of each (the time ratio of equals).
    more = alternate(
        lambda _, make: timed_fit(make(), X, y)[0],
        {
            "rule": lambda: make_estimator(spec, n_components, extra),
            "int": lambda: make_estimator(spec, rank, _int_keywords(extra)),
        },
        spec.get("timing_repeats", 2) - 1,
    )
    auto_runs, int_runs = [seconds, *more["rule"]], [int_seconds, *more["int"]]
    out.update(
        fit_seconds=min(auto_runs),
        int_fit_seconds=min(int_runs),
        fit_seconds_runs=auto_runs,
        int_fit_seconds_runs=int_runs,
    )
    return out


def _int_keywords(extra):
    """Keywords of the int fit: the rule's own tolerances do not apply."""
    return {k: v for k, v in extra.items() if k not in ("loss_tol", "max_components")}


def _estimated_loss(model):
    """The rule's estimate of the relative excess loss (``loss_estimate_`` of
    its ``nystroem_``); None without one."""
    value = _attribute(getattr(model, "nystroem_", None), "loss_estimate_")
    return value if value is not None and math.isfinite(value) else None


def _attribute(model, name):
    """A fitted scalar as a float; None when missing (or not a scalar)."""
    try:
        return float(getattr(model, name))
    except Exception:  # noqa: BLE001 - attributes the package may not have yet
        return None


def child(case):
    with threadpool_limits(case["threads"]):
        with np.load(case["data"]) as data:
            arrays = {k: data[k] for k in data.files}
        return fit_rule(arrays, case, measure_rss=True)


# ---------------------------------------------------------------------------
# The oracle rank


class Oracle:
    """Errors of int fits (same sampler and seed), cached by rank."""

    def __init__(self, case, spec):
        self.case, self.spec = case, spec
        self.errors = {}

    def bar(self):
        return (1 + TOL) * self.case.error_exact

    def ok(self, q):
        return self.error(q) <= self.bar()

    def error(self, q):
        if q not in self.errors:
            c = self.case
            model = make_estimator(self.spec, q, {})
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                model.fit(c.X_fit, c.y)
            self.errors[q] = score(model, c.X_eval, c.target, c.metric)
        return self.errors[q]

    def search(self):
        """Smallest rank meeting the bar, by doubling then bisection."""
        n = self.case.n_train
        bar = self.bar()
        known_ok = [q for q, e in self.errors.items() if e <= bar]
        if known_ok:
            hi = min(known_ok)
        else:
            failed = [q for q in self.errors if q < n]
            q = min(n, 2 * max(failed)) if failed else min(n, ORACLE_START)
            while not self.ok(q):
                if q == n:
                    return n, True
                q = min(n, 2 * q)
            hi = q
        below = [q for q, e in self.errors.items() if q < hi and e > bar]
        if below:
            lo = max(below)
        else:
            lo = hi
            while lo > 1:
                lo = max(1, lo // 2)
                if not self.ok(lo):
                    break
                hi = lo
            else:
                return hi, False  # even rank 1 meets the bar
        while hi > lo * ORACLE_RESOLUTION and hi - lo > 1:
            mid = int(round(math.sqrt(lo * hi)))
            mid = min(max(mid, lo + 1), hi - 1)
            if self.ok(mid):
                hi = mid
            else:
                lo = mid
        return hi, False

    def evaluations(self):
        return [[q, e / self.case.error_exact] for q, e in sorted(self.errors.items())]


# ---------------------------------------------------------------------------
# Running a case


def run_case(case, args, tmpdir):
    """Every sampler and rule on one case: the records and oracles."""
    data_path = Path(tmpdir) / "case.npz"
    arrays = {k: getattr(case, k) for k in ("X_fit", "y", "X_eval", "target")}
    np.savez(data_path, **arrays)
    records, oracles = [], []
    for sampling in args.samplers:
        base = {
            "estimator": case.estimator,
            "params": case.params,
            "alpha": case.alpha,
            "sampling": sampling,
            "seed": case.seed,
            "metric": case.metric,
        }
        oracle = Oracle(case, base)
        results = {}
        for rule in args.rules:
            spec = dict(
                base,
                rule=rule,
                threads=args.threads,
                timing_repeats=args.timing_repeats,
            )
            if args.rss == "child":
                result = run_child(
                    __file__, dict(spec, data=str(data_path)), args.threads, check=False
                )
                if "error" in result and isinstance(result["error"], list):
                    result = {"error_message": " | ".join(result["error"])}
            else:
                result = fit_rule(arrays, spec, measure_rss=False)
            results[rule] = result
            # The int fit at the rule's rank is the oracle's fit at that rank
            # (unless the rule passes keywords that change an int fit).
            if "int_error" in result and not _int_keywords(parse_rule(rule)[1]):
                oracle.errors.setdefault(result["n_components"], result["int_error"])
        tic = time.perf_counter()
        try:
            p_oracle, unmet = oracle.search()
        except Exception as exc:  # noqa: BLE001 - recorded, the run goes on
            p_oracle, unmet = None, None
            print(f"    {sampling}: oracle search failed: {exc}", flush=True)
        oracle_seconds = time.perf_counter() - tic
        oracles.append(
            {
                "set": case.set,
                "part": case.part,
                "seed": case.seed,
                "sampling": sampling,
                "p_oracle": p_oracle,
                "oracle_unmet": unmet,
                "n_scored": len(oracle.errors),
                "search_seconds": oracle_seconds,
                "ranks_and_ratios": oracle.evaluations(),
            }
        )
        for rule, result in results.items():
            rec = {
                "set": case.set,
                "part": case.part,
                "seed": case.seed,
                "sampling": sampling,
                "rule": rule,
                "n_train": case.n_train,
                "error_exact": case.error_exact,
                "p_oracle": p_oracle,
                "oracle_unmet": unmet,
                **result,
            }
            if "error" in result:
                rec["ratio"] = result["error"] / case.error_exact
                rec["success"] = bool(result["error"] <= (1 + TOL) * case.error_exact)
                if p_oracle is not None:
                    rec["p_over_oracle"] = result["n_components"] / p_oracle
            if result.get("int_fit_seconds"):
                rec["time_ratio"] = result["fit_seconds"] / result["int_fit_seconds"]
            records.append(rec)
            print(_progress(rec), flush=True)
        print(
            f"    {sampling}: p_oracle={p_oracle}{' (unmet)' if unmet else ''} "
            f"({len(oracle.errors)} ranks scored, {oracle_seconds:.1f} s)",
            flush=True,
        )
    return records, oracles


def _progress(rec):
    head = f"    {rec['sampling']:10s} {rec['rule']:12s}"
    if "error_message" in rec:
        return f"{head} failed: {rec['error_message'][:200]}"
    text = (
        f"{head} p={rec['n_components']:5d} ratio={rec['ratio']:.4f} "
        f"p/p_oracle={rec.get('p_over_oracle', math.nan):.2f} "
        f"fit={rec['fit_seconds']:.2f}s"
    )
    if "time_ratio" in rec:
        text += f" /int={rec['time_ratio']:.2f}"
    if rec.get("peak_rss_mb") is not None:
        text += f" rss={rec['peak_rss_mb']:.0f}MB"
    if rec.get("estimated_loss") is not None:
        text += f" est_loss={rec['estimated_loss']:.3g}"
    return text


# ---------------------------------------------------------------------------
# Summary


def _max(values):
    values = [v for v in values if v is not None]
    return float(np.max(values)) if values else None


def summarise(records, keys):
    """One row per distinct value of ``keys`` (e.g. part, rule, sampler)."""
    groups = {}
    for rec in records:
        groups.setdefault(tuple(rec[k] for k in keys), []).append(rec)
    rows = []
    for key, group in groups.items():
        ok = [r for r in group if "success" in r]
        row = dict(zip(keys, key, strict=True))
        row.update(
            n_runs=len(group),
            n_failed_runs=len(group) - len(ok),
            n_oracle_unmet=sum(bool(r.get("oracle_unmet")) for r in ok),
            success_rate=(float(np.mean([r["success"] for r in ok])) if ok else None),
            ratio_max=_max([r["ratio"] for r in ok]),
            p_over_oracle_median=median([r.get("p_over_oracle") for r in ok]),
            p_over_oracle_max=_max([r.get("p_over_oracle") for r in ok]),
            time_ratio_median=median([r.get("time_ratio") for r in ok]),
            time_ratio_max=_max([r.get("time_ratio") for r in ok]),
            fit_seconds_median=median([r["fit_seconds"] for r in ok]),
            peak_rss_mb_max=_max([r.get("peak_rss_mb") for r in ok]),
            fit_rss_increase_mb_max=_max([r.get("fit_rss_increase_mb") for r in ok]),
        )
        row["meets_targets"] = _meets(row)
        rows.append(row)
    return rows


def _meets(row):
    out = {key: row.get(key) for key in TARGETS}
    for key, (op, bound) in TARGETS.items():
        if out[key] is not None:
            out[key] = bool(out[key] >= bound if op == ">=" else out[key] <= bound)
    return out


def _targets_cell(row):
    meets = row["meets_targets"]
    if any(v is None for v in meets.values()):
        return "-"
    failed = [k for k, v in meets.items() if not v]
    return (
        "yes"
        if not failed
        else "no: "
        + ",".join(
            k.replace("p_over_oracle", "p")
            .replace("_median", " med")
            .replace("_max", " max")
            .replace("success_rate", "success")
            .replace("time_ratio", "time")
            for k in failed
        )
    )


SUMMARY_COLUMNS = [
    ("part", "part", "s"),
    ("rule", "rule", "s"),
    ("sampling", "sampler", "s"),
    ("n_runs", "runs", "d"),
    ("n_failed_runs", "failed", "d"),
    ("success_rate", "success", ".3f"),
    ("ratio_max", "max err/exact", ".4f"),
    ("p_over_oracle_median", "med p/p_or", ".2f"),
    ("p_over_oracle_max", "max p/p_or", ".2f"),
    ("time_ratio_median", "med t/t_int", ".2f"),
    ("time_ratio_max", "max t/t_int", ".2f"),
    ("peak_rss_mb_max", "max RSS MB", ".0f"),
    ("fit_rss_increase_mb_max", "max +RSS MB", ".0f"),
    ("targets", "targets", "s"),
]

SET_COLUMNS = [
    ("set", "set", "s"),
    ("rule", "rule", "s"),
    ("sampling", "sampler", "s"),
    ("n_runs", "runs", "d"),
    ("success_rate", "success", ".2f"),
    ("ratio_max", "max err/exact", ".4f"),
    ("p_over_oracle_median", "med p/p_or", ".2f"),
    ("p_over_oracle_max", "max p/p_or", ".2f"),
    ("time_ratio_median", "med t/t_int", ".2f"),
    ("peak_rss_mb_max", "max RSS MB", ".0f"),
]


def plot(records, rules, samplers, path):
    try:
        import matplotlib
    except ImportError:
        print("matplotlib is not installed: no plot", flush=True)
        return
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    ok = [r for r in records if "p_over_oracle" in r]
    if not ok:
        return
    sets = list(dict.fromkeys(r["set"] for r in ok))
    rules = [rule for rule in rules if any(r["rule"] == rule for r in ok)]
    fig, axes = plt.subplots(
        len(rules),
        1,
        figsize=(max(6, 0.7 * len(sets) + 3), 3.2 * len(rules)),
        squeeze=False,
    )
    width = 0.8 / max(1, len(samplers))
    markers = dict(zip(SAMPLINGS, "osD^", strict=True))
    for ax, rule in zip(axes[:, 0], rules, strict=True):
        for k, s in enumerate(samplers):
            color = f"C{k}"
            for j, name in enumerate(sets):
                mine = [
                    r
                    for r in ok
                    if r["rule"] == rule and r["sampling"] == s and r["set"] == name
                ]
                x = j + (k - (len(samplers) - 1) / 2) * width
                for r in mine:
                    ax.plot(
                        x,
                        r["p_over_oracle"],
                        markers.get(s, "o"),
                        ms=5,
                        color=color,
                        mfc=color if r["success"] else "none",
                    )
            ax.plot([], [], markers.get(s, "o"), color=f"C{k}", label=s)
        for level, style in ((1.0, "-"), (1.5, "--"), (3.0, ":")):
            ax.axhline(level, color="k", lw=0.8, ls=style)
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())
        ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_xticks(np.arange(len(sets)), sets, rotation=30, ha="right")
        ax.set_ylabel("p / p_oracle")
        ax.set_title(f"n_components={rule!r} (hollow: error above 1.01 x exact)")
        ax.legend(fontsize=8, ncol=len(samplers))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ---------------------------------------------------------------------------
# Main


def _csv(text):
    return [item.strip() for item in text.split(",") if item.strip()]


def headline(payload):
    """Per part, rule and sampler: runs, success rate, worst error over
    exact, median and max p / p_oracle, median time over the int fit,
    largest peak RSS."""
    config = payload["config"]
    rows = {
        "regression": config["n_train"],
        "classification": config.get("n_train_classification"),
        "spline": config.get("spline_n"),
    }
    return {
        "rows": {
            p: rows[p] for p in dict.fromkeys(r["part"] for r in payload["summary"])
        },
        "seeds": config["seeds"],
        "sets": len(config["sets"]),
        "summary": {
            f"{r['part']} {r['rule']} {r['sampling']}": {
                "runs": r["n_runs"],
                "failed": r["n_failed_runs"],
                "success": r["success_rate"],
                "ratio_max": r["ratio_max"],
                "p_over_oracle_median": r["p_over_oracle_median"],
                "p_over_oracle_max": r["p_over_oracle_max"],
                "time_ratio_median": r["time_ratio_median"],
                "peak_rss_mb_max": r["peak_rss_mb_max"],
            }
            for r in payload["summary"]
        },
    }


def _default_output(args):
    """``results/auto_rank/<part>_n<rows>`` (``custom`` for ``--sets``,
    ``quick`` for ``--quick``)."""
    if args.quick:
        return results_dir(BENCHMARK, "quick")
    if args.sets_given:
        return results_dir(BENCHMARK, "custom")
    rows = {
        "regression": args.n_train,
        "classification": args.n_train_classification,
        "spline": args.spline_n,
        "all": args.n_train,
    }[args.part]
    return results_dir(BENCHMARK, f"{args.part}_n{rows}")


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"sets {','.join(QUICK_SETS)}, seed 0, uniform only (under a minute)",
    )
    parser.add_argument(
        "--part",
        choices=("regression", "spline", "classification", "all"),
        default="all",
        help="which problems when --sets is not given (default all)",
    )
    parser.add_argument(
        "--sets", type=_csv, default=None, help="comma-separated set names"
    )
    parser.add_argument(
        "--rules",
        default="auto,dof",
        help="comma-separated n_components values, optionally with estimator "
        "keywords after ':' joined by '+', e.g. auto,dof,auto:loss_tol=0.02",
    )
    parser.add_argument("--samplers", type=_csv, default=None)
    parser.add_argument("--seeds", type=_csv, default=None, help="default 0,1,2")
    parser.add_argument("--n-train", type=int, default=4000)
    parser.add_argument("--n-test", type=int, default=4000)
    parser.add_argument("--n-train-classification", type=int, default=2000)
    parser.add_argument("--spline-n", type=int, default=1000)
    parser.add_argument(
        "--rss",
        choices=("child", "none"),
        default="child",
        help="fit each rule in a child process to record its peak RSS (default)",
    )
    parser.add_argument(
        "--timing-repeats",
        type=int,
        default=2,
        help="fits of the rule and of the int fit, in turn; the fastest of each",
    )
    add_arguments(parser, BENCHMARK, threads=1, output_dir=False)
    parser.add_argument(
        "--output-dir",
        type=Path,
        default=None,
        help="default: results/auto_rank/<part>_n<rows> (custom with --sets)",
    )
    args = parser.parse_args(argv)
    if args.child:
        return args
    args.sets_given = args.sets is not None
    # ',' separates the rules; their keywords are joined by '+'.
    args.rules = _csv(args.rules)
    if args.quick:
        args.sets = args.sets or list(QUICK_SETS)
        args.seeds = args.seeds or ["0"]
        args.samplers = args.samplers or ["uniform"]
    if args.sets is None:
        parts = {
            "regression": REGRESSION_SETS,
            "spline": SPLINE_SETS,
            "classification": CLASSIFICATION_SETS,
        }
        chosen = parts if args.part == "all" else {args.part: parts[args.part]}
        args.sets = [s for sets in chosen.values() for s in sets]
    known = set(REGRESSION_SETS + CLASSIFICATION_SETS)
    for name in args.sets:
        if name not in known and not name.startswith("spline_b"):
            parser.error(f"unknown set {name!r}")
    args.seeds = [int(s) for s in (args.seeds or ["0", "1", "2"])]
    args.samplers = args.samplers or list(SAMPLINGS)
    if args.output_dir is None:
        args.output_dir = _default_output(args)
    return args


def main(argv=None):
    args = parse_args(argv)
    if args.child:
        return child_main(child, args.child)
    run = start_run(args.threads)
    args.output_dir.mkdir(parents=True, exist_ok=True)
    out = args.output_dir / "results.json"
    start = time.perf_counter()
    config = {
        "quick": args.quick,
        "sets": args.sets,
        "seeds": args.seeds,
        "samplers": args.samplers,
        "rules": args.rules,
        "n_train": args.n_train,
        "n_test": args.n_test,
        "n_train_classification": args.n_train_classification,
        "spline_n": args.spline_n,
        "spline_noise": 1.0,
        "lambdas_regression": LAMBDAS,
        "lambdas_spline": DEFAULT_LAMBDAS,
        "lambdas_classification": CLASSIFICATION_LAMBDAS,
        "tol": TOL,
        "oracle_resolution": ORACLE_RESOLUTION,
        "rss": args.rss,
        "threads": args.threads,
        "timing_repeats": args.timing_repeats,
        "targets": TARGETS,
        # (the checkout imported: PYTHONPATH may name another than run's)
        "package": display_path(Path(sklearn_dof.__file__).parent),
    }
    cases, records, oracles = [], [], []

    def payload(summary=None, by_set=None):
        return {
            "config": config,
            "seconds": time.perf_counter() - start,
            "summary": summary or summarise(records, ("part", "rule", "sampling")),
            "summary_by_set": by_set or summarise(records, ("set", "rule", "sampling")),
            "cases": cases,
            "oracles": oracles,
            "records": records,
        }

    with threadpool_limits(args.threads), tempfile.TemporaryDirectory() as tmpdir:
        for name in args.sets:
            for seed in args.seeds:
                tic = time.perf_counter()
                try:
                    case = make_case(name, seed, args)
                except FileNotFoundError as exc:
                    print(f"{name}: skipped ({exc})", flush=True)
                    break
                edge = " (edge)" if case.lambda_at_edge else ""
                print(
                    f"{name} seed={seed}: n={case.n_train} "
                    f"lambda={case.lambda_:.1e}{edge} "
                    f"exact {case.metric}={case.error_exact:.4g} "
                    f"({case.exact_seconds:.1f} s)",
                    flush=True,
                )
                new_records, new_oracles = run_case(case, args, tmpdir)
                records += new_records
                oracles += new_oracles
                cases.append(dict(case.info(), seconds=time.perf_counter() - tic))
                del case
                write_results(out, payload(), run)
    elapsed = time.perf_counter() - start
    summary = summarise(records, ("part", "rule", "sampling"))
    for row in summary:
        row["targets"] = _targets_cell(row)
    by_set = summarise(records, ("set", "rule", "sampling"))
    for rows, columns in ((by_set, SET_COLUMNS), (summary, SUMMARY_COLUMNS)):
        print("\n" + format_table(rows, columns))
    print(
        "\nTargets: success >= 0.95, median p/p_oracle <= 1.5, max <= 3, "
        "median fit time over the int fit at the same rank <= 1.5."
    )
    failures = [r for r in records if "error_message" in r]
    for rule in dict.fromkeys(r["rule"] for r in failures):
        first = next(r for r in failures if r["rule"] == rule)
        print(
            f"rule {rule!r} failed {sum(r['rule'] == rule for r in failures)} "
            f"times, e.g. {first['error_message'][:300]}"
        )
    print(f"\nTotal time {elapsed:.0f} s -> {display_path(args.output_dir)}")
    results = payload(summary, by_set)
    write_results(out, results, run)
    with open(args.output_dir / "summary.md", "w") as stream:
        stream.write(
            f"# bench_auto_rank ({'quick' if args.quick else 'full'}; seeds "
            f"{args.seeds}; {elapsed:.0f} s)\n\n"
        )
        stream.write(format_table(summary, SUMMARY_COLUMNS, markdown=True) + "\n\n")
        stream.write(format_table(by_set, SET_COLUMNS, markdown=True) + "\n")
    plot(records, args.rules, args.samplers, args.output_dir / "auto_rank.png")
    append_history(args.output_dir, BENCHMARK, run, headline(results), results=out)


if __name__ == "__main__":
    main()

"""The defaults on the accuracy/time frontier: every data set.

On each set of ``_common.DATA_SETS`` (its split, else a seeded 80/20;
``name@rows`` the first rows of its pooled rows, ``load_pooled``; inputs
standardised inside each pipeline), a fresh process per fit on
``--threads`` threads, RBF ``gamma = 1 / n_features`` for every system
but ``ours`` (which learns its kernel) and ``sklearn-grid``.
Regression (test MSE): ``ours`` (``DoFKernelRidgeCV()``, every default),
``ours-rbf`` (``kernel="rbf"``, the default before the kernel was learned),
``sklearn-grid`` (``GridSearchCV`` of ``Nystroem(1000) + RidgeCV`` over
``gamma`` in ``(0.1, 0.3, 1, 3, 10) / n_features``, 5 folds),
``ours-640`` (``max_components=640``, the cap before the exact route),
``ours-int`` (``ours`` at an int ``n_components``, the rank ``ours`` chose:
the automatic rank's cost over one fit, ``ours_over_int``), ``sklearn-M``
(``Nystroem(M) + RidgeCV(alphas=logspace(-3, 3, 7))``, ``M`` in
``--components``) and ``exact`` (kernel ridge on every row, the penalty
tuned by exact leave-one-out over ``lambda`` in ``logspace(-6, 0, 7)``,
where ``n <= --exact-max-rows``: the accuracy reference, not a timing
peer).  Classification (test log-loss and accuracy): ``ours``
(``DoFKernelLogisticRegression()``, ``alpha=1``), ``ours-int`` and
``sklearn-M`` (``Nystroem(M) + LogisticRegression()``, its defaults).
Reported per set: fit seconds, test error (over the exact reference's),
peak RSS, rank, warnings, and whether a pipeline was both faster and more
accurate than ``ours`` (dominated); ``--plot``: fit time against test error,
``<set>.png``.

Usage::

    python benchmarks/bench_frontier.py                       # every set
    python benchmarks/bench_frontier.py --sets cpu_act,pol --components 500,2000
    python benchmarks/bench_frontier.py --plot-only           # redraw the plots
    python benchmarks/bench_frontier.py --table-only          # write table.rst

Results: ``results/frontier/results.json``, the plots and ``table.rst`` (the
regression sets' table of ``doc/automatic_rank.rst``), the headline in
``results/frontier/history.jsonl``.  The children import the installed
``sklearn_dof`` (another checkout: first on ``PYTHONPATH``).  ``--systems
ours --merge results.json`` refits those systems and keeps the others.
``--repeats R`` fits each system of a set ``R`` times, the systems in turn
(A B A B), and keeps each system's median fit time, its runs' times in
``fit_seconds_runs``: one run's ratio is at the mercy of a noisy machine.
"""

import argparse
import json
import time
from pathlib import Path

import numpy as np
from _common import load_pooled, load_split
from _harness import (
    add_arguments,
    append_history,
    child_main,
    rss_probe,
    run_child,
    start_run,
    timed_fit,
    write_results,
)

BENCHMARK = "frontier"
EXACT_LAMBDAS = np.logspace(-6, 0, 7)
REGRESSION = (
    "abalone",
    "pumadyn32nm",
    "pumadyn32nm_snelson",
    "bank32nh",
    "bank32nm",
    "cpu_small",
    "cpu_act",
    "kin40k",
    "pol",
    "ailerons",
)
CLASSIFICATION = ("a9a_adult", "ijcnn1", "pendigits", "satimage")


def _ours(max_components=None, n_components="auto", kernel=None):
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from sklearn_dof import DoFKernelRidgeCV

    estimator = DoFKernelRidgeCV(
        kernel=kernel, random_state=0, n_components=n_components
    )
    if max_components is not None:
        estimator.set_params(max_components=max_components)
    return make_pipeline(StandardScaler(), estimator)


def _ours_classifier(n_components="auto"):
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from sklearn_dof import DoFKernelLogisticRegression

    estimator = DoFKernelLogisticRegression(random_state=0, n_components=n_components)
    return make_pipeline(StandardScaler(), estimator)


def _sklearn(M, classification=False):
    from sklearn.kernel_approximation import Nystroem
    from sklearn.linear_model import LogisticRegression, RidgeCV
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    last = (
        LogisticRegression()
        if classification
        else RidgeCV(alphas=np.logspace(-3, 3, 7))
    )
    return make_pipeline(
        StandardScaler(), Nystroem(n_components=M, random_state=0), last
    )


def _sklearn_grid(n_features, M=1000):
    """``GridSearchCV`` of scikit-learn's pipeline over ``gamma``."""
    from sklearn.model_selection import GridSearchCV

    grid = {"nystroem__gamma": list(np.array([0.1, 0.3, 1, 3, 10]) / n_features)}
    return GridSearchCV(_sklearn(M), grid, cv=5)


def _loo_kernel_ridge(K, y, alpha):
    """Exact kernel ridge with an intercept and its leave-one-out residuals,
    written here from the hat matrix (independently of the library): with
    ``P = (K + alpha I)^{-1}``, ``v = P 1`` and ``Q = P - v v^T / 1^T v``,
    the residuals are ``alpha Q y`` and the hat matrix ``I - alpha Q``."""
    from scipy.linalg import cho_factor, cho_solve
    from scipy.linalg.lapack import dpotri

    n = K.shape[0]
    M = K + alpha * np.eye(n)
    factor = cho_factor(M, lower=True, overwrite_a=True)
    solution = cho_solve(factor, np.column_stack([y, np.ones(n)]))
    u, v = solution[:, 0], solution[:, 1]
    intercept = u.sum() / v.sum()
    dual = u - v * intercept
    inverse, info = dpotri(factor[0], lower=1)
    if info:
        return None
    Q_diagonal = np.diag(inverse) - v * v / v.sum()
    return dual, intercept, dual / Q_diagonal


def _exact(X, y, X_test):
    """Exact kernel ridge tuned by exact leave-one-out; test predictions."""
    from sklearn.metrics.pairwise import rbf_kernel

    mean, scale = X.mean(0), X.std(0)
    scale[scale == 0] = 1.0
    X, X_test = (X - mean) / scale, (X_test - mean) / scale
    gamma = 1.0 / X.shape[1]
    K = rbf_kernel(X, gamma=gamma)
    n = X.shape[0]
    best = None
    for lam in EXACT_LAMBDAS:
        solved = _loo_kernel_ridge(K, y, n * lam)
        if solved is None:
            continue
        dual, intercept, residuals = solved
        score = float(np.mean(residuals**2))
        if best is None or score < best[0]:
            best = (score, lam, dual, intercept)
    _, lam, dual, intercept = best
    prediction = rbf_kernel(X_test, X, gamma=gamma) @ dual + intercept
    return prediction, {"lambda": float(lam), "n_components": n}


def rows_of(name):
    base, _, rows = name.partition("@")
    return load_pooled(base, int(rows)) if rows else load_split(base)


def child(case):
    X, y, X_test, y_test = rows_of(case["set"])
    system = case["system"]
    classification = case["set"] in CLASSIFICATION
    stop = rss_probe()
    if system == "exact":
        start = time.perf_counter()
        prediction, record = _exact(X, y, X_test)
        seconds, record["warnings"] = time.perf_counter() - start, []
    else:
        rank = case.get("n_components", "auto")  # (ours-int)
        if system == "sklearn-grid":
            model = _sklearn_grid(X.shape[1])
        elif system.startswith("sklearn-"):
            model = _sklearn(int(system.split("-")[1]), classification)
        elif classification:
            model = _ours_classifier(rank)
        else:
            kernel = "rbf" if system == "ours-rbf" else None
            model = _ours(640 if system == "ours-640" else None, rank, kernel)
        seconds, messages = timed_fit(model, X, y)
        last = model.best_estimator_[-1] if system == "sklearn-grid" else model[-1]
        record = {"warnings": messages}
        if classification:
            prediction = model.predict_proba(X_test)
            record["alpha"] = float(getattr(last, "alpha", 1.0 / getattr(last, "C", 1)))
        else:
            prediction = model.predict(X_test)
            record["alpha"] = float(last.alpha_)
        if system.startswith("ours"):
            record |= {
                "n_components": int(last.n_components_),
                "exact": bool(last.nystroem_.exact_),
                "estimated_loss": float(last.nystroem_.loss_estimate_),
            }
            if not classification:
                record["lambda"] = float(last.alpha_) / X.shape[0]
        else:
            record["n_components"] = int(last.n_features_in_)
    if classification:
        from sklearn.metrics import log_loss

        classes = np.unique(y)
        errors = {
            "test_log_loss": float(log_loss(y_test, prediction, labels=classes)),
            "test_accuracy": float(
                np.mean(classes[np.argmax(prediction, axis=1)] == y_test)
            ),
        }
        errors["test_error"] = errors["test_log_loss"]
    else:
        mse = float(np.mean((prediction - y_test) ** 2))
        errors = {"test_mse": mse, "test_error": mse}
    return dict(
        case,
        **record,
        **stop(),
        **errors,
        fit_seconds=seconds,
        n_train=int(X.shape[0]),
    )


def median_runs(records):
    """One record per set and system: the first run's, with the median fit
    time of its runs (their times in ``fit_seconds_runs`` where there are
    several)."""
    runs = {}
    for record in records:
        runs.setdefault((record["set"], record["system"]), []).append(record)
    merged = []
    for group in runs.values():
        record = dict(group[0])
        if len(group) > 1:
            seconds = [r.get("fit_seconds") for r in group]
            if all(s is not None for s in seconds):
                record["fit_seconds"] = float(np.median(seconds))
                record["fit_seconds_runs"] = seconds
        merged.append(record)
    return merged


def summarise(records):
    rows = []
    for name in dict.fromkeys(r["set"] for r in records):
        runs = [r for r in records if r["set"] == name and "fit_seconds" in r]
        for r in runs:  # (records of the regression-only version)
            r.setdefault("test_error", r.get("test_mse"))
        exact = next((r for r in runs if r["system"] == "exact"), None)
        ours = next((r for r in runs if r["system"] == "ours"), None)
        for r in runs:
            if exact is not None:
                r["mse_over_exact"] = r["test_mse"] / exact["test_mse"]
        if ours is None:
            continue
        fixed = next((r for r in runs if r["system"] == "ours-int"), None)
        rbf = next((r for r in runs if r["system"] == "ours-rbf"), None)
        dominating = [
            r["system"]
            for r in runs
            if r["system"].startswith("sklearn-")
            and r["fit_seconds"] < ours["fit_seconds"]
            and r["test_error"] < ours["test_error"]
        ]
        rows.append(
            {
                "set": name,
                "n_train": ours["n_train"],
                "ours_fit_s": ours["fit_seconds"],
                "ours_rank": ours["n_components"],
                "ours_exact": ours["exact"],
                "ours_error": ours["test_error"],
                "ours_mse_over_exact": ours.get("mse_over_exact"),
                "ours_warned": bool(ours["warnings"]),
                "ours_peak_rss_mb": ours["peak_rss_mb"],
                "dominated_by": dominating,
                "ours_over_rbf": rbf and ours["test_error"] / rbf["test_error"],
                "ours_over_int": (
                    None
                    if fixed is None or fixed["n_components"] != ours["n_components"]
                    else ours["fit_seconds"] / fixed["fit_seconds"]
                ),
                **{
                    f"{r['system']}_{key}": r[field]
                    for r in runs
                    if r["system"] != "ours"
                    for key, field in (
                        ("fit_s", "fit_seconds"),
                        ("error", "test_error"),
                    )
                },
                **{
                    f"{r['system']}_mse_over_exact": r.get("mse_over_exact")
                    for r in runs
                    if r["system"] != "ours"
                },
            }
        )
    return rows


def headline(payload):
    """Per set: our fit seconds, rank, test error and its ratio to the
    exact reference's, and the pipelines both faster and more accurate;
    over the regression sets, the range of the ratio."""
    rows = payload["summary"]
    ratios = [r["ours_mse_over_exact"] for r in rows if r.get("ours_mse_over_exact")]
    return {
        "sets": len(rows),
        "dominated": sum(bool(r["dominated_by"]) for r in rows),
        "mse_over_exact_min": min(ratios, default=None),
        "mse_over_exact_max": max(ratios, default=None),
        "per_set": {
            r["set"]: {
                "n_train": r["n_train"],
                "fit_s": r["ours_fit_s"],
                "rank": r["ours_rank"],
                "exact": r["ours_exact"],
                "error": r["ours_error"],
                "mse_over_exact": r.get("ours_mse_over_exact"),
                "over_rbf": r.get("ours_over_rbf"),
                "warned": r["ours_warned"],
                "dominated_by": r["dominated_by"],
            }
            for r in rows
        },
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", default=",".join(REGRESSION + CLASSIFICATION))
    parser.add_argument("--components", default="250,500,1000,2000,4000")
    parser.add_argument("--exact-max-rows", type=int, default=12_000)
    parser.add_argument(
        "--systems",
        default=None,
        help="comma-separated subset of ours, ours-rbf, ours-640, ours-int, "
        "sklearn-M, sklearn-grid, exact",
    )
    parser.add_argument(
        "--merge",
        type=Path,
        default=None,
        help="a results.json whose records of the other systems are kept",
    )
    parser.add_argument(
        "--repeats",
        type=int,
        default=1,
        help="fits of each system, in turn with the others; its median time kept",
    )
    parser.add_argument("--plot-only", action="store_true")
    parser.add_argument(
        "--table-only",
        action="store_true",
        help="write table.rst from the results.json of --output-dir",
    )
    add_arguments(parser, BENCHMARK)
    args = parser.parse_args(argv)
    if args.child:
        return child_main(child, args.child)
    if args.plot_only or args.table_only:
        results = json.loads((args.output_dir / "results.json").read_text())
        if args.plot_only:
            plot(results, args.output_dir)
        if args.table_only:
            (args.output_dir / "table.rst").write_text(table(results["summary"]))
        return
    run = start_run(args.threads)
    args.output_dir.mkdir(parents=True, exist_ok=True)
    systems = ["ours", "ours-rbf", "ours-640", "ours-int", "sklearn-grid", "exact"]
    systems[4:4] = [f"sklearn-{int(m)}" for m in args.components.split(",")]
    wanted = args.systems.split(",") if args.systems else systems
    sets = args.sets.split(",")
    kept = []
    if args.merge is not None:
        kept = json.loads(args.merge.read_text())["records"]
        kept = [r for r in kept if r["system"] not in wanted or r["set"] not in sets]
    records = []
    for name in sets:
        todo = [s for s in systems if s in wanted]
        if name in CLASSIFICATION:  # (regression's references and kernels)
            regression = ("exact", "ours-640", "ours-rbf", "sklearn-grid")
            todo = [s for s in todo if s not in regression]
        if "exact" in todo and rows_of(name)[0].shape[0] > args.exact_max_rows:
            todo.remove("exact")
        for _ in range(args.repeats):
            for system in todo:
                case = {"set": name, "system": system}
                if system == "ours-int":
                    chosen = [
                        r.get("n_components")
                        for r in records + kept
                        if r["set"] == name and r["system"] == "ours"
                    ]
                    if not chosen or chosen[0] is None:
                        print(f"{name}: no rank of ours to fit at: ours-int skipped")
                        continue
                    case["n_components"] = int(chosen[0])
                record = run_child(__file__, case, args.threads, check=False)
                records.append(record)
                shown = {
                    k: record.get(k)
                    for k in (
                        "set",
                        "system",
                        "n_components",
                        "fit_seconds",
                        "test_error",
                    )
                }
                print(json.dumps(shown), flush=True)
    records = kept + median_runs(records)
    summary = summarise(records)
    for row in summary:
        print(
            f"{row['set']:20s} n={row['n_train']:6d} ours {row['ours_fit_s']:6.1f} s "
            f"rank {row['ours_rank']:6d} error {row['ours_error']:.5g} "
            f"mse/exact {row['ours_mse_over_exact']} "
            f"warned {row['ours_warned']} dominated by {row['dominated_by']}"
            f" over int {row['ours_over_int']} over rbf {row['ours_over_rbf']}"
        )
    out = {"threads": args.threads, "records": records, "summary": summary}
    path = args.output_dir / "results.json"
    write_results(path, out, run)
    (args.output_dir / "table.rst").write_text(table(summary))
    plot(out, args.output_dir)
    append_history(args.output_dir, BENCHMARK, run, headline(out), results=path)


def table(summary):
    """The regression sets' summary as an RST list-table (the table of
    ``doc/automatic_rank.rst``): test MSE over the exact reference's (the
    test MSE where there is none) and fit seconds of each system."""

    def cell(row, system, rank=False):
        seconds = row.get(f"{system}_fit_s")
        if seconds is None:
            return "--"
        ratio = row.get(f"{system}_mse_over_exact")
        error = (
            f"{ratio:.3f}" if ratio is not None else f"MSE {row[f'{system}_error']:.4g}"
        )
        text = f"{error}, {seconds:.1f} s"
        if rank:
            rank_text = "exact" if row["ours_exact"] else f"{row['ours_rank']:,}"
            text += f" ({rank_text})"
        return text

    head = [
        "set (training rows)",
        "ours: MSE ratio, s (rank)",
        "ours over int fit (time)",
        "``M = 1000``",
        "``M = 2000``",
        "``M = 4000``",
        "grid over gamma",
        "exact reference: s",
    ]
    lines = [".. list-table::", "   :header-rows: 1", ""]
    body = []
    for row in summary:
        if row["set"] in CLASSIFICATION:
            continue
        over_int = row.get("ours_over_int")
        exact = row.get("exact_fit_s")
        body.append(
            [
                f"{row['set']} ({row['n_train']:,})",
                cell(row, "ours", rank=True),
                "--" if over_int is None else f"{over_int:.2f}",
                cell(row, "sklearn-1000"),
                cell(row, "sklearn-2000"),
                cell(row, "sklearn-4000"),
                cell(row, "sklearn-grid"),
                "--" if exact is None else f"{exact:.1f}",
            ]
        )
    for cells in [head] + body:
        lines.append(f"   * - {cells[0]}")
        lines += [f"     - {c}" for c in cells[1:]]
    return "\n".join(lines) + "\n"


def plot(results, output_dir):
    """One figure per set: fit seconds (log scale) against test error."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:  # (the benchmark extra)
        print("matplotlib is not installed: no plots")
        return
    records = [r for r in results["records"] if "fit_seconds" in r]
    for name in dict.fromkeys(r["set"] for r in records):
        runs = [r for r in records if r["set"] == name]
        fig, ax = plt.subplots(figsize=(5, 3.6))
        peers = sorted(
            (
                r
                for r in runs
                if r["system"].startswith("sklearn-") and r["system"] != "sklearn-grid"
            ),
            key=lambda r: r["n_components"],
        )
        error = [r.get("test_error", r.get("test_mse")) for r in peers]
        ax.plot(
            [r["fit_seconds"] for r in peers],
            error,
            "o-",
            color="0.5",
            label="Nystroem(M) + "
            + ("LogisticRegression()" if name in CLASSIFICATION else "RidgeCV"),
        )
        for r, e in zip(peers, error, strict=True):
            ax.annotate(
                str(r["n_components"]),
                (r["fit_seconds"], e),
                fontsize=7,
                xytext=(3, 3),
                textcoords="offset points",
            )
        styles = {
            "ours": ("*", "C3", 14),
            "ours-640": ("s", "C1", 7),
            "ours-rbf": ("v", "C4", 7),
            "sklearn-grid": ("o", "0.2", 8),
            "ours-int": ("^", "C2", 7),
            "exact": ("D", "C0", 7),
        }
        labels = {
            "ours": "ours (defaults)",
            "ours-640": "ours, max_components=640",
            "ours-rbf": 'ours, kernel="rbf"',
            "sklearn-grid": "GridSearchCV over gamma, M = 1000",
            "ours-int": "ours, n_components=its rank",
            "exact": "exact, penalty by exact LOO",
        }
        for r in runs:
            if r["system"] in styles:
                marker, color, size = styles[r["system"]]
                ax.plot(
                    r["fit_seconds"],
                    r.get("test_error", r.get("test_mse")),
                    marker,
                    color=color,
                    markersize=size,
                    linestyle="none",
                    label=labels[r["system"]],
                )
        ax.set_xscale("log")
        ax.set_xlabel(f"fit time (s), {results['threads']} threads")
        ax.set_ylabel("test log-loss" if name in CLASSIFICATION else "test MSE")
        ax.set_title(f"{name} (n = {runs[0]['n_train']})")
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(output_dir / f"{name}.png", dpi=110)
        plt.close(fig)


if __name__ == "__main__":
    main()

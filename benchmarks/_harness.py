"""The harness every benchmark script runs on (``benchmarks/README.rst``).

One place for the mechanics of a measurement: a child process per fit
(:func:`run_child`, :func:`child_main`), whose peak memory
(:func:`rss_probe`) and thread pools are its own and whose crash is a
record; the A B A B protocol (:func:`alternate`, :func:`median`); the run
record (:func:`start_run`: commit, uncommitted package files, date, command,
machine), stored under ``"run"`` in every results file
(:func:`write_results`); and the history (:func:`append_history`), one JSON
line per run in ``results/<benchmark>/history.jsonl``, or beside results
written elsewhere.  Paths are recorded relative to the repository root
(:func:`display_path`).  Only the standard library is imported at import
time: a child may run in another virtual environment (``bench_falkon.py``).
"""

import argparse
import datetime
import gzip
import json
import math
import os
import platform
import resource
import shlex
import subprocess
import sys
import time
import warnings
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent
ROOT = BENCHMARKS.parent
RESULTS = BENCHMARKS / "results"


def display_path(path):
    """``path`` as results record it: relative to the repository root
    (``benchmarks/results/...``, ``sklearn_dof``, ``../shared/data/...``),
    so that no result holds a machine's absolute paths; a path outside the
    repository's parent folder by its name only (``.../name``)."""
    path = Path(path).resolve()
    if path == ROOT or ROOT.parent in path.parents:
        return os.path.relpath(path, ROOT)
    return f".../{path.name}"


def _display_argument(argument):
    """A command-line argument with an absolute path (``--opt=/path`` too)
    as :func:`display_path` writes it."""
    name, equals, value = argument.rpartition("=")
    if not os.path.isabs(value):
        return argument
    return f"{name}{equals}{display_path(value)}"


def results_dir(benchmark, *parts):
    """``benchmarks/results/<benchmark>/<parts...>``."""
    return RESULTS.joinpath(benchmark, *parts)


def add_arguments(parser, benchmark, *, threads=2, output_dir=True, child=True):
    """The options every benchmark shares: ``--child`` (hidden, the child
    side of :func:`run_child`; none if ``child`` is False), ``--threads``
    (BLAS/OpenMP threads of each measurement; none if ``threads`` is None)
    and ``--output-dir`` (default ``results/<benchmark>``, or
    ``output_dir`` when it is a path; none if it is False)."""
    if child:
        parser.add_argument("--child", help=argparse.SUPPRESS)
    if threads is not None:
        parser.add_argument(
            "--threads",
            type=int,
            default=threads,
            help="BLAS/OpenMP threads of each measurement (default %(default)s)",
        )
    if output_dir is not False:
        default = results_dir(benchmark) if output_dir is True else Path(output_dir)
        parser.add_argument(
            "--output-dir",
            type=Path,
            default=default,
            help="where the results go (default: %(default)s); elsewhere than "
            "results/, the history of the run stays beside them",
        )
    return parser


# ---------------------------------------------------------------------------
# A child process per fit


def thread_env(threads, pythonpath=None):
    """The environment of a child on ``threads`` BLAS/OpenMP threads, with
    ``pythonpath`` (a checkout, say) first on ``PYTHONPATH``."""
    env = dict(os.environ)
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[name] = str(threads)
    if pythonpath:
        env["PYTHONPATH"] = os.pathsep.join(
            [str(pythonpath), *filter(None, [env.get("PYTHONPATH")])]
        )
    return env


def run_child(
    script, case, threads, *, check=True, timeout=None, python=None, pythonpath=None
):
    """Run ``script --child <case as JSON>`` in a fresh process on ``threads``
    BLAS/OpenMP threads; its last line of output, parsed as JSON.

    ``python`` runs the child under another interpreter (default: this
    one), ``pythonpath`` puts a checkout first on its ``PYTHONPATH`` (an A B
    of two commits).  With ``check=False`` a failing child (or one past
    ``timeout`` seconds) gives ``case`` with ``error``, the last lines of
    its error output, and ``exit_code`` (negative: the signal that ended it;
    None: timed out) instead of raising.  The record gets ``child_wall_s``,
    the child's whole life (imports and data included).
    """
    cmd = [python or sys.executable, str(script), "--child", json.dumps(case)]
    env = thread_env(threads, pythonpath)
    start = time.perf_counter()
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, env=env, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        if check:
            raise
        return dict(case, error=[f"timed out after {timeout} s"], exit_code=None)
    wall = time.perf_counter() - start
    if proc.returncode:
        if check:
            raise subprocess.CalledProcessError(
                proc.returncode, cmd, proc.stdout, proc.stderr
            )
        lines = proc.stderr.strip().splitlines()[-3:]
        return dict(
            case,
            error=lines or [f"exit code {proc.returncode}"],
            exit_code=proc.returncode,
            child_wall_s=wall,
        )
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result["child_wall_s"] = wall
    return result


def child_main(function, case_json):
    """The child side of :func:`run_child`: ``function(case)``, printed as
    one JSON line (the last line of the child's output)."""
    result = function(json.loads(case_json))
    print(json.dumps(to_jsonable(result)), flush=True)


def _proc_status_mb(key):
    """``VmRSS`` or ``VmHWM`` of /proc/self/status in MB (None off Linux)."""
    try:
        with open("/proc/self/status") as stream:
            for line in stream:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def _reset_peak_rss():
    """Set this process's peak RSS (``VmHWM``) to its current RSS.

    Linux's ``ru_maxrss`` survives ``fork`` + ``exec``: a child starts with
    its parent's peak.  ``VmHWM`` belongs to the process image, and writing
    5 to ``/proc/self/clear_refs`` resets it.  Returns whether it worked.
    """
    try:
        with open("/proc/self/clear_refs", "w") as stream:
            stream.write("5")
        return True
    except OSError:
        return False


def rss_probe():
    """Start a peak-RSS measurement; returns a function giving the record
    (``rss_before_fit_mb``, ``peak_rss_mb``, ``fit_rss_increase_mb``,
    ``rss_source``)."""
    before = _proc_status_mb("VmRSS")
    reset = _reset_peak_rss()
    if before is None:  # not Linux: ru_maxrss, in bytes on macOS
        scale = 1 << 20 if sys.platform == "darwin" else 1 << 10
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / scale

        def stop():
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / scale
            return {
                "rss_before_fit_mb": before,
                "peak_rss_mb": peak,
                "fit_rss_increase_mb": peak - before,
                "rss_source": "ru_maxrss",
            }

        return stop

    def stop():
        peak = _proc_status_mb("VmHWM")
        return {
            "rss_before_fit_mb": before,
            "peak_rss_mb": peak,
            "fit_rss_increase_mb": peak - before,
            "rss_source": "VmHWM (reset before the fit)" if reset else "VmHWM",
        }

    return stop


def timed(function, *args, **kwargs):
    """``function(*args, **kwargs)`` and its wall seconds."""
    start = time.perf_counter()
    out = function(*args, **kwargs)
    return out, time.perf_counter() - start


def timed_fit(model, X, y=None):
    """``model.fit(X, y)``: its seconds and the distinct messages of the
    warnings it raised."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        start = time.perf_counter()
        if y is None:
            model.fit(X)
        else:
            model.fit(X, y)
        seconds = time.perf_counter() - start
    messages = list(dict.fromkeys(str(w.message)[:300] for w in caught))
    return seconds, messages


# ---------------------------------------------------------------------------
# A B A B


def alternate(run, variants, rounds, *, on_result=None):
    """Every variant once per round, in turn: A B A B (``rounds`` rounds).

    ``variants`` maps a name to what ``run(name, variant)`` needs; returns
    ``{name: [result of each round]}``.  ``on_result(name, result)`` sees
    each result as it comes (to print it, or save progress).
    """
    runs = {name: [] for name in variants}
    for _ in range(rounds):
        for name, variant in variants.items():
            result = run(name, variant)
            runs[name].append(result)
            if on_result is not None:
                on_result(name, result)
    return runs


def median(values):
    """Median of the values that are not None (None if there are none)."""
    values = sorted(v for v in values if v is not None)
    if not values:
        return None
    mid = len(values) // 2
    if len(values) % 2:
        return float(values[mid])
    return 0.5 * float(values[mid - 1] + values[mid])


# ---------------------------------------------------------------------------
# Where a result comes from


def git_state():
    """The commit and the uncommitted package files of the checkout, which a
    result depends on both of (None outside a git checkout)."""

    def git(*args):
        return subprocess.run(
            ["git", *args], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()

    try:
        return {
            "commit": git("rev-parse", "HEAD"),
            "modified": git("status", "--porcelain", "--", "sklearn_dof").splitlines(),
        }
    except (OSError, subprocess.CalledProcessError):
        return None


def _cpu_model():
    try:
        with open("/proc/cpuinfo") as stream:
            for line in stream:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _version(distribution):
    from importlib import metadata

    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def machine(threads=None):
    """The machine and software of a run: cores (and those this process may
    use), CPU model, memory, the BLAS (library, version, its own thread
    count) and ``threads``, the BLAS threads the benchmark asked for, and
    the versions of Python, NumPy, SciPy, scikit-learn and ``sklearn_dof``
    (with the folder it is imported from: ``PYTHONPATH`` may name another
    checkout than the commit's)."""
    record = {
        "cores": os.cpu_count(),
        "cpu": _cpu_model(),
        "blas_threads": threads,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "numpy": _version("numpy"),
        "scipy": _version("scipy"),
        "scikit-learn": _version("scikit-learn"),
    }
    if hasattr(os, "sched_getaffinity"):
        record["cores_available"] = len(os.sched_getaffinity(0))
    try:
        record["memory_gib"] = round(
            os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1
        )
    except (ValueError, OSError, AttributeError):
        pass
    try:
        import sklearn_dof

        record["sklearn_dof"] = sklearn_dof.__version__
        record["sklearn_dof_path"] = display_path(Path(sklearn_dof.__file__).parent)
    except ImportError:
        record["sklearn_dof"] = None
    try:
        import numpy  # noqa: F401  (load the BLAS libraries, for the record)
        import scipy.linalg  # noqa: F401
        from threadpoolctl import threadpool_info

        record["blas"] = [
            {
                k: info.get(k)
                for k in ("internal_api", "version", "num_threads", "architecture")
            }
            for info in threadpool_info()
        ]
    except ImportError:
        pass
    return record


def start_run(threads=None, argv=None):
    """The record of a run, taken at its start: ``commit``, ``modified``
    (uncommitted package files), ``date`` (UTC), ``command`` and
    ``machine`` (:func:`machine`)."""
    state = git_state() or {}
    argv = sys.argv if argv is None else argv
    return {
        "commit": state.get("commit"),
        "modified": state.get("modified"),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(
            timespec="seconds"
        ),
        "command": shlex.join(["python", *map(_display_argument, argv)]),
        "machine": machine(threads),
    }


# ---------------------------------------------------------------------------
# JSON, results and history


def to_jsonable(obj):
    """Nested dicts/lists of numpy values as plain JSON types (NaN as null)."""
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, Path):
        return str(obj)
    if hasattr(obj, "tolist") and hasattr(obj, "dtype"):  # numpy arrays, scalars
        return to_jsonable(obj.tolist())
    if isinstance(obj, bool):
        return obj
    if isinstance(obj, float):
        return None if not math.isfinite(obj) else obj
    return obj


def write_json(path, obj, *, compact=False):
    """Write ``obj`` as JSON, gzipped when ``path`` ends in ``.gz``.

    ``compact`` drops the indentation, for large arrays.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "wt") as stream:
        if compact:
            json.dump(to_jsonable(obj), stream, separators=(",", ":"))
        else:
            json.dump(to_jsonable(obj), stream, indent=1)
        stream.write("\n")


def append_jsonl(path, record):
    """One JSON line appended to ``path`` (progress files: a run stopped by
    a time limit keeps what it measured)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as stream:
        stream.write(json.dumps(to_jsonable(record)) + "\n")


def write_results(path, payload, run):
    """``payload`` with the run record under ``"run"``, as JSON at ``path``
    (rewritten as a run goes on; :func:`append_history` at its end)."""
    write_json(path, {**payload, "run": run})


def history_path(output_dir, benchmark):
    """``results/<benchmark>/history.jsonl`` for results written under
    ``results/<benchmark>``, else ``history.jsonl`` beside them."""
    output_dir = Path(output_dir).resolve()
    home = results_dir(benchmark).resolve()
    if output_dir == home or home in output_dir.parents:
        return home / "history.jsonl"
    return output_dir / "history.jsonl"


def significant(obj, digits=4):
    """Floats of nested dicts/lists rounded to ``digits`` significant digits
    (headlines are read, not computed with)."""
    if isinstance(obj, dict):
        return {k: significant(v, digits) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [significant(v, digits) for v in obj]
    if isinstance(obj, float):
        if not math.isfinite(obj) or obj == 0:
            return None if not math.isfinite(obj) else 0.0
        return float(f"{obj:.{digits}g}")
    return obj


def history_line(benchmark, run, headline, *, results=None, label=None):
    """One line of a history: the run record (machine in short), where its
    files are and its headline."""
    machine = run.get("machine") or {}
    short = {
        k: machine.get(k)
        for k in (
            "cores",
            "cores_available",
            "cpu",
            "blas_threads",
            "numpy",
            "scipy",
            "scikit-learn",
        )
        if machine.get(k) is not None
    }
    blas = [
        f"{b['internal_api']} {b.get('version')}"
        for b in machine.get("blas") or []
        if b.get("internal_api") and b.get("version")
    ]
    if blas:  # (numpy's and scipy's, which may differ)
        short["blas"] = ", ".join(sorted(set(blas)))
    line = {
        "benchmark": benchmark,
        "run": label,
        "commit": run.get("commit"),
        "modified": run.get("modified") or [],
        "date": run.get("date"),
        "machine": short,
        "command": run.get("command"),
        "results": None if results is None else display_path(results),
        "headline": significant(to_jsonable(headline)),
    }
    if machine.get("sklearn_dof_path") not in (None, "sklearn_dof"):
        line["package"] = machine["sklearn_dof_path"]
    return line


def folder_label(output_dir, benchmark):
    """The name of a run by its folder: the path below
    ``results/<benchmark>``, the benchmark's name for that folder itself,
    the folder's name elsewhere."""
    output_dir = Path(output_dir).resolve()
    home = results_dir(benchmark).resolve()
    if home in output_dir.parents:
        return str(output_dir.relative_to(home))
    return benchmark if output_dir == home else output_dir.name


def append_history(output_dir, benchmark, run, headline, *, results=None, label=None):
    """Append the run's headline to the benchmark's ``history.jsonl``
    (:func:`history_path`); ``label`` names the run (default: the output
    folder below ``results/<benchmark>``).  Returns the line."""
    path = history_path(output_dir, benchmark)
    if label is None:
        label = folder_label(output_dir, benchmark)
    line = history_line(benchmark, run, headline, results=results, label=label)
    append_jsonl(path, line)
    print(f"history: {display_path(path)}", flush=True)
    return line

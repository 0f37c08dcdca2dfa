"""Where the automatic rank's time goes, beside an int fit at its rank.

One case of ``bench_auto_rank.py`` (``--set``, ``--seed``, ``--n-train``):
``DoFKernelRidge(n_components="auto")`` is fitted ``--repeats`` times under
:mod:`cProfile` after three unprofiled fits, then the int fit at the rank it
chose the same way, on ``--threads`` BLAS threads.  The report lists, per
function, the milliseconds per fit spent in it (``own``) and below it
(``cumulative``) in both, the functions of the automatic fit first, most
expensive first: the difference of the two columns is what choosing the
rank costs.

Usage::

    python benchmarks/profile_auto_rank.py --set kin40k --n-train 2000
"""

import argparse
import cProfile
import pstats
import sys
import types
from pathlib import Path

from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).parent))
import bench_auto_rank as bench  # noqa: E402

from sklearn_dof import DoFKernelRidge  # noqa: E402


def profile(make, X, y, repeats):
    """Milliseconds per fit by function: ``{name: (own, cumulative)}``."""
    for _ in range(3):
        make().fit(X, y)
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(repeats):
        make().fit(X, y)
    profiler.disable()
    stats = pstats.Stats(profiler).stats
    return {
        f"{Path(file).name}:{name}": (own / repeats * 1e3, total / repeats * 1e3)
        for (file, _, name), (_, _, own, total, _) in stats.items()
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", default="kin40k")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--n-train", type=int, default=2000)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    sizes = types.SimpleNamespace(
        n_train=args.n_train, n_test=4000, n_train_classification=args.n_train
    )
    case = bench.make_case(args.set, args.seed, sizes)

    def estimator(n_components):
        return lambda: DoFKernelRidge(
            alpha=case.alpha,
            n_components=n_components,
            random_state=args.seed,
            **case.params,
        )

    with threadpool_limits(args.threads):
        rank = int(estimator("auto")().fit(case.X_fit, case.y).n_components_)
        auto = profile(estimator("auto"), case.X_fit, case.y, args.repeats)
        fixed = profile(estimator(rank), case.X_fit, case.y, args.repeats)
    print(f"{args.set} seed {args.seed}, {case.n_train} rows: rank {rank}")
    print(f"{'function':58s} {'own auto/int ms':>17s} {'cumulative auto/int ms':>24s}")
    for name in sorted(auto, key=lambda k: -auto[k][0])[: args.top]:
        own, total = auto[name]
        own_int, total_int = fixed.get(name, (0.0, 0.0))
        columns = f"{own:8.1f}/{own_int:<8.1f} {total:11.1f}/{total_int:<11.1f}"
        print(f"{name[:58]:58s} {columns}")
    fit = "_ridge.py:fit"
    if fit in auto and fit in fixed:
        print(f"fit: {auto[fit][1]:.1f} ms against {fixed[fit][1]:.1f} ms")


if __name__ == "__main__":
    main()

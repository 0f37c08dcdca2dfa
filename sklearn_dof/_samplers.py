"""Sampling rules: how the nested set of landmarks grows, and what sets its rank.

The public API names a rule by a string (``sampling="uniform"``), as
scikit-learn does; :func:`resolve_sampling` turns that string, an array of
given rows or a user's selector into one :class:`SamplingRule`, once per
fit.  A rule knows

* how it grows the nested landmark set, a partial Cholesky factor of ``K``
  (:meth:`SamplingRule.growth`), and the landmarks of a fixed rank
  (:meth:`SamplingRule.fixed_rank_landmarks`);
* which degrees of freedom its automatic rank follows
  (``rank_statistic``: ``"d_max"`` for uniform and greedy columns, Bach
  2013; ``"d_eff"`` for the samplers that adapt to the leverage scores,
  Alaoui & Mahoney 2015, Musco & Musco 2017, Chen et al. 2022), which is
  also the statistic whose convergence stops the doubling estimate;
* the constant of its automatic rank ``p = ceil(rank_factor * d)``
  (:func:`~sklearn_dof.dof_rank`).

:data:`SAMPLING_RULES` is the registry of the named rules; the parameter
constraints of the estimators are derived from it.
"""

from collections.abc import Mapping

import numpy as np
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import StrOptions

from . import _dask
from ._dof import sampling_scores
from ._sampling import PartialCholesky, uniform_columns


def partial_cholesky_of(access):
    """An empty :class:`PartialCholesky` of the kernel matrix behind ``access``
    (a ``KernelColumns``), kept on the cluster for a Dask array."""
    if isinstance(access, _dask.DaskKernelColumns):
        return _dask.DaskPartialCholesky(
            access.columns, access.diagonal(), access.chunks
        )
    return PartialCholesky(access.columns, access.diagonal())


def doubling_schedule(n, start=32):
    """Numbers of columns of the doubling rounds: 32, 64, ... up to ``n``."""
    schedule = [min(start, n)]
    while schedule[-1] < n:
        schedule.append(min(2 * schedule[-1], n))
    return schedule


class Growth:
    """``growth(p)`` extends a factor to ``p`` pivots by one rule.

    ``order`` is the whole sequence of pivots when it is fixed in advance
    (uniform or given landmarks: a prefix of it needs no factor), None when
    each pivot depends on the residual of the previous ones.
    """

    def __init__(self, chol, extend, order=None):
        self.chol = chol
        self._extend = extend
        self.order = order

    def __call__(self, p):
        # One allocation of the factor per call, not one per doubling of
        # its capacity: fresh memory is slow to touch on some machines.
        n = self.chol.residual.shape[0]
        self.chol.reserve(min(p, n))
        self._extend(p)


class SamplingRule:
    """A rule growing a nested set of landmarks (base class).

    Attributes
    ----------
    name : str
        The string that selects the rule (``sampling=name``).
    rank_statistic : {"d_max", "d_eff"} or None
        The degrees of freedom the automatic rank is read from, and whose
        convergence stops the doubling estimate; None when the rule fixes
        its own rank (given rows).
    rank_factor : float or None
        ``c`` of the automatic rank ``p = ceil(c * d)``.
    uniform_sample : bool
        Whether the landmarks are a uniform sample of the rows, so that
        ``(n / p) K(I, I)`` estimates the spectrum of ``K``.
    """

    name = None
    rank_statistic = "d_max"
    rank_factor = None
    uniform_sample = False

    def growth(self, chol, n_samples, random_state, alpha):
        """The :class:`Growth` of ``chol`` by this rule."""
        raise NotImplementedError

    def estimate_rule(self):
        """The rule whose columns the doubling estimate grows."""
        return self

    def fixed_rank_landmarks(self, access, n_components, random_state, alpha):
        """Landmarks for an int rank: ``(indices, PartialCholesky or None)``.

        The residual-driven rules need the ``n x p`` factor, which the
        d.o.f. estimate and the kernel-basis fit then reuse.
        """
        chol = partial_cholesky_of(access)
        grow = self.growth(chol, access.n_samples, random_state, alpha)
        grow(n_components)
        return np.asarray(chol.pivots[:n_components], dtype=np.intp), chol

    def __repr__(self):
        return f"{type(self).__name__}()"


class UniformRule(SamplingRule):
    """Columns drawn uniformly without replacement (Bach 2013)."""

    name = "uniform"
    rank_factor = 2.75
    uniform_sample = True

    def growth(self, chol, n_samples, random_state, alpha):
        order = check_random_state(random_state).permutation(n_samples)
        return Growth(chol, lambda p: chol.add(order[len(chol.pivots) : p]), order)

    def fixed_rank_landmarks(self, access, n_components, random_state, alpha):
        # A prefix of the same permutation, and no factor: it costs nothing.
        return uniform_columns(access.n_samples, n_components, random_state), None


class PivotedRule(SamplingRule):
    """Greedy incomplete Cholesky: each landmark the worst explained point."""

    name = "pivoted"
    rank_factor = 1.5

    def growth(self, chol, n_samples, random_state, alpha):
        return Growth(chol, lambda p: chol.add_greedy(p - len(chol.pivots)))


class RPCholeskyRule(SamplingRule):
    """Randomly pivoted (block) Cholesky (Chen, Epperly, Tropp & Webber 2022)."""

    name = "rpcholesky"
    rank_statistic = "d_eff"
    rank_factor = 3.0

    def growth(self, chol, n_samples, random_state, alpha):
        rng = check_random_state(random_state)
        return Growth(chol, lambda p: chol.add_random(p - len(chol.pivots), rng))


class LeverageRule(SamplingRule):
    """Approximate ridge-leverage sampling in rounds (recursive RLS, BLESS).

    The first 32 pivots are uniform; then each round adds a quarter more
    pivots (at least 32), drawn without replacement with probabilities
    proportional to approximate ridge leverage scores from the factor so
    far (:func:`~sklearn_dof._dof.sampling_scores`), so that regions the
    factor already explains are sampled less, round after round.  Each
    round costs ``O(n r^2)``, a constant times one round at the final rank
    in all.  The Nystroem approximation ``K_{:S} (K_{SS})^+ K_{S:}`` does
    not change when the sampled columns are rescaled, so the importance
    weights ``1 / sqrt(p q_i)`` of the sampling theory need no place in the
    feature map.
    """

    name = "leverage"
    rank_statistic = "d_eff"
    rank_factor = 5.0

    def growth(self, chol, n_samples, random_state, alpha):
        rng = check_random_state(random_state)
        return Growth(chol, lambda p: _add_leverage_samples(chol, p, alpha, rng))

    def fixed_rank_landmarks(self, access, n_components, random_state, alpha):
        # The same doubling schedule as "auto", so that fixed ranks are
        # prefixes of the sequence the automatic rank draws.
        chol = partial_cholesky_of(access)
        grow = self.growth(chol, access.n_samples, random_state, alpha)
        for p in doubling_schedule(access.n_samples):
            if p >= n_components:
                break
            grow(p)
        grow(n_components)
        return np.asarray(chol.pivots[:n_components], dtype=np.intp), chol


def _add_leverage_samples(chol, p, alpha, rng):
    """Grow ``chol`` to ``p`` pivots by :class:`LeverageRule`'s rounds."""
    n = chol.residual.shape[0]
    p = min(p, n)
    while len(chol.pivots) < p:
        have = len(chol.pivots)
        k = min(p - have, max(32, have // 4))
        if chol.rank == 0:
            candidates = np.setdiff1d(np.arange(n), chol.pivots)
            block = rng.choice(candidates, size=min(k, candidates.size), replace=False)
        else:
            weights = sampling_scores(chol, alpha)
            weights[chol.pivots] = 0.0
            positive = np.flatnonzero(weights > 0)
            if positive.size == 0:
                break  # every point explained: no more rank
            k = min(k, positive.size)
            block = rng.choice(
                positive,
                size=k,
                replace=False,
                p=weights[positive] / weights[positive].sum(),
            )
        chol.add(block)


class GivenRows(SamplingRule):
    """Landmarks given as training rows, added in their order.

    ``"auto"`` takes them all; an int rank the first ones.  They are no
    uniform sample, so a fixed rank grows their factor too.
    """

    name = "given rows"
    rank_statistic = None

    def __init__(self, indices):
        self.indices = indices

    def growth(self, chol, n_samples, random_state, alpha):
        order = self.indices
        return Growth(chol, lambda p: chol.add(order[len(chol.pivots) : p]), order)

    def __repr__(self):
        return f"GivenRows(<{self.indices.size} rows>)"


class Selector(SamplingRule):
    """A user's object whose ``select(X, n_components, random_state)``
    returns row indices or points (e.g. k-means centres).

    Its picks need not be nested, so the automatic rank comes from the
    uniform estimate of ``d_max``.
    """

    name = "selector"

    def __init__(self, selector):
        self.selector = selector

    def estimate_rule(self):
        return SAMPLING_RULES["uniform"]

    def select(self, X, n_components, random_state, precomputed=False):
        """Landmarks from ``selector.select``: row indices or points."""
        selector = self.selector
        result = np.asarray(
            selector.select(X, n_components, check_random_state(random_state))
        )
        n_samples = X.shape[0]
        if result.ndim == 1 and result.dtype.kind in "iu":
            if (
                result.size == 0
                or result.min() < 0
                or result.max() >= n_samples
                or np.unique(result).size != result.size
            ):
                raise ValueError(
                    f"{type(selector).__name__}.select must return distinct row "
                    f"indices in [0, {n_samples}); got {result.size} indices."
                )
            return result.astype(np.intp)
        if (
            result.ndim == 2
            and result.shape[0] > 0
            and result.shape[1] == X.shape[1]
            and result.dtype.kind == "f"
            and not precomputed
        ):
            if not np.all(np.isfinite(result)):
                raise ValueError(
                    f"{type(selector).__name__}.select returned non-finite points."
                )
            return result
        raise ValueError(
            f"{type(selector).__name__}.select must return a 1d array of row "
            "indices, or (not with a precomputed kernel) a 2d float array of "
            f"points with {X.shape[1]} features; got shape {result.shape}, "
            f"dtype {result.dtype}."
        )

    def __repr__(self):
        return f"Selector({type(self.selector).__name__})"


class _Registry(Mapping):
    """The named sampling rules of ``sampling="..."``, read-only.

    Maps each name (``"uniform"``, ``"pivoted"``, ``"leverage"``,
    ``"rpcholesky"``) to its rule, whose attributes state what the
    automatic rank reads: ``rank_statistic`` (``"d_max"`` or ``"d_eff"``)
    and ``rank_factor`` ``c`` of ``p = ceil(c * d)`` (see
    :func:`~sklearn_dof.dof_rank`).

    Examples
    --------
    >>> from sklearn_dof import SAMPLING_RULES
    >>> rule = SAMPLING_RULES["rpcholesky"]
    >>> rule.rank_statistic, rule.rank_factor
    ('d_eff', 3.0)
    >>> sorted(SAMPLING_RULES)
    ['leverage', 'pivoted', 'rpcholesky', 'uniform']
    """

    def __init__(self, rules):
        self._rules = {rule.name: rule for rule in rules}

    def __getitem__(self, name):
        return self._rules[name]

    def __iter__(self):
        return iter(self._rules)

    def __len__(self):
        return len(self._rules)

    def __repr__(self):
        return f"SAMPLING_RULES({', '.join(map(repr, self._rules))})"


SAMPLING_RULES = _Registry(
    (UniformRule(), PivotedRule(), LeverageRule(), RPCholeskyRule())
)

#: The constraint of every ``sampling`` parameter given as a string.
SAMPLING_OPTIONS = StrOptions(set(SAMPLING_RULES))


def gives_rows(sampling):
    """Whether a ``sampling`` parameter gives the landmarks as row indices."""
    return not isinstance(sampling, str) and not hasattr(sampling, "select")


def resolve_sampling(sampling, n_samples, n_components="auto"):
    """The :class:`SamplingRule` of a ``sampling`` parameter.

    A name of :data:`SAMPLING_RULES`, an object with a ``select`` method
    (:class:`Selector`), or an array of distinct training row indices
    (:class:`GivenRows`, validated against ``n_samples`` and an int
    ``n_components``).
    """
    if isinstance(sampling, str):
        return SAMPLING_RULES[sampling]
    if not gives_rows(sampling):
        return Selector(sampling)
    indices = np.asarray(sampling)
    if indices.ndim != 1 or indices.size == 0 or indices.dtype.kind not in "iu":
        raise ValueError(
            "sampling given as landmarks must be a non-empty 1d array of "
            f"integer row indices; got an array of shape {indices.shape} "
            f"and dtype {indices.dtype}."
        )
    if indices.min() < 0 or indices.max() >= n_samples:
        raise ValueError(
            f"sampling holds row indices out of range [0, {n_samples}): "
            f"min {indices.min()}, max {indices.max()}."
        )
    if np.unique(indices).size != indices.size:
        raise ValueError("sampling holds duplicated row indices.")
    if n_components != "auto" and n_components > indices.size:
        raise ValueError(
            f"n_components={n_components} but sampling gives only "
            f"{indices.size} landmarks."
        )
    return GivenRows(indices.astype(np.intp))

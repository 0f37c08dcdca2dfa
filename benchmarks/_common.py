"""Helpers shared by the benchmark scripts.

Penalties are on scikit-learn's scale, ``alpha = n * lambda``.

* the benchmark data sets (:data:`DATA_SETS`, with their public sources),
  read from the local copies in :func:`data_dir` (:func:`load_data`,
  :func:`load_split`, :func:`load_pooled`);
* the paper's problems (:func:`make_problems`);
* exact kernel ridge at many penalties from one eigendecomposition
  (:class:`SpectralKRR`, :func:`best_penalty`);
* the in-sample error of every prefix ``G[:, :k]`` of a Nystroem factor at
  once (:func:`prefix_path`) and the smallest rank past which it stays close
  to exact (:func:`smallest_sufficient_rank`);
* text tables (:func:`format_table`).

The mechanics of a measurement (child processes, the A B A B protocol, the
run record, results files and their history) are in ``_harness.py``.
"""

import math
import os
from pathlib import Path

import numpy as np
from scipy import linalg
from sklearn.utils import Bunch

from sklearn_dof import DegreesOfFreedom
from sklearn_dof.datasets import make_periodic_spline, periodic_spline_kernel

ROOT = Path(__file__).resolve().parents[1]

#: The real data sets of the benchmarks and their public sources.  The
#: scripts read local copies, ``<name>.npz`` in :func:`data_dir` (arrays
#: ``X``, ``y`` and, where the source has a fixed split, ``is_test``); the
#: README of that folder gives the repository, commit and licence of each.
DATA_SETS = {
    "abalone": "UCI / Delve abalone",
    "ailerons": "Torgo's F-16 ailerons (OpenML 296)",
    "bank32nh": "Delve bank-32nh",
    "bank32nm": "Delve bank-32nm",
    "cpu_act": "Delve comp-activ cpuAct (OpenML 197)",
    "cpu_small": "Delve comp-activ cpuSmall (OpenML 227)",
    "kin40k": "kin40k (Schwaighofer and Tresp 2002), its 10,000 / 30,000 split",
    "pol": "pole telecom (Weiss and Indurkhya), its 10,000 / 5,000 split",
    "keggundirected": "UCI KEGG metabolic reaction network (undirected)",
    "pumadyn32nm": "Delve pumadyn-32nm",
    "pumadyn32nm_snelson": "pumadyn32nm, the Seeger / Snelson split",
    "a9a_adult": "LIBSVM a9a / a9a.t (UCI Adult)",
    "ijcnn1": "LIBSVM ijcnn1 (IJCNN 2001 challenge)",
    "pendigits": "UCI pen-based recognition of handwritten digits",
    "satimage": "UCI Statlog (Landsat satellite)",
}


def data_dir():
    """The folder of the local copies: the environment variable
    ``SKLEARN_DOF_DATA``, else ``../shared/data``; a relative path is taken
    from the repository root."""
    return ROOT / os.environ.get("SKLEARN_DOF_DATA", "../shared/data")


def load_data(name, directory=None):
    """``X``, ``y`` (float64) and ``is_test`` (None without a fixed split) of
    a data set of :data:`DATA_SETS`, from ``directory`` (default
    :func:`data_dir`)."""
    path = Path(directory or data_dir()) / f"{name}.npz"
    if not path.exists():
        source = DATA_SETS.get(name, "unknown source")
        raise FileNotFoundError(
            f"{path}: no local copy of {name} ({source}); set SKLEARN_DOF_DATA"
        )
    with np.load(path) as data:
        is_test = data["is_test"] if "is_test" in data.files else None
        return data["X"].astype(np.float64), data["y"].astype(np.float64), is_test


def load_split(name, seed=0):
    """Train and test rows of a data set: its split, else a seeded 80/20."""
    X, y, test = load_data(name)
    if test is None:
        order = np.random.RandomState(seed).permutation(X.shape[0])
        test = np.zeros(X.shape[0], dtype=bool)
        test[order[int(0.8 * X.shape[0]) :]] = True
    return X[~test], y[~test], X[test], y[test]


# The paper's lambda range, wide enough that the optimum of every periodic
# spline problem of Bach (2013) at n <= 10^4 lies inside it.
DEFAULT_LAMBDAS = np.logspace(-9, -1, 25)


def make_problems(n_samples, *, beta, deltas, design="uniform", noise=1.0, seed=0):
    """The problems of several targets on one design, sharing one kernel matrix.

    One :func:`~sklearn_dof.datasets.make_periodic_spline` problem per
    ``delta`` in ``deltas``: it draws the
    points and then the noise from ``seed`` whatever the decays, so every
    target sees the same points and the same ``K``.  The kernel matrix is the
    costly part (for ``beta = 4`` a 180-term cosine series over ``n^2``
    entries, about 25 s and 7 GB at ``n = 2000``), so it is computed once;
    the draws are taken with the closed-form exponential kernel, which costs
    nothing.
    """
    problems, K = [], None
    for delta in deltas:
        data = make_periodic_spline(
            n_samples,
            beta=None,
            rho=1.0,
            delta=delta,
            design=design,
            noise=noise,
            random_state=seed,
        )
        if K is None:
            K = periodic_spline_kernel(data.X, beta=beta)
        data.K = K
        data.kernel_params = {"beta": beta}
        data.name = problem_name(beta=beta, delta=delta, design=design)
        problems.append(data)
    return problems


def problem_name(*, beta, delta, design="uniform"):
    return f"beta={beta:g},delta={delta:g},{design}"


def in_sample_error(fitted, f):
    """``mean((z - f)^2)``, the error against the noiseless target."""
    return float(np.mean((np.asarray(fitted) - f) ** 2))


def shrinkage(eigvals, alpha):
    """``s / (s + alpha)``, the eigenvalues of ``K (K + alpha I)^-1``, with
    the rounding-level negative eigenvalues of ``K`` clipped to zero (the
    shrinkage must stay in ``[0, 1)``)."""
    eigvals = np.clip(eigvals, 0, None)
    return eigvals / (eigvals + np.asarray(alpha, dtype=np.float64))


class SpectralKRR:
    """Exact kernel ridge regression at any penalty from one ``eigh`` of K.

    With ``K = U diag(s) U^T`` the fitted values are
    ``z = U diag(s / (s + alpha)) U^T y``: after the ``O(n^3)``
    decomposition each penalty costs a matrix-vector product.

    Parameters
    ----------
    K : ndarray of shape (n, n)
        Symmetric positive semi-definite kernel matrix.
    """

    def __init__(self, K):
        eigvals, self.eigvecs = linalg.eigh(0.5 * (K + K.T))
        # Rounding makes the smallest eigenvalues slightly negative; the
        # shrinkage s / (s + alpha) must stay in [0, 1).
        self.eigvals = np.clip(eigvals, 0, None)
        self._squared = None

    @property
    def n_samples(self):
        return self.eigvals.shape[0]

    def _shrinkage(self, alphas):
        return shrinkage(self.eigvals[:, None], np.atleast_1d(alphas))

    def fitted(self, y, alphas):
        """Fitted values, shape (n,) for one penalty, (n, len(alphas)) else."""
        out = self.eigvecs @ (self._shrinkage(alphas) * (self.eigvecs.T @ y)[:, None])
        return out[:, 0] if np.ndim(alphas) == 0 else out

    def in_sample_errors(self, y, f, alphas):
        """In-sample error of exact kernel ridge for each penalty."""
        fitted = self.fitted(y, np.atleast_1d(alphas))
        return ((fitted - f[:, None]) ** 2).mean(axis=0)

    def degrees_of_freedom(self, alpha):
        """Exact leverage scores and degrees of freedom, as
        :func:`sklearn_dof.degrees_of_freedom` but reusing the decomposition."""
        if self._squared is None:
            self._squared = self.eigvecs**2
        shrink = self._shrinkage(alpha)[:, 0]
        return DegreesOfFreedom(self._squared @ shrink, (shrink**2).sum(), alpha)


def best_penalty(krr, y, f, lambdas=DEFAULT_LAMBDAS):
    """Penalty of the grid that minimises the exact in-sample error.

    This is the oracle choice of the paper's experiments (it looks at the
    noiseless target), which removes model selection from the comparison.

    Returns
    -------
    result : Bunch
        ``lambda_``, ``alpha`` (``n * lambda``), ``error`` at the optimum,
        ``index`` in the grid and ``errors`` over the whole grid.
    """
    lambdas = np.asarray(lambdas, dtype=np.float64)
    errors = krr.in_sample_errors(y, f, krr.n_samples * lambdas)
    index = int(np.argmin(errors))
    return Bunch(
        lambda_=float(lambdas[index]),
        alpha=float(krr.n_samples * lambdas[index]),
        error=float(errors[index]),
        index=index,
        errors=errors,
    )


def prefix_path(G, y, f, alpha):
    """In-sample error and d_eff lower bound of every prefix ``G[:, :k]``.

    With the thin QR factorisation ``[G; sqrt(alpha) I] = Q R``, the top
    block ``Q_1`` of ``Q`` satisfies ``Q_1 Q_1^T = G (G^T G + alpha I)^-1 G^T``,
    and since ``R`` is triangular the first ``k`` columns of ``Q`` belong to
    the prefix ``G[:, :k]``.  One QR, ``O((n + r) r^2)``, therefore gives the
    fitted values of all ``r + 1`` prefixes as cumulative sums, without ever
    forming ``G^T G`` (whose condition number squares that of ``G``).

    Parameters
    ----------
    G : ndarray of shape (n, r)
        Factor whose column prefixes are the nested approximations.
    y, f : ndarray of shape (n,)
        Responses and noiseless target.
    alpha : float
        Penalty.

    Returns
    -------
    path : Bunch
        ``errors`` and ``dof_lower``, arrays of shape (r + 1,) indexed by the
        number of columns ``k``; ``dof_lower[k] = tr L_k (L_k + alpha I)^-1``
        is the sum of the lower bounds of :func:`sklearn_dof.leverage_score_bounds`,
        a lower bound on ``d_eff``.
    """
    n, r = G.shape
    augmented = np.vstack([G.astype(np.float64), math.sqrt(alpha) * np.eye(r)])
    Q = linalg.qr(augmented, mode="economic")[0][:n]
    fitted = np.cumsum(Q * (Q.T @ y), axis=1)
    errors = np.concatenate([[np.mean(f**2)], ((fitted - f[:, None]) ** 2).mean(0)])
    dof_lower = np.concatenate([[0.0], np.cumsum((Q * Q).sum(axis=0))])
    return Bunch(errors=errors, dof_lower=dof_lower)


def smallest_sufficient_rank(ranks, ratios, tol=0.01):
    """Smallest rank after which ``ratios <= 1 + tol`` all along the grid.

    Asking for every larger rank, rather than the first crossing, guards
    against a lucky dip of a noisy (uniformly sampled) error curve.

    Parameters
    ----------
    ranks : array-like of shape (m,)
        Increasing grid of ranks.
    ratios : array-like of shape (m,)
        Error ratio (approximate over exact) at each rank.
    tol : float, default=0.01
        Allowed relative excess.

    Returns
    -------
    rank : int, float or None
        An element of ``ranks`` (any increasing grid works, such as a grid of
        constants); None when even the largest one is not sufficient.
    """
    ok = np.asarray(ratios) <= 1 + tol
    if ok.size == 0 or not ok[-1]:
        return None
    bad = np.flatnonzero(~ok)
    return np.asarray(ranks)[0 if bad.size == 0 else bad[-1] + 1].item()


def format_table(rows, columns, *, markdown=False):
    """Fixed-width (or markdown) text table of a list of dicts.

    ``columns`` is a list of ``(key, header, format)``; missing or None
    values print as ``-``.
    """

    def cell(row, key, fmt):
        value = row.get(key)
        if value is None or (isinstance(value, float) and not math.isfinite(value)):
            return "-"
        return format(value, fmt)

    body = [[cell(row, key, fmt) for key, _, fmt in columns] for row in rows]
    headers = [header for _, header, _ in columns]
    if markdown:
        lines = ["| " + " | ".join(headers) + " |"]
        lines.append("|" + "|".join("---" for _ in headers) + "|")
        lines += ["| " + " | ".join(cells) + " |" for cells in body]
        return "\n".join(lines)
    widths = [
        max(len(h), *(len(cells[j]) for cells in body)) if body else len(h)
        for j, h in enumerate(headers)
    ]
    lines = ["  ".join(h.rjust(w) for h, w in zip(headers, widths, strict=True))]
    lines += [
        "  ".join(c.rjust(w) for c, w in zip(cells, widths, strict=True))
        for cells in body
    ]
    return "\n".join(lines)


def load_pooled(name, n_train, seed=0):
    """A data set with its train and test rows pooled: shuffled once
    (``seed``), X and y standardised, the first ``n_train`` rows for
    training and the rest for testing."""
    X, y, _ = load_data(name)
    order = np.random.RandomState(seed).permutation(X.shape[0])
    X, y = X[order], y[order]
    X = (X - X.mean(0)) / X.std(0)
    y = (y - y.mean()) / y.std()
    return X[:n_train], y[:n_train], X[n_train:], y[n_train:]

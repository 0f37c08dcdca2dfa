"""Ridge's normal-equations operator through kernel blocks, and Falkon's
preconditioner, in any array namespace.

Ridge on the Nystroem features ``Phi = K(x, I) N`` solves
``(Phi_c^T S Phi_c + alpha I) W = Phi_c^T S y_c`` (``S`` the sample
weights, ``Phi_c`` centred by the weighted mean kernel row ``m``:
``Phi_c = (K - 1 m^T) N``).  Conjugate gradients
(:mod:`sklearn_dof._cg`) need only the product with that matrix, which
:func:`normal_product` makes by one pass over the kernel blocks ``K``,
never ``K N`` nor the ``n p^2`` Gram matrix, and Falkon's preconditioner
(Rudi, Carratino and Rosasco, NeurIPS 2017), which
:func:`falkon_preconditioner` forms from the landmark block alone.  Both
are written once for the NumPy path (:mod:`sklearn_dof._ridge_solve`: the
refinement of a kernel-basis solve and ``NystroemPCGRidgeProblem``) and
the array-API back-end (:mod:`sklearn_dof._array_api`); what differs
between them by design (how a pass over the blocks runs, how the ``p x p``
matrices are formed, factored and applied) comes in as small callables.
"""

import numpy as np
from sklearn.externals.array_api_compat import device as array_device


def kernel_block_products(U, shift, xp=None):
    """The statistic one kernel block adds to :func:`normal_product`.

    Parameters
    ----------
    U : array of shape (p, k)
        ``N V``, the landmark weights of the vectors ``V``.
    shift : array of shape (k,)
        ``m^T U``: the centring of the block's products.
    xp : namespace, default=None
        The arrays' namespace; None for NumPy.

    Returns
    -------
    statistic : callable
        ``(K_b, *sw_b) -> (K_b^T S_b Z_b, 1^T S_b Z_b)`` with ``Z_b = K_b U -
        1 shift^T`` (the block's rows of ``Phi_c V``), ``S_b`` the block's
        weights ``sw_b`` where given, else the identity.
    """
    xp = np if xp is None else xp

    def statistic(K_b, *sw_b):
        Z = K_b @ U - shift
        if sw_b:
            # In place: Z is this block's own temporary, and the pass is
            # bound by memory traffic, not by its flops.
            Z *= sw_b[0][:, None]
        return K_b.T @ Z, xp.sum(Z, axis=0)

    return statistic


def normal_product(V, alpha, reduce, basis, offset, weights=None, xp=None):
    """``(Phi_c^T S Phi_c + alpha I) V`` by one pass over the kernel blocks.

    ``Phi_c^T S Phi_c V = N^T (K^T S Z - m 1^T S Z)`` with ``Z = K (N V) -
    1 (m^T N V)``: two products with each block ``K`` (``O(n p k)`` beyond
    the kernel) and two with ``N`` (``O(p^2 k)``).

    Parameters
    ----------
    V : array of shape (p, k)
        Vectors in the features' basis, float64.
    alpha : float
        Penalty.
    reduce : callable
        ``reduce(statistic, *row_arrays)``: the sum over the blocks of rows
        of ``statistic(K_b, *(a[b] for a in row_arrays))``, the
        ``FeatureBlocks.reduce`` protocol.  The caller chooses how the pass
        runs (the NumPy path's is streamed through the cache by worker
        threads; an accelerator's takes whole blocks).
    basis : object
        ``basis.map(V) = N V`` and ``basis.map_t(V) = N^T V`` (on NumPy, by
        triangular solves with the Cholesky factor, never forming ``N``).
    offset : array of shape (p,)
        ``m``, the weighted mean kernel row; zeros for the uncentred
        operator (no intercept).
    weights : array of shape (n,), default=None
        ``S``'s diagonal; None for unit weights (no scaling of the blocks).
    xp : namespace, default=None
        The arrays' namespace; None for NumPy.

    Returns
    -------
    HV : array of shape (p, k)
    """
    xp = np if xp is None else xp
    U = basis.map(V)
    statistic = kernel_block_products(U, offset @ U, xp)
    row_arrays = () if weights is None else (weights,)
    KtSZ, SZ = reduce(statistic, *row_arrays)
    return basis.map_t(KtSZ - offset[:, None] * SZ[None, :]) + alpha * V


def falkon_preconditioner(
    landmark_gram, factor, total, alpha, dtype=np.float32, xp=None
):
    """``R -> P^{-1} R`` for Falkon's ``P = (t / p) B^T B + alpha I``.

    The ``p`` landmarks are a uniform sample of the rows, so the features'
    Gram matrix ``Phi^T S Phi`` is about ``t / p`` times that of the
    landmarks' own features ``B = K(I, I) N`` (``t`` the total weight);
    ``B^T B = R R^T`` for the Cholesky factor ``R^T R = K(I, I)``.  ``P``
    costs ``O(p^3)`` from the landmark block alone.  It is formed and
    factored in ``dtype`` first (a preconditioner only approximates the
    operator; see ``_ridge_solve.PCG_PRECONDITIONER_DTYPE``), then in
    float64 where rounding left the first indefinite; it takes and returns
    float64 residuals, as the iteration stays in float64.

    Parameters
    ----------
    landmark_gram : callable
        ``dtype -> B^T B``, a new symmetric ``(p, p)`` array of that dtype,
        scaled and shifted in place here.
    factor : callable
        ``P -> solve`` with ``solve(R) = P^{-1} R`` in ``P``'s dtype, or
        None where ``P`` has no (finite) Cholesky factor.
    total : float
        ``t``, the total sample weight.
    alpha : float
        Penalty.
    dtype : numpy dtype, default=np.float32
        Tried first: the namespace's dtype of that name.
    xp : namespace, default=None
        The arrays' namespace; None for NumPy.

    Returns
    -------
    precondition : callable or None
        ``R -> P^{-1} R`` for float64 ``R`` of shape (p, k); None where
        ``P`` has no Cholesky factor even in float64.
    """
    xp = np if xp is None else xp
    for name in dict.fromkeys((np.dtype(dtype).name, "float64")):
        P = landmark_gram(getattr(xp, name))
        # A Python float takes P's dtype (NumPy's and the array API's
        # promotion of scalars): the same as a scalar of that dtype.
        P *= total / P.shape[0]
        solve = factor(_add_to_diagonal(P, alpha, xp))
        if solve is not None:
            break
    else:
        return None
    factored = getattr(xp, name)  # the dtype P was factored in

    def precondition(R):
        Z = solve(_astype(R, factored, xp))
        return _astype(Z, xp.float64, xp)

    return precondition


def _add_to_diagonal(A, value, xp):
    if xp is np:
        # In place: no second p x p array beside the preconditioner.
        A[np.diag_indices(A.shape[0])] += value
        return A
    # The array API has no assignment to a diagonal.
    return A + value * xp.eye(A.shape[0], dtype=A.dtype, device=array_device(A))


def _astype(A, dtype, xp):
    # NumPy before 2.1 has no np.astype.
    if xp is np:
        return A.astype(dtype, copy=False)
    return xp.astype(A, dtype, copy=False)

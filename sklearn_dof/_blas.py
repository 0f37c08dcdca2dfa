"""BLAS and LAPACK calls through scipy's exported function pointers.

scipy exports its BLAS and LAPACK to compiled code
(:mod:`scipy.linalg.cython_blas`, :mod:`scipy.linalg.cython_lapack`, public
APIs); :mod:`ctypes` calls those pointers with the GIL released and with
any leading dimension, which scipy's Python wrappers do not offer (they
hold the GIL, and copy a block of a larger array in and out).  Each call
here falls back to a wrapper, or says it cannot be made, where a pointer
cannot be had.

``C += B^T B`` (:func:`syrk_lower_add`): the Gram matrix of a fit is a sum
over row blocks of ``B^T B``.  In place, by the BLAS's ``dsyrk`` (lower
triangle, half the flops of a general product), a worker thread needs its
``p x p`` sum and nothing else; through numpy, which has no in-place
``syrk``, it needs a second ``p x p`` array for each block's product and
one more pass over memory to add it.  At ``p = 2000`` that second array is
32 MiB per worker: under scikit-learn's default ``working_memory`` of 1 GiB
it is the difference between 13 and 23 workers.

The steps of a blocked Cholesky factorisation on the blocks of one
Fortran-ordered array (:class:`BlockSteps`): ``dpotrf``, ``dtrsm``,
``dsyrk`` and ``dgemm`` read and write the blocks where they lie, with no
copy and no temporary.
"""

import ctypes
import importlib

import numpy as np
from scipy.linalg import blas

_C_INT_P = ctypes.POINTER(ctypes.c_int)
_C_DOUBLE_P = ctypes.POINTER(ctypes.c_double)
# dsyrk(uplo, trans, n, k, alpha, a, lda, beta, c, ldc): every argument by
# pointer, as in Fortran.
_DSYRK = ctypes.CFUNCTYPE(
    None,
    ctypes.c_char_p,
    ctypes.c_char_p,
    _C_INT_P,
    _C_INT_P,
    _C_DOUBLE_P,
    ctypes.c_void_p,
    _C_INT_P,
    _C_DOUBLE_P,
    ctypes.c_void_p,
    _C_INT_P,
)
# dpotrf(uplo, n, a, lda, info).
_DPOTRF = ctypes.CFUNCTYPE(
    None, ctypes.c_char_p, _C_INT_P, ctypes.c_void_p, _C_INT_P, _C_INT_P
)
# dtrsm(side, uplo, transa, diag, m, n, alpha, a, lda, b, ldb).
_DTRSM = ctypes.CFUNCTYPE(
    None,
    *(ctypes.c_char_p,) * 4,
    _C_INT_P,
    _C_INT_P,
    _C_DOUBLE_P,
    ctypes.c_void_p,
    _C_INT_P,
    ctypes.c_void_p,
    _C_INT_P,
)
# dgemm(transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc).
_DGEMM = ctypes.CFUNCTYPE(
    None,
    ctypes.c_char_p,
    ctypes.c_char_p,
    *(_C_INT_P,) * 3,
    _C_DOUBLE_P,
    ctypes.c_void_p,
    _C_INT_P,
    ctypes.c_void_p,
    _C_INT_P,
    _C_DOUBLE_P,
    ctypes.c_void_p,
    _C_INT_P,
)
_dsyrk = None  # the ctypes function once looked up; False if it cannot be
_block_functions = None  # (dpotrf, dtrsm, dsyrk, dgemm), or False


def _scipy_function(module_name, name, prototype):
    """scipy's ``name`` from ``scipy.linalg.<module_name>`` as a ctypes
    function of ``prototype``, or False."""
    try:
        module = importlib.import_module(f"scipy.linalg.{module_name}")
        capsule = module.__pyx_capi__[name]
        get_name = ctypes.pythonapi.PyCapsule_GetName
        get_name.restype = ctypes.c_char_p
        get_name.argtypes = [ctypes.py_object]
        get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
        get_pointer.restype = ctypes.c_void_p
        get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
        address = get_pointer(capsule, get_name(capsule))
    except (ImportError, AttributeError, KeyError, ValueError):
        return False
    return prototype(address) if address else False


def _nogil_dsyrk():
    # One assignment, so that threads racing through the first call never
    # see a half-done lookup.
    global _dsyrk
    if _dsyrk is None:
        _dsyrk = _scipy_function("cython_blas", "dsyrk", _DSYRK)
    return _dsyrk


def _block_steps():
    global _block_functions
    if _block_functions is None:
        found = (
            _scipy_function("cython_lapack", "dpotrf", _DPOTRF),
            _scipy_function("cython_blas", "dtrsm", _DTRSM),
            _scipy_function("cython_blas", "dsyrk", _DSYRK),
            _scipy_function("cython_blas", "dgemm", _DGEMM),
        )
        _block_functions = found if all(found) else False
    return _block_functions


def releases_gil():
    """Whether :func:`syrk_lower_add` lets other threads run meanwhile."""
    return bool(_nogil_dsyrk())


def syrk_lower_add(C, B):
    """``C += B^T B`` on the lower triangle of ``C``, in place.

    Parameters
    ----------
    C : ndarray of shape (p, p), float64, Fortran order
        The running sum; its strict upper triangle is left as it is.
    B : ndarray of shape (b, p), float64
        A block of rows.

    Returns
    -------
    C : ndarray
        The same array.
    """
    if not (C.flags.f_contiguous and C.dtype == np.float64):
        raise ValueError("C must be a float64 array in Fortran order")
    B = np.ascontiguousarray(B, dtype=np.float64)
    b, p = B.shape
    dsyrk = _nogil_dsyrk()
    if not dsyrk or b == 0:
        if b:
            # B^T in Fortran order is B's C-order memory: no copy.
            blas.dsyrk(1.0, B.T, beta=1.0, c=C, trans=0, lower=1, overwrite_c=1)
        return C
    one = ctypes.c_double(1.0)
    n, k, ld = ctypes.c_int(p), ctypes.c_int(b), ctypes.c_int(p)
    # B^T is a (p x b) Fortran array with leading dimension p.
    dsyrk(
        b"L",
        b"N",
        ctypes.byref(n),
        ctypes.byref(k),
        ctypes.byref(one),
        B.ctypes.data,
        ctypes.byref(ld),
        ctypes.byref(one),
        C.ctypes.data,
        ctypes.byref(ld),
    )
    return C


class BlockSteps:
    """The steps of a blocked lower Cholesky factorisation of ``L``, each
    on blocks of ``L`` in place (leading dimension ``n``): no copy, no
    temporary.

    Parameters
    ----------
    L : ndarray of shape (n, n), float64, Fortran order
        Factored in place: the steps read and write its lower triangle
        only.

    Use :meth:`available` first: the steps need scipy's pointers.
    """

    def __init__(self, L):
        if not (L.flags.f_contiguous and L.dtype == np.float64 and L.ndim == 2):
            raise ValueError("L must be a 2-d float64 array in Fortran order")
        if L.shape[0] != L.shape[1]:
            raise ValueError(f"L must be square; got shape {L.shape}")
        self.L = L
        self._n = L.shape[0]
        self._ld = ctypes.c_int(self._n)
        self._functions = _block_steps()

    @staticmethod
    def available():
        """Whether scipy's pointers to the four routines could be had."""
        return bool(_block_steps())

    def _at(self, row, column):
        # The address of L[row, column] (Fortran order).
        return self.L.ctypes.data + 8 * (row + column * self._n)

    def _check(self, start, stop):
        # The BLAS writes through the addresses unchecked: a block past L
        # would write past its memory.
        if not 0 <= start < stop <= self._n:
            raise IndexError(f"{start}:{stop} is not a block of L of order {self._n}")

    def potrf(self, start, stop):
        """The Cholesky factor of ``L[start:stop, start:stop]`` in place
        (lower; LAPACK leaves the block's upper triangle as it was):
        LAPACK's ``info``, 0 or the order of the first leading minor that
        is not positive definite."""
        self._check(start, stop)
        order, info = ctypes.c_int(stop - start), ctypes.c_int(0)
        dpotrf = self._functions[0]
        ld = ctypes.byref(self._ld)
        dpotrf(
            b"L", ctypes.byref(order), self._at(start, start), ld, ctypes.byref(info)
        )
        return info.value

    def panel(self, start, stop):
        """``L[stop:, start:stop] <- L[stop:, start:stop] L_kk^{-T}``,
        ``L_kk`` the lower factor in ``L[start:stop, start:stop]``."""
        self._check(start, stop)
        self._check(stop, self._n)
        rows, order = ctypes.c_int(self._n - stop), ctypes.c_int(stop - start)
        one, ld = ctypes.c_double(1.0), ctypes.byref(self._ld)
        dtrsm = self._functions[1]
        dtrsm(
            b"R",
            b"L",
            b"T",
            b"N",
            ctypes.byref(rows),
            ctypes.byref(order),
            ctypes.byref(one),
            self._at(start, start),
            ld,
            self._at(stop, start),
            ld,
        )

    def update(self, start, stop, left, right):
        """``L[left:, left:right] -= L[left:, k] L[left:right, k]^T`` on and
        below the diagonal, ``k = start:stop``: a ``dsyrk`` of order
        ``right - left`` for the diagonal block, a ``dgemm`` below it."""
        self._check(start, stop)
        self._check(left, right)
        _, _, dsyrk, dgemm = self._functions
        width, depth = ctypes.c_int(right - left), ctypes.c_int(stop - start)
        one, minus, ld = (
            ctypes.c_double(1.0),
            ctypes.c_double(-1.0),
            ctypes.byref(self._ld),
        )
        dsyrk(
            b"L",
            b"N",
            ctypes.byref(width),
            ctypes.byref(depth),
            ctypes.byref(minus),
            self._at(left, start),
            ld,
            ctypes.byref(one),
            self._at(left, left),
            ld,
        )
        if right == self._n:
            return
        below = ctypes.c_int(self._n - right)
        dgemm(
            b"N",
            b"T",
            ctypes.byref(below),
            ctypes.byref(width),
            ctypes.byref(depth),
            ctypes.byref(minus),
            self._at(right, start),
            ld,
            self._at(left, start),
            ld,
            ctypes.byref(one),
            self._at(right, left),
            ld,
        )

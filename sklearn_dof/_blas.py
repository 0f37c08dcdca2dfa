"""A BLAS update that releases the GIL: ``C += B^T B`` in place.

The Gram matrix of a fit is a sum over row blocks of ``B^T B``.  In place,
by the BLAS's ``dsyrk`` (lower triangle, half the flops of a general
product), a worker thread needs its ``p x p`` sum and nothing else; through
numpy, which has no in-place ``syrk``, it needs a second ``p x p`` array for
each block's product and one more pass over memory to add it.  At
``p = 2000`` that second array is 32 MiB per worker: under scikit-learn's
default ``working_memory`` of 1 GiB it is the difference between 13 and 23
workers.

scipy's Python wrappers of the BLAS (:mod:`scipy.linalg.blas`) hold the GIL,
so worker threads calling them would run one at a time.  scipy also exports
its BLAS to compiled code (:mod:`scipy.linalg.cython_blas`, a public API);
:mod:`ctypes` calls a C function pointer with the GIL released.  So
:func:`syrk_lower_add` calls scipy's ``dsyrk`` through that pointer, and
falls back to the Python wrapper (holding the GIL) where the pointer cannot
be had; :func:`releases_gil` says which.
"""

import ctypes

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
_dsyrk = None  # the ctypes function once looked up; False if it cannot be


def _lookup_dsyrk():
    """scipy's ``dsyrk`` as a ctypes function, or False."""
    try:
        from scipy.linalg import cython_blas

        capsule = cython_blas.__pyx_capi__["dsyrk"]
        get_name = ctypes.pythonapi.PyCapsule_GetName
        get_name.restype = ctypes.c_char_p
        get_name.argtypes = [ctypes.py_object]
        get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
        get_pointer.restype = ctypes.c_void_p
        get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
        address = get_pointer(capsule, get_name(capsule))
    except (ImportError, AttributeError, KeyError, ValueError):
        return False
    return _DSYRK(address) if address else False


def _nogil_dsyrk():
    # One assignment, so that threads racing through the first call never
    # see a half-done lookup.
    global _dsyrk
    if _dsyrk is None:
        _dsyrk = _lookup_dsyrk()
    return _dsyrk


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

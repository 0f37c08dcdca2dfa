"""Which BLAS calls release the GIL: scipy's wrappers against numpy's products.

The worker threads of ``sklearn_dof._parallel`` run the BLAS on one thread
each, side by side; that only helps for calls that release the GIL.  This
script times ``B^T B`` for a 2000 x 2000 block, five times, by scipy's
``dsyrk`` (added in place into a sum) through its Python wrapper and through
the pointer of its Cython API called by :mod:`ctypes` (the route of the
library's workers, written again here from the public APIs), and by
numpy's ``matmul`` (into a scratch array, then added), on one thread and
on two Python threads at once (the BLAS limited to one thread), and the
same with the BLAS's own two threads.  Reported: GFLOP/s (``n^3`` per
product) of each, all threads together.

A lasting check of a decision that rests on scipy's build (the library's
workers call ``dsyrk`` by :mod:`ctypes` because the wrapper holds the GIL):
rerun it when scipy or its BLAS changes; the history keeps the versions.

Usage::

    python benchmarks/bench_gil.py [--size 2000]

Results: ``results/gil/results.json``; the headline (GFLOP/s of each call on
one thread, two Python threads and two BLAS threads, and whether two Python
threads ran the call side by side) appended to ``results/gil/history.jsonl``.
"""

import argparse
import ctypes
import json

import numpy as np
from _common import seconds_in_threads
from _harness import add_arguments, append_history, start_run, write_results
from scipy.linalg import blas
from threadpoolctl import threadpool_limits

BENCHMARK = "gil"
SIZE, REPEATS = 2000, 5


def scipy_syrk(B):
    C = np.zeros((SIZE, SIZE), order="F")
    for _ in range(REPEATS):
        C = blas.dsyrk(1.0, B.T, beta=1.0, c=C, trans=0, lower=1, overwrite_c=1)


def _dsyrk_pointer():
    """scipy's ``dsyrk`` from ``scipy.linalg.cython_blas``, as a ctypes
    function (which releases the GIL while it runs)."""
    from scipy.linalg import cython_blas

    api = ctypes.pythonapi
    api.PyCapsule_GetName.restype = ctypes.c_char_p
    api.PyCapsule_GetName.argtypes = [ctypes.py_object]
    api.PyCapsule_GetPointer.restype = ctypes.c_void_p
    api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    capsule = cython_blas.__pyx_capi__["dsyrk"]
    address = api.PyCapsule_GetPointer(capsule, api.PyCapsule_GetName(capsule))
    return ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * 10)(address)


def ctypes_syrk(B):
    dsyrk = _dsyrk_pointer()
    C = np.zeros((SIZE, SIZE), order="F")
    n, one = ctypes.c_int(SIZE), ctypes.c_double(1.0)
    # (uplo, trans, n, k, alpha, a, lda, beta, c, ldc), all by pointer.
    args = [b"L", b"N", *[ctypes.addressof(n)] * 2, ctypes.addressof(one)]
    args += [B.ctypes.data, ctypes.addressof(n), ctypes.addressof(one)]
    args += [C.ctypes.data, ctypes.addressof(n)]
    for _ in range(REPEATS):
        dsyrk(*args)


def numpy_product(B):
    scratch, C = np.empty((SIZE, SIZE)), np.zeros((SIZE, SIZE))
    for _ in range(REPEATS):
        C += np.matmul(B.T, B, out=scratch)


def gflops(function, B, threads):
    seconds = seconds_in_threads(lambda _: function(B), threads)
    return threads * REPEATS * SIZE**3 / seconds / 1e9


def headline(payload):
    """GFLOP/s of each call and setting, and whether two Python threads ran
    it side by side (their rate over one thread's above 1.5: the call
    releases the GIL)."""
    rates = payload["gflops"]
    names = dict.fromkeys(k.split(",")[0] for k in rates)
    return {
        "size": payload["size"],
        "gflops": rates,
        "releases_gil": {
            name: rates[f"{name}, 2 Python threads"] > 1.5 * rates[f"{name}, 1 thread"]
            for name in names
        },
    }


def main(argv=None):
    global SIZE
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=SIZE, help="order of B^T B")
    add_arguments(parser, BENCHMARK, threads=None, child=False)
    args = parser.parse_args(argv)
    SIZE = args.size
    run = start_run(2)
    B = np.random.default_rng(0).standard_normal((SIZE, SIZE))
    out = {}
    for function in (scipy_syrk, ctypes_syrk, numpy_product):
        name = function.__name__
        with threadpool_limits(limits=1, user_api="blas"):
            out[f"{name}, 1 thread"] = gflops(function, B, 1)
            out[f"{name}, 2 Python threads"] = gflops(function, B, 2)
        with threadpool_limits(limits=2, user_api="blas"):
            out[f"{name}, 2 BLAS threads"] = gflops(function, B, 1)
    print(json.dumps({k: round(v, 1) for k, v in out.items()}, indent=1))
    payload = {"size": SIZE, "repeats": REPEATS, "gflops": out}
    path = args.output_dir / "results.json"
    write_results(path, payload, run)
    append_history(args.output_dir, BENCHMARK, run, headline(payload), results=path)


if __name__ == "__main__":
    main()

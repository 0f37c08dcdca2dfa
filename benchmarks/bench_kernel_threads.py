"""How each step of the RBF kernel evaluation scales with threads.

The fused RBF evaluation of a block (one GEMM on augmented rows, then a
clip and an exponential in place, by cache-sized chunks; see
``bench_scaling._rbf_rows``) split into its steps, each timed over all
``n`` rows by ``t`` threads at once, each thread on its own rows and its
own reused block (no first touch), the BLAS on one thread per thread:

* ``gemm``: the product of the augmented rows (``d + 2`` columns) with the
  landmarks, by chunks of ``2**16`` entries;
* ``clip``: the product and the clip (``np.minimum``) in place (subtract
  ``gemm``);
* ``exp``: numpy's exponential of true exponents, chunk by chunk;
* ``fused``: the three steps chunk by chunk, as a pass does;
* ``exp_block``: the exponential of the whole block at once (out of cache).

Reported: seconds per step for all rows at each thread count, as JSON
lines.

    python benchmarks/bench_kernel_threads.py --n 1000000 --threads 1,4,8,16
"""

import argparse
import itertools
import json

import numpy as np
from _common import seconds_in_threads
from threadpoolctl import threadpool_limits

# Entries per chunk: the library's _kernels._RBF_CHUNK until commit 62f3b76.
CHUNK = 2**16
GAMMA = 1.0 / 18


def _augmented(X, landmarks):
    x_sq = np.einsum("ij,ij->i", X, X)[:, None]
    l_sq = np.einsum("ij,ij->i", landmarks, landmarks)[:, None]
    X_aug = np.hstack([X, np.ones_like(x_sq), x_sq])
    L_aug = np.hstack(
        [2.0 * GAMMA * landmarks, -GAMMA * l_sq, np.full_like(l_sq, -GAMMA)]
    )
    return X_aug, np.ascontiguousarray(L_aug.T)


def _step(name, X_aug, L_t, out, exponent, chunk_entries=CHUNK):
    """One step on a block; ``exponent`` holds the block's true exponents
    (the exponential reads them and writes ``out``, so that every timing
    sees the values of a real pass)."""
    rows = max(1, chunk_entries // L_t.shape[1])
    if name == "exp_block":
        np.exp(exponent, out=out)
        return
    for lo in range(0, X_aug.shape[0], rows):
        chunk = out[lo : lo + rows]
        if name == "exp":
            np.exp(exponent[lo : lo + rows], out=chunk)
            continue
        np.matmul(X_aug[lo : lo + rows], L_t, out=chunk)
        if name in ("clip", "fused"):
            np.minimum(chunk, 0.0, out=chunk)
        if name == "fused":
            np.exp(chunk, out=chunk)


def seconds(name, X_aug, L_t, threads, block_rows, chunk_entries=CHUNK):
    bounds = np.linspace(0, X_aug.shape[0], threads + 1).astype(int)
    blocks = [np.empty((block_rows, L_t.shape[1])) for _ in range(threads)]
    # The exponents of each thread's first block, reused for all its blocks.
    exponents = []
    for i in range(threads):
        rows = X_aug[bounds[i] : bounds[i] + block_rows]
        exponents.append(np.minimum(rows @ L_t, 0.0))

    def work(i):
        out, exponent = blocks[i], exponents[i]
        for lo in range(bounds[i], bounds[i + 1], block_rows):
            hi = min(lo + block_rows, bounds[i + 1])
            _step(
                name,
                X_aug[lo:hi],
                L_t,
                out[: hi - lo],
                exponent[: hi - lo],
                chunk_entries,
            )

    return seconds_in_threads(work, threads)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200_000)
    parser.add_argument("--p", type=int, default=2000)
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--block-rows", type=int, default=700)
    parser.add_argument(
        "--chunks", default=str(CHUNK), help="entries per chunk, e.g. 65536,262144"
    )
    parser.add_argument("--output")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((args.n, 8))
    X_aug, L_t = _augmented(X, X[: args.p])
    for threads, chunk in itertools.product(
        [int(t) for t in args.threads.split(",")],
        [int(c) for c in args.chunks.split(",")],
    ):
        out = dict(n=args.n, p=args.p, threads=threads, chunk_entries=chunk)
        with threadpool_limits(1, user_api="blas"):
            for name in ("gemm", "clip", "exp", "fused", "exp_block"):
                out[name + "_s"] = min(
                    seconds(name, X_aug, L_t, threads, args.block_rows, chunk)
                    for _ in range(2)
                )
        print(json.dumps(out), flush=True)
        if args.output:
            with open(args.output, "a") as f:
                f.write(json.dumps(out) + "\n")


if __name__ == "__main__":
    main()

"""The core's float32 GEMM (cpp/core/gemm.cpp, reached through blas::sgemm)
against a float64 NumPy reference.

Covers random shapes 0..300 (odd sizes, partial micro-tiles and panels), all
four trans_a/trans_b combinations, alpha/beta values (beta == 0 must not read
C: it starts as NaN there), padded leading dimensions through strided views,
the pre-packed-B entry point, the installed BLAS path, and the thread split
(the core's pool is used for large products).
"""

import ctypes
import mmap
import time

import numpy as np
import pytest

from ipuxl import _core as core

AUTO, CORE, BLAS, PACKED = 0, 1, 2, 3


def _padded(rng, rows, cols, pad):
    """A rows x cols float32 view into a wider buffer (leading dim cols + pad)."""
    buf = rng.standard_normal((rows, cols + pad)).astype(np.float32)
    return buf[:, :cols]


def _check(rng, ta, tb, M, N, K, alpha, beta, impl, pad=(0, 0, 0)):
    A = _padded(rng, K if ta else M, M if ta else K, pad[0])
    B = _padded(rng, N if tb else K, K if tb else N, pad[1])
    C = _padded(rng, M, N, pad[2])
    if beta == 0.0:
        C[...] = np.nan  # beta == 0 must overwrite, not scale
    C0 = C.copy()
    guard = C.base.copy() if C.base is not None else None
    core._test_sgemm(ta, tb, alpha, A, B, beta, C, impl)
    opa = (A.T if ta else A).astype(np.float64)
    opb = (B.T if tb else B).astype(np.float64)
    ref = alpha * (opa @ opb)
    if beta != 0.0:
        ref = ref + beta * C0.astype(np.float64)
    # float32 accumulation error grows with K; scale by the magnitudes summed.
    mag = np.abs(alpha) * (np.abs(opa) @ np.abs(opb)) + np.abs(beta) * np.abs(np.nan_to_num(C0))
    tol = 1e-5 * max(K, 1) * (mag + 1e-6) + 1e-6
    assert np.all(np.isfinite(C)), (ta, tb, M, N, K, alpha, beta, impl)
    bad = np.abs(C - ref) > tol
    assert not bad.any(), (ta, tb, M, N, K, alpha, beta, impl, np.argwhere(bad)[:3])
    if guard is not None and pad[2]:
        # the padding columns of C's buffer are untouched
        np.testing.assert_array_equal(C.base[:, N:], guard[:, N:])


@pytest.mark.slow  # large products on every path
@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
def test_random_shapes(ta, tb):
    rng = np.random.default_rng(1234 + 2 * ta + tb)
    for _ in range(40):
        M, N, K = (int(x) for x in rng.integers(0, 301, 3))
        alpha = float(rng.choice([1.0, -0.5, 2.0]))
        beta = float(rng.choice([0.0, 1.0, 0.3]))
        pad = tuple(int(p) for p in rng.choice([0, 1, 7, 16], 3))
        _check(rng, ta, tb, M, N, K, alpha, beta, AUTO, pad)


@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
def test_small_and_edge_shapes(ta, tb):
    rng = np.random.default_rng(7)
    # sizes around the micro-tile (14 rows / 6 rows) and panel (16/32 or 8/16 columns)
    # boundaries, the dot-product path (few rows, B^T) and degenerate sizes.
    sizes_m = [0, 1, 2, 5, 6, 7, 13, 14, 15, 28, 29, 43]
    sizes_n = [0, 1, 8, 9, 15, 16, 17, 31, 32, 33, 65]
    sizes_k = [0, 1, 3, 63, 64, 65, 257]
    for M in sizes_m:
        for N in sizes_n[:: 1 + (M % 3)]:
            K = sizes_k[(M + N) % len(sizes_k)]
            _check(rng, ta, tb, M, N, K, 1.0, 0.0, AUTO)
            _check(rng, ta, tb, M, N, K, -1.5, 0.5, AUTO, (3, 5, 2))


@pytest.mark.slow  # large products on every path
@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
@pytest.mark.parametrize("M,N,K", [(8, 512, 784), (80, 512, 784), (128, 512, 512),
                                   (80, 10, 512), (8, 784, 512), (784, 512, 80),
                                   (512, 10, 128), (300, 300, 300)])
def test_mlp_shapes_all_paths(ta, tb, M, N, K):
    """MLP-sized products (threaded) through every implementation."""
    rng = np.random.default_rng(M + N + K)
    impls = [AUTO, CORE, PACKED] + ([BLAS] if core.has_blas() else [])
    for impl in impls:
        _check(rng, ta, tb, M, N, K, 1.0, 0.0, impl)
        _check(rng, ta, tb, M, N, K, 0.5, 1.0, impl, (1, 0, 4))


def test_k_blocking_and_alpha_zero():
    rng = np.random.default_rng(3)
    # K spans several k-blocks; beta accumulates only once
    _check(rng, False, False, 20, 40, 1000, 1.0, 2.0, CORE)
    _check(rng, True, True, 33, 70, 777, -1.0, 0.0, PACKED)
    # alpha == 0: C = beta * C, A and B not used
    C = np.ones((5, 6), np.float32)
    A = np.full((5, 4), np.nan, np.float32)
    B = np.full((4, 6), np.nan, np.float32)
    core._test_sgemm(False, False, 0.0, A, B, 3.0, C)
    np.testing.assert_array_equal(C, 3.0)


@pytest.mark.slow  # large products on every path
def test_threads_one_and_two():
    rng = np.random.default_rng(5)
    n0 = core.num_threads()
    try:
        for t in (1, 2, 3):
            core.set_num_threads(t)
            for ta in (False, True):
                for tb in (False, True):
                    _check(rng, ta, tb, 96, 200, 300, 1.0, 0.0, CORE)
                    _check(rng, ta, tb, 9, 700, 300, 1.0, 0.5, CORE)
                    _check(rng, ta, tb, 500, 20, 64, 1.0, 0.0, CORE)
    finally:
        core.set_num_threads(n0)


@pytest.mark.skipif(not core.has_blas(), reason="OpenBLAS is loaded only where the GEMM rules can "
                    "pick it (AVX2, or IPUXL_GEMM=blas); test_isa.py runs this file at avx2")
def test_blas_route_same_bits_at_any_thread_count():
    """Products sent to OpenBLAS are split over the pool by the shape alone:
    OpenBLAS rounds an element by where it falls in a call, so a split that
    followed the thread count changed results between 1, 2 and 3 threads."""
    rng = np.random.default_rng(9)
    n0 = core.num_threads()
    shapes = [(True, False, 784, 512, 8), (True, False, 100, 600, 24), (False, False, 200, 300, 96),
              (False, True, 40, 900, 128)]
    try:
        for ta, tb, M, N, K in shapes:
            A = rng.standard_normal((K, M) if ta else (M, K)).astype(np.float32)
            B = rng.standard_normal((N, K) if tb else (K, N)).astype(np.float32)
            got = []
            for t in (1, 2, 3):
                core.set_num_threads(t)
                C = np.zeros((M, N), np.float32)
                core._test_sgemm(ta, tb, 1.0, A, B, 0.0, C, BLAS)
                got.append(C)
            for other in got[1:]:
                np.testing.assert_array_equal(got[0], other, err_msg=str((ta, tb, M, N, K)))
            ref = (A.T if ta else A).astype(np.float64) @ (B.T if tb else B).astype(np.float64)
            np.testing.assert_allclose(got[0], ref, rtol=1e-4, atol=1e-4 * np.sqrt(K))
    finally:
        core.set_num_threads(n0)


def test_bad_arguments():
    A = np.zeros((3, 4), np.float32)
    B = np.zeros((5, 6), np.float32)
    C = np.zeros((3, 6), np.float32)
    with pytest.raises(ValueError, match="do not match"):
        core._test_sgemm(False, False, 1.0, A, B, 0.0, C)
    with pytest.raises(ValueError, match="float32"):
        core._test_sgemm(False, False, 1.0, A.astype(np.float64), B[:4], 0.0, C)
    with pytest.raises(ValueError, match="unit column stride"):
        core._test_sgemm(False, False, 1.0, A, np.zeros((4, 12), np.float32)[:, ::2], 0.0, C)


def test_contention_backoff_runs_jobs_inline_with_the_same_results():
    """A job whose worker is held up in the middle of its chunk (preempted by
    another process; here the chunk sleeps 30 ms) makes the pool run the
    next jobs on the calling thread alone for a while (kStragglerWait in
    cpp/core/parallel.cpp), doubling the while for each such job within a
    second of the last; products computed meanwhile are bit for bit those
    of a one-thread pool (the same chunks and pieces, run in order)."""
    rng = np.random.default_rng(13)
    n0 = core.num_threads()
    shapes = [(False, False, 256, 256, 256), (True, False, 784, 512, 8),
              (False, True, 128, 512, 10), (True, True, 96, 200, 300)]
    operands = []
    for ta, tb, M, N, K in shapes:
        A = rng.standard_normal((K, M) if ta else (M, K)).astype(np.float32)
        B = rng.standard_normal((N, K) if tb else (K, N)).astype(np.float32)
        operands.append((ta, tb, A, B, M, N))

    def products():
        out = []
        for ta, tb, A, B, M, N in operands:
            C = np.full((M, N), np.nan, np.float32)
            core._test_sgemm(ta, tb, 1.0, A, B, 0.0, C, CORE)
            out.append(C)
        return out

    try:
        core.set_num_threads(1)
        alone = products()
        with pytest.raises(ValueError, match="2 or more threads"):
            core._test_pool_straggler(1.0)
        core.set_num_threads(2)
        time.sleep(0.05)  # a worker started after a job is published joins the next one
        # five stragglers within a second: a backoff of 5 * 2^4 = 80 ms
        for _ in range(5):
            on_worker, backoff, threads, threads_balanced, _, _ = core._test_pool_straggler(30.0)
            if not on_worker:
                pytest.skip("no worker took the chunk within 2 s (the CPUs are busy)")
            assert backoff, "a 30 ms straggler did not start a backoff"
            assert threads == 1, "a job of fixed chunks ran on two threads during the backoff"
            assert threads_balanced == 1, "a balanced job ran on two threads during the backoff"
        backed_off = products()
        if not core.contention_backoff():
            pytest.skip("the products took longer than the 80 ms backoff (the CPUs are busy)")
        for (ta, tb, A, B, M, N), got, ref in zip(operands, backed_off, alone):
            np.testing.assert_array_equal(got, ref, err_msg=str((ta, tb, M, N)))
            exact = (A.T if ta else A).astype(np.float64) @ (B.T if tb else B).astype(np.float64)
            np.testing.assert_allclose(got, exact, rtol=1e-4, atol=1e-3)
    finally:
        core.set_num_threads(n0)


def test_no_backoff_for_a_slower_worker_still_worth_waiting_for():
    """A worker that takes longer than the caller, but less than twice as
    long (a vCPU the host runs at part speed), is still worth waiting for:
    on the caller alone a two-chunk job would take longer, so the pool does
    not back off (cpp/core/parallel.cpp, kStragglerWait). Here the caller's
    chunk spins 40 ms and the worker's sleeps 70 ms: the caller waits about
    30 ms, more than half its own work (the bound before the fifteenth
    session, which backed off), less than all of it."""
    n0 = core.num_threads()
    try:
        core.set_num_threads(2)
        time.sleep(0.05)
        for _ in range(3):
            on_worker, backoff, _, _, caller_ms, worker_ms = core._test_pool_straggler(70.0, 40.0)
            if not on_worker or worker_ms >= 1.85 * caller_ms:
                continue  # no worker, or its sleep overran: the host is busy
            assert not backoff, (f"backed off although the worker's chunk took {worker_ms:.1f} ms "
                                 f"against the caller's {caller_ms:.1f}")
            return
        pytest.skip("no run with the worker under 1.85x the caller's time (the CPUs are busy)")
    finally:
        core.set_num_threads(n0)


def test_chunked_split_is_exact_and_runs_each_chunk_once():
    """Products split over the pool in chunks claimed by whichever thread is
    free, or in balanced pieces that move with the threads' speeds (the
    small-K path and column splits at K <= 32; cpp/core/parallel.cpp): the
    result is the same bit for bit at 1 to 5 threads (fixed chunk boundaries
    never depend on the scheduling, and where pieces do, every element is
    the same chain in any piece), and repeated accumulation (beta = 1)
    counts every chunk and piece exactly once, even with more threads than
    cores, where threads are descheduled and others take over their ranges
    (a piece run twice would add twice, one skipped would leave a gap)."""
    rng = np.random.default_rng(11)
    n0 = core.num_threads()
    shapes = [(False, False, 256, 256, 256), (False, True, 256, 1024, 256),
              (True, False, 1024, 256, 256), (True, False, 256, 256, 256),
              (False, False, 40, 700, 96), (True, False, 784, 512, 8),
              (True, False, 301, 200, 64), (False, True, 128, 512, 10),
              (False, False, 64, 1024, 16)]
    try:
        for ta, tb, M, N, K in shapes:
            A = rng.standard_normal((K, M) if ta else (M, K)).astype(np.float32)
            B = rng.standard_normal((N, K) if tb else (K, N)).astype(np.float32)
            outs = []
            for t in (1, 2, 3, 5):
                core.set_num_threads(t)
                C = np.full((M, N), np.nan, np.float32)
                core._test_sgemm(ta, tb, 1.0, A, B, 0.0, C, CORE)
                outs.append(C)
            for C in outs[1:]:
                np.testing.assert_array_equal(C, outs[0])
            core.set_num_threads(3)
            reps = 40
            acc = np.zeros((M, N), np.float32)
            core._test_sgemm(ta, tb, 1.0, A, B, 1.0, acc, CORE, reps)
            one = outs[0].astype(np.float64)
            err = np.abs(acc - reps * one).max() / max(1.0, np.abs(reps * one).max())
            assert err < 1e-5, (ta, tb, M, N, K, err)
    finally:
        core.set_num_threads(n0)


def _same_bits_as_packed(ta, alpha, A, B, beta, C0, msg=""):
    """C = alpha * op(A) @ B + beta * C0 by the core with B packed on the fly
    (or streamed) and with B pre-packed: the two must agree bit for bit.
    Returns the first."""
    outs = []
    for impl in (CORE, PACKED):
        C = C0.copy()
        core._test_sgemm(ta, False, alpha, A, B, beta, C, impl)
        outs.append(C)
    np.testing.assert_array_equal(outs[0], outs[1], err_msg=msg)
    return outs[0]


@pytest.mark.slow  # large products on every path
def test_small_batch_paths_are_exact():
    """The paths for batch-sized products give the same bits as the general
    one (cpp/core/gemm_isa.inc, run_block): op(B) streamed in place for a few
    row tiles (M up to 16, 84 at AVX-512) against B pre-packed, A^T read in
    place for a single panel (N = 10), A^T packed once and shared by the
    column chunks at 2 threads, and the row-tiles-outer walk
    over all panels for a small K (X^T @ G at a small batch) against the same
    product computed one panel-width column slice at a time. Each element is
    the same chain of multiply-adds over k either way; both also match
    float64."""
    rng = np.random.default_rng(17)
    n0 = core.num_threads()
    try:
        for t in (1, 2):
            core.set_num_threads(t)
            # streamed B (M <= 16, B not transposed) against pre-packed B
            for ta in (False, True):
                for M in (1, 5, 7, 8, 12, 15, 16, 40, 84):
                    for N, K in ((512, 784), (100, 37), (64, 512)):
                        A = rng.standard_normal((K, M) if ta else (M, K)).astype(np.float32)
                        B = rng.standard_normal((K, N)).astype(np.float32)
                        C0 = rng.standard_normal((M, N)).astype(np.float32)
                        _same_bits_as_packed(ta, 0.7, A, B, 0.5, C0)
                        _check(rng, ta, False, M, N, K, 0.7, 0.5, CORE)
            # small K: whole product against 16-column slices
            for ta in (False, True):
                for M, N, K in ((784, 512, 8), (512, 512, 1), (100, 200, 16), (37, 130, 3),
                                (512, 10, 128), (300, 700, 96)):
                    A = rng.standard_normal((K, M) if ta else (M, K)).astype(np.float32)
                    B = rng.standard_normal((K, N)).astype(np.float32)
                    C0 = rng.standard_normal((M, N)).astype(np.float32)
                    whole = C0.copy()
                    core._test_sgemm(ta, False, -0.05, A, B, 1.0, whole, CORE)
                    sliced = C0.copy()
                    for j in range(0, N, 16):
                        core._test_sgemm(ta, False, -0.05, A, B[:, j:j + 16], 1.0,
                                         sliced[:, j:j + 16], CORE)
                    np.testing.assert_array_equal(whole, sliced)
                    _check(rng, ta, False, M, N, K, -0.05, 1.0, CORE)
                    _check(rng, ta, False, M, N, K, 1.0, 0.0, PACKED)
    finally:
        core.set_num_threads(n0)


def _guarded(rows, cols, ld):
    """A rows x cols float32 view (leading dimension ld) whose last element is
    the last float before a page that cannot be read: a kernel that reads
    past the end of the operand faults instead of reading garbage. Returns
    the view and the mapping (kept alive by the caller)."""
    page = mmap.PAGESIZE
    count = (rows - 1) * ld + cols
    npages = (4 * count + page - 1) // page + 1
    m = mmap.mmap(-1, npages * page)
    base = ctypes.addressof(ctypes.c_char.from_buffer(m))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mprotect.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    assert libc.mprotect(base + (npages - 1) * page, page, 0) == 0  # PROT_NONE
    flat = np.frombuffer(m, np.float32, count=count, offset=(npages - 1) * page - 4 * count)
    view = np.lib.stride_tricks.as_strided(flat, (rows, cols), (4 * ld, 4))
    return view, m


@pytest.mark.slow  # large products on every path
def test_narrow_b_streamed_in_place_reads_nothing_past_its_end():
    """A batch-sized product (M up to 16, 84 at AVX-512) streams op(B) in
    place; a panel narrower than the kernel's (N = 10: MNIST's last layer,
    or the last panel of a wider N) is read with masked loads at AVX2 and
    AVX-512 (cpp/core/gemm_isa.inc, ukernel's MASKB) and packed at the
    baseline. B ends right before an unreadable page, so a load past the
    end of its last row faults. Each element is the same chain as with B
    pre-packed (same bits); both match float64."""
    rng = np.random.default_rng(41)
    n0 = core.num_threads()
    try:
        for t in (1, 2):
            core.set_num_threads(t)
            for M in (1, 4, 8, 13, 16, 40, 84):
                for N in (1, 3, 8, 10, 17, 33, 100):
                    for K, pad in ((1, 0), (7, 3), (512, 0), (129, 5)):
                        B, keep = _guarded(K, N, N + pad)
                        B[...] = rng.standard_normal((K, N)).astype(np.float32)
                        A = rng.standard_normal((M, K)).astype(np.float32)
                        C0 = rng.standard_normal((M, N)).astype(np.float32)
                        C = _same_bits_as_packed(False, 0.7, A, B, 0.5, C0, str((t, M, N, K, pad)))
                        ref = 0.7 * (A.astype(np.float64) @ B.astype(np.float64)) + 0.5 * C0
                        np.testing.assert_allclose(C, ref, rtol=1e-4, atol=1e-4 * K)
                        del B
                        keep = None  # noqa: F841
    finally:
        core.set_num_threads(n0)


@pytest.mark.slow  # large products on every path
def test_small_k_path_same_bits_as_packed_path():
    """X^T @ G with K <= 128 (the weight gradients at a batch-sized K) runs
    a path of its own (cpp/core/gemm_isa.inc, run_smallk: short, wide tiles,
    A^T read in place or, for products of 8 tiles' width or more with all of
    B packed, copied per row group, B copied band by band or whole, rows
    split over the threads).
    Each element must be the same chain of multiply-adds as on the general
    path (run_block, reached here through a pre-packed B), so the two agree
    bit for bit at 1, 2 and 3 threads: partial row groups (M not a multiple
    of 6, or of 12 for the taller tiles from K = 16 at AVX-512: every
    remainder runs as one tile of its own height), partial vectors and tiles
    (N = 17, 33, 130), K across the range
    and just past it (129: the general path on both sides), alpha and beta
    (beta == 0: C starts as NaN and must not be read), padded leading
    dimensions; both also match float64."""
    rng = np.random.default_rng(29)
    n0 = core.num_threads()
    cases = [(784, 512, 8), (512, 512, 16), (7, 33, 3), (13, 130, 1), (100, 17, 31),
             (301, 200, 64), (64, 48, 128), (50, 40, 129), (1, 512, 8), (23, 40, 20),
             (35, 64, 16), (17, 96, 15), (301, 300, 100)]
    try:
        for t in (1, 2, 3):
            core.set_num_threads(t)
            for M, N, K in cases:
                for alpha, beta, pad in ((1.0, 0.0, (0, 0, 0)), (-0.05, 1.0, (3, 16, 0)),
                                         (0.7, 0.5, (0, 1, 7))):
                    A = _padded(rng, K, M, pad[0])
                    B = _padded(rng, K, N, pad[1])
                    C0 = _padded(rng, M, N, pad[2])
                    if beta == 0.0:
                        C0[...] = np.nan
                    _same_bits_as_packed(True, alpha, A, B, beta, C0, str((t, M, N, K)))
                    _check(rng, True, False, M, N, K, alpha, beta, CORE, pad)
    finally:
        core.set_num_threads(n0)


@pytest.mark.slow  # large products on every path
def test_blocked_walk_same_bits_as_panel_walk():
    """Products whose op(A) rows cover 1 MiB or more (cpp/core/gemm_isa.inc,
    kBlockedMinA) walk row tiles outer over blocks of packed panels, one
    k-block at a time, instead of one panel at a time. Each element must be
    the same chain of multiply-adds (the same k-blocks) as on the panel walk,
    reached here by computing the product 8 columns at a time (one panel):
    bit for bit at 1, 2 and 3 threads, for all four transposes, with K
    across several k-blocks of unequal depth, N across several blocks of
    panels with a partial last panel, beta == 0 over NaN and beta != 0, B
    packed on the fly and pre-packed; both also match float64."""
    rng = np.random.default_rng(31)
    n0 = core.num_threads()
    cases = [(150, 700, 2100), (600, 300, 1100), (520, 70, 520)]
    try:
        for M, N, K in cases:
            for ta in (False, True):
                for tb in (False, True):
                    A = rng.standard_normal((K, M) if ta else (M, K)).astype(np.float32)
                    B = rng.standard_normal((N, K) if tb else (K, N)).astype(np.float32)
                    for alpha, beta in ((1.0, 0.0), (0.7, -0.5)):
                        C0 = rng.standard_normal((M, N)).astype(np.float32)
                        if beta == 0.0:
                            C0[...] = np.nan
                        sliced = C0.copy()
                        core.set_num_threads(1)
                        for j in range(0, N, 8):
                            Bj = B[j:j + 8] if tb else B[:, j:j + 8]
                            core._test_sgemm(ta, tb, alpha, A, Bj, beta, sliced[:, j:j + 8],
                                             CORE)
                        for t in (1, 2, 3):
                            core.set_num_threads(t)
                            for impl in (CORE, PACKED):
                                C = C0.copy()
                                core._test_sgemm(ta, tb, alpha, A, B, beta, C, impl)
                                np.testing.assert_array_equal(
                                    C, sliced, err_msg=str((M, N, K, ta, tb, t, impl)))
            _check(rng, False, False, M, N, K, 0.7, -0.5, CORE)
            _check(rng, True, True, M, N, K, 1.0, 0.0, CORE)
    finally:
        core.set_num_threads(n0)


@pytest.mark.slow  # large products on every path
def test_write_bound_row_split_same_bits_at_any_thread_count():
    """Products with K <= 32 large enough for the pool (cpp/core/gemm_isa.inc,
    drive: the write-bound row split at the 4- and 8-wide levels, the column
    split at AVX-512) are split over the threads by blocks of whole rows,
    each thread packing all of op(B) once per product. Each element must be
    the same chain of multiply-adds as on one thread: bit for bit at 1, 2
    and 3 threads, on B packed on the fly and pre-packed, for all four
    transposes (A^T @ B takes the small-K path, also checked here), with
    partial row tiles and panels (61 x 1030, 57 x 700),
    blocks that the bound on M keeps on the column split at 3 threads
    (57 rows), beta == 0 over NaN and beta != 0 with padded leading
    dimensions; both also match float64. Each product gets a new B, so a
    thread reusing the op(B) it packed for the previous product fails."""
    rng = np.random.default_rng(41)
    n0 = core.num_threads()
    cases = [(80, 512, 10), (96, 512, 10), (61, 1030, 9), (200, 300, 17), (64, 1024, 32),
             (57, 700, 31)]
    try:
        for M, N, K in cases:
            for ta in (False, True):
                for tb in (False, True):
                    for alpha, beta, pad in ((1.0, 0.0, (0, 0, 0)), (0.7, -0.5, (3, 5, 7))):
                        A = _padded(rng, K if ta else M, M if ta else K, pad[0])
                        C0 = _padded(rng, M, N, pad[2])
                        if beta == 0.0:
                            C0[...] = np.nan
                        B = _padded(rng, N if tb else K, K if tb else N, pad[1])
                        outs = []
                        for t in (1, 2, 3):
                            core.set_num_threads(t)
                            for impl in (CORE, PACKED):
                                # A product with another B of the same shape first.
                                other = _padded(rng, N if tb else K, K if tb else N, pad[1])
                                C = _padded(rng, M, N, pad[2])
                                C[...] = C0
                                core._test_sgemm(ta, tb, alpha, A, other, beta, C, impl)
                                C[...] = C0
                                core._test_sgemm(ta, tb, alpha, A, B, beta, C, impl)
                                outs.append(C)
                        for i, C in enumerate(outs[1:], 1):
                            np.testing.assert_array_equal(
                                C, outs[0], err_msg=str((M, N, K, ta, tb, alpha, i)))
                        opa = (A.T if ta else A).astype(np.float64)
                        opb = (B.T if tb else B).astype(np.float64)
                        ref = alpha * (opa @ opb)
                        if beta != 0.0:
                            ref += beta * C0.astype(np.float64)
                        np.testing.assert_allclose(outs[0], ref, rtol=1e-4,
                                                   atol=1e-4 * np.sqrt(K))
    finally:
        core.set_num_threads(n0)


@pytest.mark.slow  # large products on every path
def test_rows_of_a_4kib_apart_same_bits_as_padded():
    """A read in place (not transposed) whose rows are a multiple of 4 KiB
    apart runs micro-tiles of at most as many rows as the L1 data cache has
    ways (cpp/core/gemm_isa.inc, run_block: those rows share one L1 set).
    Each element is the same chain of multiply-adds whatever its tile's
    height, so the product is bit for bit the one with the same A at a
    padded stride (16 floats more, full-height tiles), at 1 and 2 threads,
    on the panel walk and the blocked walk; both also match float64."""
    rng = np.random.default_rng(37)
    n0 = core.num_threads()
    cases = [(300, 130, 1024), (97, 70, 2048), (1024, 64, 1024)]
    try:
        for M, N, K in cases:
            A = rng.standard_normal((M, K)).astype(np.float32)
            Apad = _padded(rng, M, K, 16)
            Apad[...] = A
            B = rng.standard_normal((K, N)).astype(np.float32)
            for t in (1, 2):
                core.set_num_threads(t)
                outs = []
                for a in (A, Apad):
                    C = np.full((M, N), np.nan, np.float32)
                    core._test_sgemm(False, False, 1.0, a, B, 0.0, C, CORE)
                    outs.append(C)
                np.testing.assert_array_equal(outs[0], outs[1], err_msg=str((M, N, K, t)))
            _check(rng, False, False, M, N, K, 1.0, 0.5, CORE)
    finally:
        core.set_num_threads(n0)


def test_plan_rules_at_the_level_in_use():
    """The per-shape choice (cpp/core/blas.cpp, rule): a fixed rule of the
    level and the shape. At AVX2 the large products A^T @ B run on
    OpenBLAS's Haswell kernels, except the weight gradients X^T @ G with a
    batch-sized K (up to 128), which stay on the core's small-K path; every
    product with A not transposed stays on the core; X^T @ G with at most 8
    columns and K < 64 goes to OpenBLAS. AVX-512 and the baseline keep the
    core. Both choices match float64 (test_mlp_shapes_all_paths)."""
    import os
    if not core.has_blas():
        pytest.skip("no BLAS loaded at this level")
    if os.environ.get("IPUXL_GEMM", "auto") not in ("", "auto"):
        pytest.skip("IPUXL_GEMM forces the choice")
    plan = core.sgemm_plan
    level = core.isa()
    if level == "avx2":
        assert plan(True, False, 784, 512, 8) == "core"
        assert plan(True, False, 512, 10, 16) == "core"
        assert plan(True, False, 512, 512, 128) == "core"
        assert plan(True, False, 512, 512, 129) == "blas"
        assert plan(True, False, 512, 8, 16) == "blas"
        assert plan(False, False, 8, 512, 784) == "core"
        assert plan(False, True, 8, 784, 512) == "core"
        assert plan(False, False, 128, 512, 512) == "core"
        assert plan(False, True, 128, 784, 512) == "core"
        assert plan(True, False, 784, 512, 256) == "blas"
        assert plan(True, False, 784, 512, 8, packed=True) == "core"
    else:
        assert plan(True, False, 784, 512, 8) == "core"
        assert plan(False, False, 128, 512, 512) == "core"

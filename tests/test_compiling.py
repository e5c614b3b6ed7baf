"""gpu_dedup/compiling.py: the kernels a command's stages list are the ones its run compiles, so that a warm run
announces no compilation."""
from gpu_dedup import compiling, warmup


def test_a_warm_substring_run_has_no_kernel_left_to_compile():
    """Issue 28 item 8: after ``warmup substring`` every kernel its stage lists has cached machine code (the CPU
    Kasai is pydivsufsort's: listing the GPU Kasai's CPU twin made every substring run say "compiling 1 kernel")."""
    warmup.warmup(("substring",))
    assert compiling.uncached(compiling.COMMANDS["substring"]) == 0


def test_compile_clock_counts_top_level_compiles_once():
    """compile_clock: a fresh function's first call adds its compile time (the callee compiled inside it is not
    counted a second time: the total is at most the call's wall time); a second call adds nothing."""
    import time

    from numba import njit

    @njit(cache=False)
    def inner(x):
        return x + 1

    @njit(cache=False)
    def outer(x):
        return inner(x) * 2

    c0 = compiling.compile_clock()
    t = time.perf_counter()
    assert outer(1) == 4
    wall = time.perf_counter() - t
    spent = compiling.compile_clock() - c0
    assert 0.01 < spent <= wall
    c1 = compiling.compile_clock()
    assert outer(2) == 6 and compiling.compile_clock() == c1

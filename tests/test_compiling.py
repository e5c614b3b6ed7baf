"""gpu_dedup/compiling.py: the kernels a command's stages list are the ones its run compiles, so that a warm run
announces no compilation."""
from gpu_dedup import compiling, warmup


def test_a_warm_substring_run_has_no_kernel_left_to_compile():
    """Issue 28 item 8: after ``warmup substring`` every kernel its stage lists has cached machine code (the CPU
    Kasai is pydivsufsort's: listing the GPU Kasai's CPU twin made every substring run say "compiling 1 kernel")."""
    warmup.warmup(("substring",))
    assert compiling.uncached(compiling.COMMANDS["substring"]) == 0

"""Device code only: shared device functions (hashing.py) compiled for the CPU (cpu.py, numba.njit) and
for the GPU (cuda.py, numba.cuda.jit). Array in / array out; no I/O, no orchestration."""

"""Device code only. Per kernel family X: X.py (device functions), X_cpu.py (its kernels under numba.njit) and
X_cuda.py (under numba.cuda.jit). core.py (hashing, shingling, MinHash, Jaccard, the representative policy) and
normalize.py are compiled into every family. Array in / array out; no I/O, no orchestration: gpu_dedup/ops/ holds
one Python front end per family."""

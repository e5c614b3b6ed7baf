"""Kernels with the defects the compile check must catch (tests/kernels/test_kernel_compile.py runs
gpu_dedup.testing.kernel_check on this file): review P0-1's shape expression in cuda.local.array, a
true division that takes an integer kernel through float64, a kernel declaring no argument
types, and one clean kernel (which must pass)."""
import numpy as np
from numba import cuda

from gpu_dedup.kernels._launch import I8, i8, kernel, u8

N = 8


@kernel(sigs=[(u8, u8)])
def clean(a, out):
    i = cuda.grid(1)
    if i < a.shape[0]:
        out[i] = a[i] ^ np.uint64(1)


@kernel(sigs=[(i8,)])
def shape_expression(out):
    scratch = cuda.local.array(2 * N, np.int64)  # not a literal: NVVM cannot type it (the simulator can)
    scratch[0] = 1
    out[0] = scratch[0]


@kernel(sigs=[(u8, I8, u8)])
def float_promotion(a, k, out):
    i = cuda.grid(1)
    if i < a.shape[0]:
        out[i] = a[i] + k / 2  # a true division: float64, then back to uint64 (wrong above 2^53)


@kernel
def undeclared(out):
    out[0] = 1

"""Every number the package's behaviour or its recorded contract depends on, in one place.

This module imports nothing from the package (the kernels, the config and the stages all read it), so it
can never take part in an import cycle. Plain Python ints here; the kernels cast them to NumPy's fixed-width
types once (``kernels/core.py``), where Numba needs them typed.
"""

# ----------------------------------------------------------------------------------------------- hashing
# XXH64 seeds of the two 64-bit halves of the 128-bit exact hash (and of the paragraph Bloom filter's two
# hashes, which reuse them so that one description covers both).
EXACT_SEED_LO = 0x9E3779B97F4A7C15
EXACT_SEED_HI = 0xC2B2AE3D27D4EB4F
# MinHash permutations are (a * x + b) mod p with p the Mersenne prime 2^61 - 1 (MinHashConfig family "exact").
MERSENNE61 = (1 << 61) - 1
# Random bucket rounds of the "fss" family (fast similarity sketching, kernels/core.py fss_sketch) before each
# still-empty bucket takes its own MinHash over the shingles: chosen by measurement (benchmarks/sketch_families.py,
# docs/performance.md: 1 round is 1.6x slower at ~100 shingles per document and 1.15x at 400, 4 rounds within
# noise of 3). Recorded in the contract.
FSS_ROUNDS = 3

# ----------------------------------------------------------------------------------------------- Unicode
N_CODEPOINTS = 0x110000
SPACE = 0x20             # the one separator normalized text keeps
REPLACEMENT = 0xFFFD     # what an invalid UTF-8 sequence decodes to
# NFKC + lowercase of one character is re-applied per character until stable, at most this many times
# (tools/make_unicode_tables.py builds the shipped tables so; with Unicode 14.0.0 no codepoint needs it).
IMAGE_MAX_ITERATIONS = 8
# The shipped tables file (data/unicode_<version>.npz): its format, and the flag its category byte sets when
# chr(c).isspace() (written by tools/make_unicode_tables.py, read by text/unicode_tables.py).
TABLES_FORMAT_VERSION = 1
TABLES_SPACE_FLAG = 0x80

# ------------------------------------------------------------------------------------------- file formats
# The "format" of the manifests the tool writes: discovery recognises (and never ingests) these directories.
WORKDIR_FORMAT = "gpu_dedup-workdir"
INDEX_FORMAT = "gpu_dedup-index"

# ------------------------------------------------------------------------------------------- text units
# kernels/bloom.py split_units' modes (gpu_dedup/text/split.py names them) and C4's span length (seed 002 §21.3.1)
SPLIT_PARAGRAPH = 0
SPLIT_LINE = 1
SPLIT_SENTENCE = 2
SPAN_SENTENCES = 3

# ------------------------------------------------------------------------------------------------ limits
MAX_NGRAM = 64           # ShingleConfig's bound on n: the GPU's shingle ring buffer is a fixed-size array
BYTE_TILE = 4096         # text bytes per block of the GPU kernels unit_chunks (its shared tile) and
                         # utf8_invalid_chunks: fixed at compile time; callers cut smaller chunks, never larger
# MinHashConfig's bound on K (room for 0.99-threshold settings such as 20 x 450 and 450 x 20): the GPU MinHash kernel
# keeps K / 128 minima per thread (kernels/core_cuda.py MAX_K_PER_THREAD = 72)
MAX_NUM_PERM = 9000
# One LSH bucket this large is usually templated text: the pipeline warns and the report flags it.
GIANT_BUCKET = 10_000
# Candidate components up to this size are resolved by the GPU's representative policy, larger ones on the host:
# the policy walks a component serially, and one CPU core does that merge-walk far faster than one GPU thread,
# so a giant templated component must not hold the whole launch.
HOST_COMPONENT = 4096

# Exact-substring dedup (gpu_dedup/substring)
SUBSTRING_MIN_TOKENS = 50   # Lee et al. (2022): every repeated span of at least 50 tokens is cut
KASAI_RANGE = 4096          # text positions per Kasai scan (one GPU thread / CPU iteration; kernels/substring.py)
SUBSTRING_BYTES_PER_POSITION = 100  # host bytes per suffix-array position, match stage (~93 measured, CPU; README)
SUBSTRING_READ_BYTES_PER_BYTE = 32  # host bytes per text byte of a batch while tokenizing it (~27 measured)
SEAM_CONTEXT = 60           # characters each side of a cut shown in the report's seam sample

# ------------------------------------------------------------------------------------------------ first runs
# CPU seconds to compile a CPU kernel that compiling.COMPILE_S (each kernel's measured compile time, which a first
# run's "compiling N kernels (~S s)" line sums) does not list: 157.7 s for 41 kernels of eight first runs on the
# 2-core dev box at load 0.9-8, 2026-12-02 (benchmarks/first_runs.py; docs/performance.md, "First runs").
COMPILE_S_PER_KERNEL = 4.0

# ------------------------------------------------------------------------------------------------ semantic
# Two cosines within this of the best are a tie, and a tie goes to the earliest row, so that the matched row
# does not depend on the block size, the thread count or the device. A float32 BLAS dot product of unit rows
# was measured within 6e-7 of float64 (d = 8 .. 4096, blocks 1 .. 1000, numpy/OpenBLAS); 2e-6 is 3x that.
SEMANTIC_TIE_TOL = 2e-6

# ------------------------------------------------------------------------------------------------ fastText
# fastText's default label prefix: the model file does not store it, so loading a model, reading labelled
# training data and naming a model's labels all use this one.
LABEL_PREFIX = "__label__"

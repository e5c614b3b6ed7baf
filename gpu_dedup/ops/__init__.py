"""The device boundary: one Python front end per kernel family (``ops/<family>.py`` over ``kernels/<family>_cpu.py``
and ``kernels/<family>_cuda.py``).

A front end's function has one signature on both targets (``device`` first, then arrays of that device's array
module) and returns its outputs; inside it picks the kernel twin, cuts long documents into chunks of bounded work
on a GPU, allocates outputs and scratch arrays and owns the chunk constants. Stage code calls these functions and
never a kernel by name, so the shape of a kernel (its scratch arrays, its chunking) stays out of the stages
(tests/ops/test_ops.py checks it, and that every CPU/GPU twin pair takes the same arguments).

The families: core (normalization, hashing, MinHash, LSH keys, verification, the policy), bloom (Bloom filter,
exact set, paragraph splitting and hashing, screening), features (DSIR, rules), domain (the filter's domain rules),
substring (Kasai's LCP), fasttext (hidden vectors, top-k labels, one label's probability, the model's lookup
tables) and lm (line words and keys, n-gram keys, the model's tables, document scoring).
"""

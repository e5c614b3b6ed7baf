"""Device functions shared by the CPU (``numba.njit``) and GPU (``numba.cuda.jit``) kernels.

These are plain Python functions, never called directly: ``kernels/_build.py`` compiles each of them
once per target, rebinding their global names to the compiled versions, so the CPU and the GPU run
the same source and produce bit-identical results.

Rules that keep both targets identical and fast:
- integer arithmetic is explicitly ``uint64`` (Numba would otherwise promote uint64 op int64 to float64);
- no 128-bit intrinsics: the exact product mod 2^61-1 uses 32-bit limbs;
- byte reads are assembled from uint8 loads (little-endian), which is what XXH64 specifies.
"""
import numpy as np

from .. import constants as C

U64 = np.uint64
U32 = np.uint32
MASK32 = U64(0xFFFFFFFF)
MASK29 = U64((1 << 29) - 1)
MERSENNE61 = U64(C.MERSENNE61)
FSS_EMPTY = U64(0xFFFFFFFFFFFFFFFF)  # an fss bucket no shingle has reached
FSS_TOP = U64(0xFFFFFFFFFFFFFFFE)    # the largest fss value
SPACE = C.SPACE
REPLACEMENT = C.REPLACEMENT

# The exact-duplicate hash: XXH64 of the normalized text with each seed (128 bits; pinned in the contract).
EXACT_SEED_LO = U64(C.EXACT_SEED_LO)
EXACT_SEED_HI = U64(C.EXACT_SEED_HI)

# XXH64 primes (from the XXH64 specification).
P64_1 = U64(11400714785074694791)
P64_2 = U64(14029467366897019727)
P64_3 = U64(1609587929392839161)
P64_4 = U64(9650029242287828579)
P64_5 = U64(2870177450012600261)

# shift counts as uint64 (a Python int would promote the shift to int64)
S1, S3, S7, S11, S12, S18, S23 = U64(1), U64(3), U64(7), U64(11), U64(12), U64(18), U64(23)
S27, S29, S31, S32, S33, S61, S64 = U64(27), U64(29), U64(31), U64(32), U64(33), U64(61), U64(64)
ZERO = U64(0)


def rotl64(x, r):
    return (x << r) | (x >> (S64 - r))


def read_u64le(buf, i):
    """8 bytes buf[i:i+8] as a little-endian uint64 (i >= 0). The index is unsigned: Numba guards a
    signed index against negative values (wraparound), which costs instructions per byte and keeps LLVM
    from fusing the 8 byte loads into one."""
    j = U64(i)
    return (U64(buf[j]) | (U64(buf[j + S1]) << U64(8)) | (U64(buf[j + U64(2)]) << U64(16))
            | (U64(buf[j + S3]) << U64(24)) | (U64(buf[j + U64(4)]) << S32) | (U64(buf[j + U64(5)]) << U64(40))
            | (U64(buf[j + U64(6)]) << U64(48)) | (U64(buf[j + S7]) << U64(56)))


def read_u32le(buf, i):
    """4 bytes buf[i:i+4] as a little-endian uint64 (i >= 0; unsigned index, see read_u64le)."""
    j = U64(i)
    return (U64(buf[j]) | (U64(buf[j + S1]) << U64(8)) | (U64(buf[j + U64(2)]) << U64(16))
            | (U64(buf[j + S3]) << U64(24)))


def xxh64_round(acc, lane):
    acc = acc + lane * P64_2
    acc = rotl64(acc, S31)
    return acc * P64_1


def xxh64_merge(acc, v):
    acc = acc ^ xxh64_round(ZERO, v)
    return acc * P64_1 + P64_4


def xxh64_lane(seed, q):
    """Initial value of accumulator q (0..3) of XXH64's 32-byte stripes."""
    if q == 0:
        return seed + P64_1 + P64_2
    if q == 1:
        return seed + P64_2
    if q == 2:
        return seed
    return seed - P64_1


def xxh64_converge(v1, v2, v3, v4):
    """The four stripe accumulators folded into one (inputs of 32 bytes or more)."""
    h = rotl64(v1, S1) + rotl64(v2, S7) + rotl64(v3, S12) + rotl64(v4, S18)
    h = xxh64_merge(h, v1)
    h = xxh64_merge(h, v2)
    h = xxh64_merge(h, v3)
    return xxh64_merge(h, v4)


def xxh64_tail(buf, i, end, h):
    """XXH64's last < 32 bytes buf[i:end] folded into h, then the avalanche."""
    while i + 8 <= end:
        h = h ^ xxh64_round(ZERO, read_u64le(buf, i))
        h = rotl64(h, S27) * P64_1 + P64_4
        i += 8
    if i + 4 <= end:
        h = h ^ (read_u32le(buf, i) * P64_1)
        h = rotl64(h, S23) * P64_2 + P64_3
        i += 4
    while i < end:
        h = h ^ (U64(buf[i]) * P64_5)
        h = rotl64(h, S11) * P64_1
        i += 1
    return xxh64_avalanche(h)


def xxh64_avalanche(h):
    """XXH64's final mix."""
    h = h ^ (h >> S33)
    h = h * P64_2
    h = h ^ (h >> S29)
    h = h * P64_3
    return h ^ (h >> S32)


def xxh64_tail_select(buf, i, rem, h):
    """xxh64_tail of the rem < 32 bytes buf[i:i + rem] with no branch on rem: every step of the spec is computed
    and kept or dropped by a select (3 of 8 bytes, 1 of 4, 3 single bytes). Reads buf[i:i + 31] whatever rem is:
    the caller makes sure those bytes exist."""
    for k in range(3):
        step = rotl64(h ^ xxh64_round(ZERO, read_u64le(buf, i + 8 * k)), S27) * P64_1 + P64_4
        h = step if 8 * k + 8 <= rem else h
    q = rem & ~7  # the bytes the 8-byte steps took
    step = rotl64(h ^ (read_u32le(buf, i + q) * P64_1), S23) * P64_2 + P64_3
    four = (rem & 4) != 0
    h = step if four else h
    q += 4 if four else 0
    for k in range(3):
        step = rotl64(h ^ (U64(buf[U64(i + q + k)]) * P64_5), S11) * P64_1
        h = step if q + k < rem else h
    return xxh64_avalanche(h)


def xxh64_short(buf, start, end, seed):
    """xxh64(buf, start, end, seed), the same value. An input under 32 bytes with 32 bytes readable from start
    takes xxh64_tail_select: the lengths of word shingles vary from one to the next, and the tail's loops of xxh64
    mispredicted on about every one (16 -> 12 ns per word 5-gram on the CPU, measured as in hash_shingles)."""
    length = end - start
    if length < 32 and start + 32 <= buf.shape[0]:
        return xxh64_tail_select(buf, start, length, seed + P64_5 + U64(length))
    return xxh64(buf, start, end, seed)


def xxh64(buf, start, end, seed):
    """XXH64 of the bytes buf[start:end] (uint8 array) with a uint64 seed. Returns uint64. (The GPU's
    exact_hashes runs the stripes of one document cooperatively and ends with the same xxh64_converge
    and xxh64_tail.)"""
    length = end - start
    i = start
    if length >= 32:
        v1 = xxh64_lane(seed, 0)
        v2 = xxh64_lane(seed, 1)
        v3 = xxh64_lane(seed, 2)
        v4 = xxh64_lane(seed, 3)
        limit = end - 32
        while i <= limit:
            v1 = xxh64_round(v1, read_u64le(buf, i))
            v2 = xxh64_round(v2, read_u64le(buf, i + 8))
            v3 = xxh64_round(v3, read_u64le(buf, i + 16))
            v4 = xxh64_round(v4, read_u64le(buf, i + 24))
            i += 32
        h = xxh64_converge(v1, v2, v3, v4)
    else:
        h = seed + P64_5
    return xxh64_tail(buf, i, end, h + U64(length))


def reduce61(x):
    """x mod (2^61 - 1) for any uint64 x."""
    r = (x & MERSENNE61) + (x >> S61)
    if r >= MERSENNE61:
        r = r - MERSENNE61
    return r


def permute61(a, b, h):
    """(a * h + b) mod (2^61 - 1), exact, for a, b, h < 2^61 - 1 (all uint64).

    The 122-bit product is split into 32-bit limbs: a*h = hi*2^64 + mid*2^32 + lo, and folded with
    2^61 = 1 (mod p): 2^64 = 8, mid*2^32 = (mid mod 2^29)*2^32 + (mid >> 29). Every partial sum stays
    below 2^64, so no bits are lost (the common numpy recipe wraps a*h mod 2^64 instead).
    """
    a0 = a & MASK32
    a1 = a >> S32
    h0 = h & MASK32
    h1 = h >> S32
    lo = a0 * h0
    mid = a0 * h1 + a1 * h0
    hi = a1 * h1
    s = (lo & MERSENNE61) + (lo >> S61) + ((mid & MASK29) << S32) + (mid >> S29) + (hi << S3)
    r = (s & MERSENNE61) + (s >> S61)
    if r >= MERSENNE61:
        r = r - MERSENNE61
    r = r + b
    if r >= MERSENNE61:
        r = r - MERSENNE61
    return r


def utf8_decode(buf, i, end):
    """Decode one codepoint at buf[i] (i < end). Returns (codepoint, byte length).

    Invalid or truncated sequences, overlongs, surrogates and values > U+10FFFF decode as U+FFFD
    consuming one byte (the reader already replaces invalid input; this keeps the kernel total)."""
    c0 = np.int32(buf[i])
    if c0 < 0x80:
        return c0, 1
    if c0 >= 0xC2 and c0 <= 0xDF:
        if i + 1 < end:
            c1 = np.int32(buf[i + 1])
            if (c1 & 0xC0) == 0x80:
                return ((c0 & 0x1F) << 6) | (c1 & 0x3F), 2
        return REPLACEMENT, 1
    if c0 >= 0xE0 and c0 <= 0xEF:
        if i + 2 < end:
            c1 = np.int32(buf[i + 1])
            c2 = np.int32(buf[i + 2])
            if (c1 & 0xC0) == 0x80 and (c2 & 0xC0) == 0x80:
                cp = ((c0 & 0x0F) << 12) | ((c1 & 0x3F) << 6) | (c2 & 0x3F)
                if cp >= 0x800 and (cp < 0xD800 or cp > 0xDFFF):
                    return cp, 3
        return REPLACEMENT, 1
    if c0 >= 0xF0 and c0 <= 0xF4:
        if i + 3 < end:
            c1 = np.int32(buf[i + 1])
            c2 = np.int32(buf[i + 2])
            c3 = np.int32(buf[i + 3])
            if (c1 & 0xC0) == 0x80 and (c2 & 0xC0) == 0x80 and (c3 & 0xC0) == 0x80:
                cp = ((c0 & 0x07) << 18) | ((c1 & 0x3F) << 12) | ((c2 & 0x3F) << 6) | (c3 & 0x3F)
                if cp >= 0x10000 and cp <= 0x10FFFF:
                    return cp, 4
        return REPLACEMENT, 1
    return REPLACEMENT, 1


def utf8_invalid(buf, start, end):
    """1 if buf[start:end] is not valid UTF-8 (a byte that utf8_decode has to replace), else 0.
    The readers repair such text like Python's ``decode("utf-8", "replace")`` before it reaches
    normalization; a reader that hands over device buffers uses this to find the rows to repair."""
    i = start
    while i < end:
        if buf[i] < 0x80:
            i += 1
            continue
        cp, step = utf8_decode(buf, i, end)
        if step == 1:  # a non-ASCII byte decoded alone: invalid, truncated, overlong or surrogate
            return 1
        i += step
    return 0


def utf8_covered(buf, start, j, end):
    """1 if byte j of the text buf[start:end] is a continuation byte inside a valid sequence (utf8_decode
    of its lead, at most 3 bytes before it, spans it), else 0. The positions utf8_decode visits walking
    from start are exactly the bytes that are not covered: this lets a thread judge any byte on its own,
    without the walk (the GPU's cooperative kernels)."""
    if (buf[j] & 0xC0) != 0x80:
        return 0
    d = 1
    while d <= 3 and j - d >= start:
        c = buf[j - d]
        if (c & 0xC0) != 0x80:
            if c < 0x80:
                return 0
            cp, step = utf8_decode(buf, j - d, end)
            return 1 if step > d else 0
        d += 1
    return 0


def utf8_invalid_at(buf, start, j, end):
    """1 if byte j makes buf[start:end] invalid UTF-8, else 0: utf8_invalid(buf, start, end) is 1 iff
    some j in [start, end) has utf8_invalid_at 1 (a visited non-ASCII byte that decodes alone: a bad lead,
    or a continuation byte no lead covers)."""
    c = buf[j]
    if c < 0x80:
        return 0
    if (c & 0xC0) == 0x80:
        return 1 - utf8_covered(buf, start, j, end)
    cp, step = utf8_decode(buf, j, end)
    return 1 if step == 1 else 0


def utf8_len(cp):
    if cp < 0x80:
        return 1
    if cp < 0x800:
        return 2
    if cp < 0x10000:
        return 3
    return 4


def utf8_put(out, pos, cp):
    """Write codepoint cp as UTF-8 at out[pos]; return the number of bytes written."""
    if cp < 0x80:
        out[pos] = cp
        return 1
    if cp < 0x800:
        out[pos] = 0xC0 | (cp >> 6)
        out[pos + 1] = 0x80 | (cp & 0x3F)
        return 2
    if cp < 0x10000:
        out[pos] = 0xE0 | (cp >> 12)
        out[pos + 1] = 0x80 | ((cp >> 6) & 0x3F)
        out[pos + 2] = 0x80 | (cp & 0x3F)
        return 3
    out[pos] = 0xF0 | (cp >> 18)
    out[pos + 1] = 0x80 | ((cp >> 12) & 0x3F)
    out[pos + 2] = 0x80 | ((cp >> 6) & 0x3F)
    out[pos + 3] = 0x80 | (cp & 0x3F)
    return 4


def minhash_update(sig, a, b, hr):
    """sig[k] = min(sig[k], (a[k]*hr + b[k]) mod p) for k < len(sig); hr < p."""
    for k in range(sig.shape[0]):
        v = permute61(a[k], b[k], hr)
        s = sig[k]
        sig[k] = v if v < s else s  # an unconditional store: LLVM vectorizes the loop over k


# The fss family (MinHashConfig family "fss": fast similarity sketching, Dahlgaard, Knudsen & Thorup 2017). A
# document's K buckets start empty (FSS_EMPTY); in round r (0 <= r < rounds) each shingle hash h has the value
# v = fss_value(a[r], b[r], h) and offers it to bucket fss_bucket(v, K), which keeps the least value offered; round 0
# offers to every bucket, a later round only to the buckets still empty when it began (none left: it stops). Each
# bucket j still empty after the rounds takes its own MinHash, the least fss_value(a[rounds + j], b[rounds + j], h)
# over the shingles. Two documents agree in bucket j exactly when the least value there over their union comes from a
# shared shingle, i.e. with probability J, as with K permutations: the union's shingle that fills j in round r also
# fills it for each document holding it, since a document's round r reaches every bucket its union's does. Cost:
# about one value per shingle and round (a few rounds while buckets are empty) instead of K per shingle. The CPU
# sketches one document at a time (fss_sketch); the GPU runs each round over every document's shingles at once (one
# launch per round, atomic min; kernels/core_cuda.py), reading the same "opened" snapshot, so the values agree bit
# for bit.


def fss_value(a, b, h):
    """a*h + b mod 2^64 (uint64; a odd), capped below FSS_EMPTY, which marks an empty bucket (the one value that
    moves, 2^64 - 1, is reached by 2^-64 of the shingles)."""
    v = a * h + b
    return v if v < FSS_EMPTY else FSS_TOP


def fss_bucket(v, K):
    """Bucket (0..K-1, uint64) of fss value v: its high 32 bits scaled to K (uint64; a multiply and a shift, no
    division). Within a bucket the values order by those same high bits first, so a width-32 signature (the high
    halves) keeps the bucket's least value."""
    return ((v >> S32) * K) >> S32


def fss_offer(hh, a, b, K, sig, vals, bkts, opened, first):
    """One round of fss over the shingle hashes hh (uint64, one document): each value under (a, b) is offered to
    its bucket of sig (uint64 (K,)), which keeps the least. first: every bucket takes offers (round 0); else only
    those with opened[j] != 0 (empty when the round began). vals (uint64) and bkts (int64): scratch of len(hh)."""
    n = hh.shape[0]
    for t in range(n):  # the values first: this loop vectorizes
        v = fss_value(a, b, hh[t])
        vals[t] = v
        bkts[t] = np.int64(fss_bucket(v, K))
    if first:
        for t in range(n):  # an unconditional store: a branch here mispredicts on about half of the shingles
            j = bkts[t]
            cur = sig[j]
            v = vals[t]
            sig[j] = v if v < cur else cur
    else:
        for t in range(n):
            j = bkts[t]
            cur = sig[j]
            v = vals[t]
            sig[j] = v if (opened[j] != 0 and v < cur) else cur


def fss_open(sig, opened):
    """opened[j] = 1 where bucket j of sig is empty, else 0 (uint8 (K,)); returns how many are."""
    empty = 0
    for j in range(sig.shape[0]):
        e = 1 if sig[j] == FSS_EMPTY else 0
        opened[j] = e
        empty += e
    return empty


def fss_fill(hh, a, b, rounds, sig, opened):
    """Each bucket j with opened[j] != 0 takes its own MinHash: the least value under (a[rounds + j],
    b[rounds + j]) over the shingle hashes hh (FSS_EMPTY when hh is empty)."""
    for j in range(sig.shape[0]):
        if opened[j] != 0:
            aj = a[rounds + j]
            bj = b[rounds + j]
            m = FSS_EMPTY
            for t in range(hh.shape[0]):
                m = min(m, fss_value(aj, bj, hh[t]))
            sig[j] = m


def fss_sketch(hh, a, b, rounds, sig, vals, bkts, opened):
    """The fss signature of one document from its shingle hashes hh (uint64 (n,), any order, repeats allowed):
    sig (uint64 (K,)); a, b (uint64 (rounds + K,)): the rounds' parameters, then the buckets'. Without shingles
    every bucket stays FSS_EMPTY. Scratch: vals uint64 (n,), bkts int64 (n,), opened uint8 (K,)."""
    K = U64(sig.shape[0])
    for j in range(sig.shape[0]):
        sig[j] = FSS_EMPTY
    if hh.shape[0] == 0:
        return
    for r in range(rounds):
        if r > 0 and fss_open(sig, opened) == 0:
            return
        fss_offer(hh, a[r], b[r], K, sig, vals, bkts, opened, r == 0)
    if fss_open(sig, opened) > 0:
        fss_fill(hh, a, b, rounds, sig, opened)


# Shingles, one definition for both targets. A document's units are its codepoints (kind_char) or its words;
# unit_start says where the unit marked by one byte starts, and shingle j spans from unit j's start to unit
# j+n's start less the separating space of words (shingle_end), or to the document's end for the last one.
# The CPU lists a document's unit starts, then hashes its shingles (hash_shingles; codepoints by utf8_decode's
# steps, which visit exactly unit_start's positions); the GPU finds every unit start in parallel
# (cuda.unit_chunks), then any shingle directly (shingle_bounds). A single loop over unit_start for both kinds
# measured 1.6x slower per shingle on the CPU (benchmarks/minhash_limit.py, K=8), so the CPU keeps one loop per
# kind.


def unit_start(c, buf, s, j, e, kind_char):
    """Where the unit marked by byte j (= c) of normalized document buf[s:e] starts, or -1. Codepoints: one
    starts at every byte utf8_decode visits (a lead byte, or a byte no sequence covers). Words: one starts
    after every space (the document's first word, at s, is marked by no byte)."""
    if kind_char:
        if (c & 0xC0) != 0x80 or utf8_covered(buf, s, j, e) == 0:
            return j
        return -1
    if c == SPACE:
        return j + 1
    return -1


def shingle_end(next_unit, kind_char):
    """End of a shingle followed by a unit starting at next_unit (words: before the separating space)."""
    return next_unit if kind_char else next_unit - 1


def hash_shingles(norm, start, end, kind_char, n, seed, out, out_pos, units):
    """The shingles of normalized text norm[start:end] in order, each hashed with XXH64(seed) into out[out_pos:]
    (uint64). ``units``: int64 scratch of length >= the document's units + 1 (its shingles + n always is). Returns
    the number of shingles.

    Two passes: the unit starts into ``units`` (codepoints: each position utf8_decode visits; words: the first byte
    and each byte unit_start marks), then the document's end as one more start (words: end + 1, as shingle_end
    takes a separating space back); then shingle k, from units[k] to shingle_end(units[k + n]), for every k. One
    pass keeping the last n starts in a ring cost 26 ns per word 5-gram against 16 (the branch on each byte's
    space mispredicted once per word, and each hash waited for the scan), and 63 with a MinHash update inlined in
    it, even untaken (one thread, 3,000 documents of ~400 words, CPU time, 2026-12-04). The hashes only: kernels
    fold them afterwards.
    """
    if end <= start:
        return 0
    u = 0
    if kind_char:
        i = start
        while i < end:
            units[u] = i
            u += 1
            cp, step = utf8_decode(norm, i, end)  # the next unit_start of a codepoint is i + step
            i += step
        units[u] = end
    else:
        units[0] = start
        u = 1
        for i in range(start, end):  # no branch: every byte stores the start after it, a space keeps it
            units[u] = i + 1
            u += 1 if unit_start(norm[U64(i)], norm, start, i, end, False) >= 0 else 0
        units[u] = end + 1
    count = u - n + 1
    for k in range(count):
        out[out_pos + k] = xxh64_short(norm, units[k], shingle_end(units[k + n], kind_char), seed)
    return max(count, 0)


def shingle_bounds(units, ubase, n_units, j, n, kind_char, doc_end):
    """Byte range of shingle j of a document whose unit starts are units[ubase:ubase+n_units]."""
    s = units[ubase + j]
    if j + n < n_units:
        e = shingle_end(units[ubase + j + n], kind_char)
    else:
        e = doc_end
    return s, e


def band_key(sig_bytes, band, band_bytes):
    """XXH64(seed=band) of the band's values: bytes [band*band_bytes, (band+1)*band_bytes) of one
    little-endian signature row (uint8 view)."""
    return xxh64(sig_bytes, band * band_bytes, (band + 1) * band_bytes, U64(band))


def intersection_sorted(x, x0, x1, y, y0, y1):
    """|x[x0:x1] & y[y0:y1]| for strictly increasing uint64 runs (merge walk)."""
    i = x0
    j = y0
    c = 0
    while i < x1 and j < y1:
        xi = x[i]
        yj = y[j]
        if xi < yj:
            i += 1
        elif xi > yj:
            j += 1
        else:
            c += 1
            i += 1
            j += 1
    return c


def jaccard_sorted(hashes, x0, nx, y0, ny):
    """Exact Jaccard of the sets hashes[x0:x0+nx] and hashes[y0:y0+ny] (strictly increasing uint64 runs);
    NaN (undefined, a null in the decisions) for two empty sets: the project's one convention for empty sets
    (a document with no shingle is never a candidate; it takes the exact path only), and NaN >= threshold is
    false, so no caller can remove a document for an empty match."""
    inter = intersection_sorted(hashes, x0, x0 + nx, hashes, y0, y0 + ny)
    union = nx + ny - inter
    return inter / union if union > 0 else np.nan


def representative_run(order, start, stop, entry_off, entry_bucket, entry_doc, set_offsets, set_sizes, hashes,
                       pinned, threshold, cap, head, tail, nxt, stamp, capped, rep, jac):
    """The representative policy over order[start:stop]: one candidate component, in keep order.

    Document d is removed iff an already-KEPT document sharing one of its buckets has exact Jaccard
    >= threshold; the first such (earliest kept, buckets in band order) becomes rep[d] with its
    Jaccard in jac[d]. Kept documents are appended to per-bucket linked lists (head/tail per bucket,
    nxt per entry). At most ``cap`` kept documents are examined per bucket (capped[bucket] is set when
    the cap cuts a list). stamp[x] == t marks x as already compared with the t-th document (a pair
    sharing several buckets is compared once). pinned[d] != 0 keeps d unconditionally (documents of an
    existing index: they were kept by an earlier run). Components touch disjoint documents, buckets and
    entries, so components can run in parallel. Returns the number of Jaccard computations.
    """
    comparisons = 0
    for t in range(start, stop):
        d = order[t]
        found = -1
        best = 0.0
        d0 = set_offsets[d]
        nd = set_sizes[d]
        e_stop = entry_off[d + 1]
        if pinned[d] != 0:
            e_stop = entry_off[d]  # no search: kept
        for e in range(entry_off[d], e_stop):
            bkt = entry_bucket[e]
            k = head[bkt]
            seen = 0
            while k != -1:
                if seen >= cap:
                    capped[bkt] = 1
                    break
                other = entry_doc[k]
                k = nxt[k]
                if stamp[other] == t:
                    continue
                stamp[other] = t
                j = jaccard_sorted(hashes, d0, nd, set_offsets[other], set_sizes[other])
                comparisons += 1
                if j >= threshold:
                    found = other
                    best = j
                    break
                seen += 1
            if found != -1:
                break
        if found != -1:
            rep[d] = found
            jac[d] = best
        else:
            for e in range(entry_off[d], entry_off[d + 1]):
                bkt = entry_bucket[e]
                if tail[bkt] == -1:
                    head[bkt] = e
                else:
                    nxt[tail[bkt]] = e
                tail[bkt] = e
    return comparisons


DEVICE_FUNCTIONS = ["rotl64", "read_u64le", "read_u32le", "xxh64_round", "xxh64_merge", "xxh64_lane",
                    "xxh64_converge", "xxh64_tail", "xxh64_avalanche", "xxh64_tail_select", "xxh64", "xxh64_short",
                    "reduce61", "permute61", "utf8_decode", "utf8_invalid",
                    "utf8_covered", "utf8_invalid_at", "utf8_len", "utf8_put", "minhash_update", "fss_value",
                    "fss_bucket", "fss_offer", "fss_open", "fss_fill", "fss_sketch", "unit_start", "shingle_end",
                    "hash_shingles", "shingle_bounds", "band_key", "intersection_sorted",
                    "jaccard_sorted", "representative_run"]

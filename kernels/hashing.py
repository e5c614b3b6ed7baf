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

U64 = np.uint64
U32 = np.uint32
MASK32 = U64(0xFFFFFFFF)
MASK29 = U64((1 << 29) - 1)
MERSENNE61 = U64((1 << 61) - 1)
SPACE = 0x20
REPLACEMENT = 0xFFFD

# XXH64 primes (from the XXH64 specification).
P64_1 = U64(11400714785074694791)
P64_2 = U64(14029467366897019727)
P64_3 = U64(1609587929392839161)
P64_4 = U64(9650029242287828579)
P64_5 = U64(2870177450012600261)

S1 = U64(1)
S3 = U64(3)
S7 = U64(7)
S11 = U64(11)
S12 = U64(12)
S18 = U64(18)
S23 = U64(23)
S27 = U64(27)
S29 = U64(29)
S31 = U64(31)
S32 = U64(32)
S33 = U64(33)
S61 = U64(61)
S64 = U64(64)
ZERO = U64(0)


def rotl64(x, r):
    return (x << r) | (x >> (S64 - r))


def read_u64le(buf, i):
    return (U64(buf[i]) | (U64(buf[i + 1]) << U64(8)) | (U64(buf[i + 2]) << U64(16))
            | (U64(buf[i + 3]) << U64(24)) | (U64(buf[i + 4]) << U64(32)) | (U64(buf[i + 5]) << U64(40))
            | (U64(buf[i + 6]) << U64(48)) | (U64(buf[i + 7]) << U64(56)))


def read_u32le(buf, i):
    return (U64(buf[i]) | (U64(buf[i + 1]) << U64(8)) | (U64(buf[i + 2]) << U64(16))
            | (U64(buf[i + 3]) << U64(24)))


def xxh64_round(acc, lane):
    acc = acc + lane * P64_2
    acc = rotl64(acc, S31)
    return acc * P64_1


def xxh64_merge(acc, v):
    acc = acc ^ xxh64_round(ZERO, v)
    return acc * P64_1 + P64_4


def xxh64(buf, start, end, seed):
    """XXH64 of the bytes buf[start:end] (uint8 array) with a uint64 seed. Returns uint64."""
    length = end - start
    i = start
    if length >= 32:
        v1 = seed + P64_1 + P64_2
        v2 = seed + P64_2
        v3 = seed
        v4 = seed - P64_1
        limit = end - 32
        while i <= limit:
            v1 = xxh64_round(v1, read_u64le(buf, i))
            v2 = xxh64_round(v2, read_u64le(buf, i + 8))
            v3 = xxh64_round(v3, read_u64le(buf, i + 16))
            v4 = xxh64_round(v4, read_u64le(buf, i + 24))
            i += 32
        h = rotl64(v1, S1) + rotl64(v2, S7) + rotl64(v3, S12) + rotl64(v4, S18)
        h = xxh64_merge(h, v1)
        h = xxh64_merge(h, v2)
        h = xxh64_merge(h, v3)
        h = xxh64_merge(h, v4)
    else:
        h = seed + P64_5
    h = h + U64(length)
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
    h = h ^ (h >> S33)
    h = h * P64_2
    h = h ^ (h >> S29)
    h = h * P64_3
    h = h ^ (h >> S32)
    return h


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


def emit_codepoint(m, out, out_pos, n_bytes, n_spaces, n_cps, pending_space, write):
    """Append image codepoint m to the normalized output (state: bytes, spaces, codepoints written,
    and whether a space is pending). A space only matters between two visible codepoints: leading
    ones are dropped, runs collapse, and a trailing one is never emitted."""
    if m == SPACE:
        return n_bytes, n_spaces, n_cps, n_bytes > 0
    if pending_space:
        if write:
            out[out_pos + n_bytes] = SPACE
        n_bytes += 1
        n_spaces += 1
        n_cps += 1
    if write:
        n_bytes += utf8_put(out, out_pos + n_bytes, m)
    else:
        n_bytes += utf8_len(m)
    return n_bytes, n_spaces, n_cps + 1, False


def normalize_doc(src, start, end, map_off, map_cp, out, out_pos, write):
    """Table-driven normalization of src[start:end] (UTF-8).

    Each codepoint is replaced by its table image map_cp[map_off[c]:map_off[c+1]]; spaces (U+0020,
    which the tables use for every whitespace/control/punctuation-as-space) collapse to one and are
    trimmed at both ends. With write=True the result goes to out[out_pos:]; with write=False only the
    sizes are computed (the first of two passes that size the output). Returns (bytes, words,
    codepoints) of the normalized text; words are the space-separated runs.
    ASCII bytes take a fast path: their images are single ASCII codepoints (checked when tables load).
    """
    n_bytes = 0
    n_spaces = 0
    n_cps = 0
    pending = False
    i = start
    while i < end:
        c0 = src[i]
        if c0 < 0x80:
            i += 1
            n_bytes, n_spaces, n_cps, pending = emit_codepoint(map_cp[map_off[c0]], out, out_pos, n_bytes, n_spaces,
                                                               n_cps, pending, write)
            continue
        cp, step = utf8_decode(src, i, end)
        i += step
        for j in range(map_off[cp], map_off[cp + 1]):
            n_bytes, n_spaces, n_cps, pending = emit_codepoint(map_cp[j], out, out_pos, n_bytes, n_spaces, n_cps,
                                                               pending, write)
    n_words = n_spaces + 1 if n_bytes > 0 else 0
    return n_bytes, n_words, n_cps


def shingle_count(kind_char, n, n_words, n_cps):
    """Number of (not necessarily distinct) shingles of a normalized document."""
    units = n_cps if kind_char else n_words
    return units - n + 1 if units >= n else 0


def minhash_update(sig, a, b, hr):
    """sig[k] = min(sig[k], (a[k]*hr + b[k]) mod p) for k < len(sig); hr < p."""
    for k in range(sig.shape[0]):
        v = permute61(a[k], b[k], hr)
        if v < sig[k]:
            sig[k] = v


def emit_shingle(norm, s, e, seed, a, b, sig, out, out_pos, count, write_hashes):
    """Hash shingle norm[s:e]: store the raw hash at out[out_pos + count], or fold it into the
    signature. Returns count + 1."""
    h = xxh64(norm, s, e, seed)
    if write_hashes:
        out[out_pos + count] = h
    else:
        minhash_update(sig, a, b, reduce61(h))
    return count + 1


def scan_shingles(norm, start, end, kind_char, n, seed, a, b, sig, out, out_pos, ring, write_hashes):
    """Enumerate the shingles of normalized text norm[start:end] in order, hashing each with XXH64(seed).

    Word shingles are the byte ranges from the start of word i to the end of word i+n-1 (the text is
    normalized: single interior spaces), character shingles are n consecutive codepoints. With
    write_hashes the raw 64-bit hashes go to out[out_pos:]; otherwise they update the MinHash
    signature ``sig`` (after reduction mod 2^61-1). ``ring`` is int64 scratch of length >= n.
    Returns the number of shingles.
    """
    count = 0
    if end <= start:
        return 0
    if kind_char:
        ncp = 0
        i = start
        while i < end:
            ring[ncp % n] = i
            cp, step = utf8_decode(norm, i, end)
            i += step
            ncp += 1
            if ncp >= n:
                count = emit_shingle(norm, ring[(ncp - n) % n], i, seed, a, b, sig, out, out_pos, count, write_hashes)
        return count
    nw = 0
    ws = start
    i = start
    while i <= end:
        if i == end or norm[i] == SPACE:
            ring[nw % n] = ws
            nw += 1
            if nw >= n:
                count = emit_shingle(norm, ring[(nw - n) % n], i, seed, a, b, sig, out, out_pos, count, write_hashes)
            ws = i + 1
        i += 1
    return count


def shingle_bounds(units, ubase, n_units, j, n, gap, doc_end):
    """Byte range of shingle j of a document whose unit (word or codepoint) starts are
    units[ubase:ubase+n_units]. Words: gap=1 (skip the separating space); codepoints: gap=0."""
    s = units[ubase + j]
    if j + n < n_units:
        e = units[ubase + j + n] - gap
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
                o0 = set_offsets[other]
                no = set_sizes[other]
                inter = intersection_sorted(hashes, d0, d0 + nd, hashes, o0, o0 + no)
                comparisons += 1
                union = nd + no - inter
                j = 1.0
                if union > 0:
                    j = inter / union
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


DEVICE_FUNCTIONS = ["rotl64", "read_u64le", "read_u32le", "xxh64_round", "xxh64_merge", "xxh64", "reduce61",
                    "permute61", "utf8_decode", "utf8_invalid", "utf8_len", "utf8_put", "emit_codepoint", "normalize_doc", "shingle_count",
                    "minhash_update", "emit_shingle", "scan_shingles", "shingle_bounds", "band_key", "intersection_sorted", "representative_run"]

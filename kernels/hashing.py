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

# The exact-duplicate hash: XXH64 of the normalized text with each seed (128 bits; pinned in the contract).
EXACT_SEED_LO = U64(0x9E3779B97F4A7C15)
EXACT_SEED_HI = U64(0xC2B2AE3D27D4EB4F)

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
    h = h ^ (h >> S33)
    h = h * P64_2
    h = h ^ (h >> S29)
    h = h * P64_3
    h = h ^ (h >> S32)
    return h


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


# ----------------------------------------------------------------------------------------------------------
# Normalization (policy in gpu_dedup/normalize.py, tables in gpu_dedup/unicode_tables.py)
#
# Output state while scanning a document ("eager" emission): p = bytes emitted, sp = spaces emitted,
# extra = bytes - codepoints emitted, prev = 1 when the last non-deleted image was a space (or nothing has
# been emitted yet). A space image is emitted unless prev is 1, so leading spaces vanish and runs collapse;
# the one trailing space this can leave is taken back at the end. Counting this way needs no look-ahead,
# which is what lets 8 bytes at a time be counted with a few 64-bit operations.
#
# ASCII bytes (99.8% of the bytes of English text) take fast paths, all identical in output to the table
# (ascii_run): a per-byte loop reading the image straight from map_cp (ASCII images are single ASCII
# codepoints, so map_off[c] == c for c <= 128; checked when the tables load); when the table's 128 ASCII
# images are those of a SWAR model (swar_spaces/swar_image: what every NormalizeConfig produces; ascii_mode
# compares all 128), a word loop that classifies and maps 8 bytes with 64-bit arithmetic instead of 8 table
# look-ups; and on the CPU (MODE_BLOCKS) a block loop over 64 bytes that LLVM vectorizes. Byte indexes in
# the hot loops are unsigned: Numba guards a signed index against negative values (wraparound), which
# costs two instructions per byte and keeps LLVM from fusing the 8 byte loads (or stores) of a word into
# one. Measured with benchmarks/normalize_bench.py.

U8 = np.uint8
ASCII_GENERIC = -1  # ascii_mode: the table's ASCII part is not a SWAR model; use the per-byte loop
MODE_PUNCT = 1      # model bit: ASCII punctuation and symbols -> space (NormalizeConfig.remove_punctuation)
MODE_DIGITS = 2     # model bit: ASCII digits -> '0' (NormalizeConfig.fold_digits)
MODE_BLOCKS = 4     # with a model: also the block loop of ascii_run (the CPU kernels ask for it)
BLOCK = 64          # bytes per block (< 256: the block counters are uint8; 32 and 128 measured slower)
SPAN_MODE_MIN = 128  # normalize_doc checks the table for a model (about 80 ns) only on spans this long
W8_HI = U64(0x8080808080808080)   # the high bit of each byte of a 64-bit word
W8_ONES = U64(0x0101010101010101)
W8_CTRL = U64(0x5F5F5F5F5F5F5F5F)  # 0x7F - 0x20: byte + this has its high bit clear iff byte <= 0x20
W8_BYTE = U64(0xFF)
W8_M1 = U64(0x5555555555555555)
W8_M2 = U64(0x3333333333333333)
W8_M4 = U64(0x0F0F0F0F0F0F0F0F)
W8_S2 = U64(2)
W8_S3 = U64(3)
W8_S8 = U64(8)
W8_S16 = U64(16)
W8_S24 = U64(24)
W8_S40 = U64(40)
W8_S48 = U64(48)
W8_S56 = U64(56)
W8_S63 = U64(63)


def ascii_mode_guess(map_cp):
    """The only SWAR model the table can equal, read off '!' and '1' (where the models differ)."""
    mode = 0
    if map_cp[0x21] == SPACE:
        mode |= MODE_PUNCT
    if map_cp[0x31] == 0x30:
        mode |= MODE_DIGITS
    return mode


def ascii_word_fits(map_cp, c, mode):
    """1 if the images map_cp[c:c+8] of the ASCII codepoints c..c+7 (c a multiple of 8, < 128) are the
    SWAR model's (swar_image), else 0."""
    w = ZERO
    for k in range(8):
        m = map_cp[c + k]
        if m < 0 or m >= 0x80:
            return 0
        w |= U64(m) << U64(8 * k)
    cw = U64(c) * W8_ONES + U64(0x0706050403020100)  # the bytes c, c+1, ..., c+7
    if w != swar_image(cw, swar_spaces(cw, mode), mode):
        return 0
    return 1


def ascii_mode(map_cp):
    """The SWAR model (MODE_* bits) that the table's 128 ASCII images equal, or ASCII_GENERIC."""
    mode = ascii_mode_guess(map_cp)
    for c in range(0, 128, 8):
        if ascii_word_fits(map_cp, c, mode) == 0:
            return ASCII_GENERIC
    return mode


def store_u64le(buf, i, w):
    """buf[i:i+8] = the bytes of w, little-endian (i >= 0)."""
    j = U64(i)
    buf[j] = w & W8_BYTE
    buf[j + S1] = (w >> W8_S8) & W8_BYTE
    buf[j + U64(2)] = (w >> W8_S16) & W8_BYTE
    buf[j + S3] = (w >> W8_S24) & W8_BYTE
    buf[j + U64(4)] = (w >> S32) & W8_BYTE
    buf[j + U64(5)] = (w >> W8_S40) & W8_BYTE
    buf[j + U64(6)] = (w >> W8_S48) & W8_BYTE
    buf[j + S7] = w >> W8_S56


def swar_in(w, lo, hi):
    """0x80 in each byte of w (every byte < 0x80) that lies in [lo, hi] (uint64, lo <= 0x80), else 0.
    No byte sum carries: byte + (0x80 - lo) and byte + (0x7F - hi) stay below 0x100."""
    return (w + (U64(0x80) - lo) * W8_ONES) & ~(w + (U64(0x7F) - hi) * W8_ONES) & W8_HI


def swar_spaces(w, mode):
    """0x80 in each byte of w (every byte < 0x80) whose model image is a space, else 0. The model:
    controls, U+0020 and DEL are spaces; with MODE_PUNCT every byte but 0-9, A-Z, a-z is."""
    if (mode & MODE_PUNCT) != 0:
        alnum = (swar_in(w, U64(0x30), U64(0x39)) | swar_in(w, U64(0x41), U64(0x5A))
                 | swar_in(w, U64(0x61), U64(0x7A)))
        return ~alnum & W8_HI
    # byte <= 0x20, or byte == 0x7F (byte + 1 reaches 0x80)
    return (~(w + W8_CTRL) | (w + W8_ONES)) & W8_HI


def swar_image(w, sph, mode):
    """The model images of the 8 bytes of w (every byte < 0x80), given sph = swar_spaces(w, mode): a space
    for the spaces, a-z for A-Z, with MODE_DIGITS '0' for 1-9, the byte itself otherwise."""
    img = w + (swar_in(w, U64(0x41), U64(0x5A)) >> W8_S2)  # A-Z: + 0x20 (= 0x80 >> 2)
    img = (img & ~(sph | (sph - (sph >> S7)))) | (sph >> W8_S2)  # spaces: whole byte -> 0x20
    if (mode & MODE_DIGITS) != 0:
        dig = swar_in(w, U64(0x31), U64(0x39))
        img = (img & ~(dig | (dig - (dig >> S7)))) | (dig >> W8_S2) | (dig >> W8_S3)  # -> 0x30
    return img


def swar_count(m):
    """Number of set bits of m, as int64. The textbook SWAR popcount: LLVM compiles it to one popcnt
    instruction where the CPU has one."""
    m = m - ((m >> S1) & W8_M1)
    m = (m & W8_M2) + ((m >> W8_S2) & W8_M2)
    m = (m + (m >> U64(4))) & W8_M4
    return np.int64((m * W8_ONES) >> W8_S56)


def ascii_content_end(src, start, end, map_cp):
    """End of src[start:end] less its trailing run of ASCII bytes with a space image and non-ASCII bytes:
    either start or one past an ASCII byte with a visible image. Output written while scanning before it
    is certain to be followed by more output, so stores there can run ahead (see normalize_scan)."""
    e = end
    while e > start:
        c = src[e - 1]
        if c < 0x80 and map_cp[c] != SPACE:
            break
        e -= 1
    return e


def ascii_space(c, punct):
    """1 (uint8) if ASCII byte c's model image is a space (punct: MODE_PUNCT), else 0: swar_spaces per
    byte, in uint8 operations so that LLVM vectorizes the block loops with byte lanes."""
    if punct:
        alnum = (U8((c >= U8(0x30)) & (c <= U8(0x39))) | U8((c >= U8(0x41)) & (c <= U8(0x5A)))
                 | U8((c >= U8(0x61)) & (c <= U8(0x7A))))
        return U8(1) ^ alnum
    return U8(c <= U8(0x20)) | U8(c == U8(0x7F))


def ascii_block_stats(src, i, prev, punct):
    """Over the BLOCK bytes src[i:i+BLOCK] (i >= 1) after state prev: (OR of the bytes, spaces, spaces that
    collapse), as uint8; the counts mean something only when the OR is < 0x80 (all ASCII)."""
    j = U64(i)
    bad = U8(0)
    n_sp = U8(0)
    n_col = U8(0)
    for k in range(U64(BLOCK)):  # constant trip count, no carried state: a few vector instructions
        c0 = src[j + k - S1]
        c1 = src[j + k]
        s1 = ascii_space(c1, punct)
        bad = U8(bad | c1)
        n_sp = U8(n_sp + s1)
        n_col = U8(n_col + (ascii_space(c0, punct) & s1))
    # the loop paired the first byte with src[i - 1]; its state is prev
    first = ascii_space(src[j], punct)
    n_col = U8(n_col - (first & ascii_space(src[j - S1], punct)) + (first & U8(prev)))
    return bad, n_sp, n_col


def ascii_run(src, i, stop, mode, map_cp, out, out_pos, p, sp, prev, write):
    """normalize_span's loop over a run of ASCII bytes src[i:...] (i < stop, src[i] < 0x80): it returns
    (i, p, sp, prev) at stop or at the first non-ASCII byte. Three loops, the first that applies:

    - blocks (MODE_BLOCKS, CPU kernels; on a GPU thread they would be plain byte loops): BLOCK bytes at a
      time with loops that LLVM turns into a few vector instructions. Sizes: the block's counts. Write: a
      block without a collapsing space is stored 1:1; one with such a space goes to the word loop.
      MODE_PUNCT text has a collapsing space every few words (", "), so its write pass skips this loop;
    - words (any SWAR model): 8 bytes at a time; with write, a word with one collapsing space is stored
      with that byte dropped, one with more goes to the byte loop;
    - bytes: the image from map_cp (always correct).

    One function on purpose: as calls, the block and word loops cost more per call than a block (Numba
    reference-counts array arguments at each call, with atomic instructions)."""
    if write and prev == 1 and p > 0:
        out[out_pos + p - 1] = SPACE  # a space emit_codepoint counted: output follows, store it
    punct = (mode & MODE_PUNCT) != 0
    digits = (mode & MODE_DIGITS) != 0
    blocks = (mode & MODE_BLOCKS) != 0 and mode != ASCII_GENERIC and not (write and punct)
    while True:
        if mode != ASCII_GENERIC:
            wstop = stop
            if blocks:
                while i + BLOCK <= stop and i > 0:
                    # two call sites: each model gets its own compiled (vectorized) loop
                    if punct:
                        bad, n_sp, n_col = ascii_block_stats(src, i, prev, True)
                    else:
                        bad, n_sp, n_col = ascii_block_stats(src, i, prev, False)
                    if bad >= 0x80:
                        break
                    if write:
                        if n_col != 0:
                            break
                        j = U64(i)
                        oj = U64(out_pos + p)
                        for k in range(U64(BLOCK)):  # the images, 1:1 (vectorized)
                            c = src[j + k]
                            m = U8(c + (U8((c >= U8(0x41)) & (c <= U8(0x5A))) << U8(5)))  # A-Z -> a-z
                            if digits and c >= U8(0x31) and c <= U8(0x39):
                                m = U8(0x30)
                            if ascii_space(c, False) != U8(0):
                                m = U8(SPACE)
                            out[oj + k] = m
                        p += BLOCK
                        sp += np.int64(n_sp)
                    else:
                        p += BLOCK - np.int64(n_col)
                        sp += np.int64(n_sp) - np.int64(n_col)
                    prev = np.int64(ascii_space(src[i + BLOCK - 1], punct))
                    i += BLOCK
                wstop = i + BLOCK  # the block the loop stopped at, then blocks again
                if wstop > stop:  # (no min(): the CUDA target has none for two integers)
                    wstop = stop
            while i + 8 <= wstop:
                w = read_u64le(src, i)
                if (w & W8_HI) != ZERO:
                    break
                sph = swar_spaces(w, mode)
                col = sph & ((sph << W8_S8) | (U64(prev) << S7))  # spaces that collapse
                if write:
                    img = swar_image(w, sph, mode)
                    n = 8
                    if col != ZERO:
                        # one collapsing space: drop its byte and store 7 (+1 junk) bytes, when more
                        # output follows this word; otherwise go byte by byte
                        if (col & (col - S1)) != ZERO or i + 8 >= wstop:
                            break
                        low = (col >> S7) - S1  # the bytes below the dropped one
                        img = (img & low) | ((img >> W8_S8) & ~low)
                        n = 7
                    store_u64le(out, out_pos + p, img)
                    p += n
                    sp += swar_count(sph) - (8 - n)
                else:
                    nc = swar_count(col)
                    p += 8 - nc
                    sp += swar_count(sph) - nc
                prev = np.int64(sph >> W8_S63)
                i += 8
            bstop = i + 8
            if bstop > stop:
                bstop = stop
        else:
            bstop = stop
        while i < bstop:
            c = src[U64(i)]
            if c >= 0x80:
                break
            m = map_cp[c]
            s = 1 if m == SPACE else 0
            if write:
                out[U64(out_pos + p)] = m  # a collapsing space is overwritten by the next byte
            p += 1 - (s & prev)
            sp += s & (1 - prev)
            prev = s
            i += 1
        if i >= stop or src[i] >= 0x80:
            return i, p, sp, prev


def emit_codepoint(m, out, out_pos, p, sp, extra, prev, write):
    """Emit image codepoint m (eager state, see above); returns the new (p, sp, extra, prev). A space is
    only counted here, not stored: it may turn out to be the trailing one, past the document's output;
    the next visible codepoint stores it (or the ASCII loop when it takes over)."""
    if m == SPACE:
        if prev == 0:
            return p + 1, sp + 1, extra, 1
        return p, sp, extra, 1
    if write:
        if prev == 1 and p > 0:
            out[out_pos + p - 1] = SPACE
        n = utf8_put(out, out_pos + p, m)
    else:
        n = utf8_len(m)
    return p + n, sp, extra + n - 1, 0


def normalize_scan(src, start, end, map_off, map_cp, mode, out, out_pos, write, prev):
    """The eager scan of src[start:end] from state prev (1 at a document's start): returns (p, sp, extra,
    prev) before the trailing space is taken back. A document split at chunk_entry boundaries scans as
    its chunks, each from its own entry state: the counts add up, and the last chunk's prev is the
    document's."""
    # With write, stores may run ahead of the output that is certain (a space that a later space
    # collapses, 8 bytes of which the last is dropped): only before ascii_content_end, where more output
    # follows, so they never reach past the span's output (another thread's document or chunk).
    fast_end = end
    if write:
        fast_end = ascii_content_end(src, start, end, map_cp)
    p = 0
    sp = 0
    extra = 0
    i = start
    while i < end:
        if i < fast_end and src[i] < 0x80:
            i, p, sp, prev = ascii_run(src, i, fast_end, mode, map_cp, out, out_pos, p, sp, prev, write)
            continue
        cp, step = utf8_decode(src, i, end)
        i += step
        for j in range(map_off[cp], map_off[cp + 1]):
            p, sp, extra, prev = emit_codepoint(map_cp[j], out, out_pos, p, sp, extra, prev, write)
    return p, sp, extra, prev


def normalize_span(src, start, end, map_off, map_cp, mode, out, out_pos, write):
    """normalize_doc with the ASCII fast paths chosen by the caller: mode = ascii_mode(map_cp), with
    MODE_BLOCKS added on the CPU, or ASCII_GENERIC (always correct). Kernels over many documents compute
    the mode once per launch and call this."""
    p, sp, extra, prev = normalize_scan(src, start, end, map_off, map_cp, mode, out, out_pos, write, 1)
    if prev == 1 and p > 0:  # the trailing space
        p -= 1
        sp -= 1
    n_words = sp + 1 if p > 0 else 0
    return p, n_words, p - extra


def chunk_entry(src, start, lo, end, map_off, map_cp):
    """Where a chunk of document src[start:end] whose nominal first byte is lo begins, and the scan state
    there: (b, prev) with b the first position >= lo that utf8_decode visits and whose previous codepoint
    has a non-empty image (so prev, "the last image was a space", is read off that image alone), or
    (end, 1) when there is none (an empty chunk). lo == start gives (start, 1). Text ending in ASCII
    answers at once: every ASCII codepoint has a one-codepoint image."""
    if lo <= start:
        return start, 1
    b = lo
    while b < end:
        if utf8_covered(src, start, b, end) == 0:
            a = b - 1
            while a > start and utf8_covered(src, start, a, end) == 1:
                a -= 1
            cp, step = utf8_decode(src, a, end)
            if map_off[cp + 1] > map_off[cp]:
                return b, 1 if map_cp[map_off[cp + 1] - 1] == SPACE else 0
        b += 1
    return end, 1


def normalize_doc(src, start, end, map_off, map_cp, out, out_pos, write):
    """Table-driven normalization of src[start:end] (UTF-8).

    Each codepoint is replaced by its table image map_cp[map_off[c]:map_off[c+1]]; spaces (U+0020,
    which the tables use for every whitespace/control/punctuation-as-space) collapse to one and are
    trimmed at both ends. With write=True the result goes to out[out_pos:] (exactly the bytes that
    write=False counts: nothing past them is touched); with write=False only the sizes are computed (the
    first of two passes that size the output). Returns (bytes, words, codepoints) of the normalized text;
    words are the space-separated runs. ASCII images must be single ASCII codepoints (checked when tables
    load). Spans shorter than SPAN_MODE_MIN skip the 128-entry model check and take the per-byte ASCII
    path; kernels over many documents call normalize_span with the mode computed once instead.
    """
    mode = ASCII_GENERIC
    if end - start >= SPAN_MODE_MIN:
        mode = ascii_mode(map_cp)
    return normalize_span(src, start, end, map_off, map_cp, mode, out, out_pos, write)


def shingle_count(kind_char, n, n_words, n_cps):
    """Number of (not necessarily distinct) shingles of a normalized document."""
    units = n_cps if kind_char else n_words
    return units - n + 1 if units >= n else 0


def minhash_update(sig, a, b, hr):
    """sig[k] = min(sig[k], (a[k]*hr + b[k]) mod p) for k < len(sig); hr < p."""
    for k in range(sig.shape[0]):
        v = permute61(a[k], b[k], hr)
        s = sig[k]
        sig[k] = v if v < s else s  # an unconditional store: LLVM vectorizes the loop over k


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
        if i == end or norm[U64(i)] == SPACE:  # unsigned index: no wraparound guard per byte
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


DEVICE_FUNCTIONS = ["rotl64", "read_u64le", "read_u32le", "xxh64_round", "xxh64_merge", "xxh64_lane",
                    "xxh64_converge", "xxh64_tail", "xxh64", "reduce61", "permute61", "utf8_decode", "utf8_invalid",
                    "utf8_covered", "utf8_invalid_at", "utf8_len", "utf8_put", "ascii_mode_guess", "ascii_word_fits",
                    "ascii_mode", "store_u64le", "swar_in", "swar_spaces", "swar_image", "swar_count",
                    "ascii_content_end", "ascii_space", "ascii_block_stats", "ascii_run", "emit_codepoint",
                    "normalize_scan", "normalize_span", "chunk_entry", "normalize_doc", "shingle_count",
                    "minhash_update", "emit_shingle", "scan_shingles", "shingle_bounds", "band_key",
                    "intersection_sorted", "representative_run"]

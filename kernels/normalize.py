"""Device functions of normalization (policy: gpu_dedup/text/normalize.py; tables:
gpu_dedup/text/unicode_tables.py), compiled with core.py's for both targets by ``_build.build``.

Output state while scanning a document ("eager" emission): p = bytes emitted, sp = spaces emitted,
extra = bytes - codepoints emitted, prev = 1 when the last non-deleted image was a space (or nothing has
been emitted yet). A space image is emitted unless prev is 1, so leading spaces vanish and runs collapse;
the one trailing space this can leave is taken back at the end. Counting this way needs no look-ahead,
which is what lets 8 bytes at a time be counted with a few 64-bit operations.

ASCII bytes (99.8% of the bytes of English text) take fast paths, all identical in output to the table
(ascii_run): a per-byte loop reading the image straight from map_cp (ASCII images are single ASCII
codepoints, so map_off[c] == c for c <= 128; checked when the tables load); when the table's 128 ASCII
images are those of a SWAR model (swar_spaces/swar_image: what every NormalizeConfig produces; ascii_mode
compares all 128), a word loop that classifies and maps 8 bytes with 64-bit arithmetic instead of 8 table
look-ups; and on the CPU (MODE_BLOCKS) a block loop over 64 bytes that LLVM vectorizes. Byte indexes in
the hot loops are unsigned: Numba guards a signed index against negative values (wraparound), which
costs two instructions per byte and keeps LLVM from fusing the 8 byte loads (or stores) of a word into
one. Measured with benchmarks/normalize_bench.py.
"""
import numpy as np

from .core import S1, S3, S7, S32, SPACE, U64, ZERO, read_u64le, utf8_covered, utf8_decode, utf8_len, utf8_put

U8 = np.uint8
ASCII_GENERIC = -1  # ascii_mode: the table's ASCII part is not a SWAR model; use the per-byte loop
MODE_PUNCT = 1      # model bit: ASCII punctuation and symbols -> space (NormalizeConfig.remove_punctuation)
MODE_DIGITS = 2     # model bit: ASCII digits -> '0' (NormalizeConfig.fold_digits)
MODE_BLOCKS = 4     # with a model: also the block loop of ascii_run (the CPU kernels ask for it)
MODE_CASED = 8      # model bit: A-Z stay upper case (NormalizeConfig.lowercase=False)
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
    if map_cp[0x41] == 0x41:
        mode |= MODE_CASED
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
    for the spaces, a-z for A-Z (A-Z themselves with MODE_CASED), with MODE_DIGITS '0' for 1-9, the byte
    itself otherwise."""
    img = w
    if (mode & MODE_CASED) == 0:
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
    lower = U8(0) if (mode & MODE_CASED) != 0 else U8(1)  # 1: A-Z -> a-z in the block loop (branch-free)
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
                            m = U8(c + (U8((c >= U8(0x41)) & (c <= U8(0x5A)) & lower) << U8(5)))  # A-Z -> a-z
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


DEVICE_FUNCTIONS = ["ascii_mode_guess", "ascii_word_fits", "ascii_mode", "store_u64le", "swar_in", "swar_spaces",
                    "swar_image", "swar_count", "ascii_content_end", "ascii_space", "ascii_block_stats", "ascii_run",
                    "emit_codepoint", "normalize_scan", "normalize_span", "chunk_entry", "normalize_doc"]

"""CPU kernels of the n-gram language-model family (``lm.py``'s device functions compiled with ``numba.njit``),
parallel over documents / lines / rows. Same results as ``lm_cuda.py``; the table builders are host-only (the
tables are built once per model on the host and copied to the device).

Document scoring (``lm_score_docs``) is a pipeline per document: the words are read, looked up and given
their n-gram keys LOOKAHEAD tokens ahead of the token being scored, and the table slots of those keys are
prefetched (``prefetch``), so that the lookups of a few tokens are in flight together instead of one cache
miss after another. Measured (benchmarks/perplexity_bench.py, a 5-gram model of 1.07 M n-grams, 64 MB table):
a dependent load into a table of that size costs ~130 ns on this project's machines, independent ones ~7 ns.

Notation: n documents, L lines, T text bytes, W words, M n-grams, V vocabulary words, C table capacity.
"""
import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.core import cgutils
from numba.extending import intrinsic

from . import lm
from ._build import build
from .lm import CBO, HIST, KEY_SEED, U64

# the per-token functions are inlined at Numba's IR level: as calls, each one would increment and decrement
# the reference counts of the arrays it is passed (see core_cpu._INLINE)
_INLINE = {"is_ascii_space", "key_mix", "ngram_chain", "ngram_key", "word_key", "word_slot", "table_find",
           "vocab_find", "token_keys", "score_keys"}
_C = build(lambda fn: njit(cache=False, nogil=True, inline="always" if fn.__name__ in _INLINE else "never")(fn), lm)
c_count_words = _C["count_words"]
c_word_key = _C["word_key"]
c_word_slot = _C["word_slot"]
c_is_ascii_space = _C["is_ascii_space"]
c_ngram_chain = _C["ngram_chain"]
c_ngram_key = _C["ngram_key"]
c_vocab_find = _C["vocab_find"]
c_token_keys = _C["token_keys"]
c_score_keys = _C["score_keys"]
c_start_context = _C["start_context"]

LOOKAHEAD = 8  # tokens between the one scored and the one whose slots are prefetched (4: 1.5x slower, 16: same)
RING = 16      # tokens kept: > LOOKAHEAD, and > MAX_ORDER - 1 (a token's history is read from here)
DOC_GROUP = 32  # documents per parallel iteration of lm_score_docs: they share one set of scratch arrays


@intrinsic
def prefetch(typingctx, arr, idx):
    """Ask the CPU to bring arr[idx] (a 1-d array, an integer index in bounds) into its caches; no effect on
    any value (LLVM's llvm.prefetch: read, high locality, data cache)."""
    if not isinstance(arr, types.Array) or arr.ndim != 1 or not isinstance(idx, types.Integer):
        return None

    def codegen(context, builder, sig, args):
        aryty, idxty = sig.args
        ary = context.make_array(aryty)(context, builder, args[0])
        i = context.cast(builder, args[1], idxty, types.intp)
        ptr = cgutils.get_item_pointer(context, builder, aryty, ary, [i], wraparound=False)
        i32 = ir.IntType(32)
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), [ptr.type, i32, i32, i32]),
                                            "llvm.prefetch.p0")
        builder.call(fn, [ptr, ir.Constant(i32, 0), ir.Constant(i32, 3), ir.Constant(i32, 1)])
        return context.get_dummy_value()

    return types.void(arr, idx), codegen


@njit(inline="always", nogil=True)
def next_token(data, line_off, last, st, vk1, vk2, vids, unk, eos):
    """The next token of a document (lines st[0] .. last-1; st int64 (3,): line, byte position in it, words of
    its sentence so far): (id, position in its sentence, ends its sentence, OOV 0/1); id -1 after the last.
    A line's words, then its </s> when it had any (lm.score_line's sentences)."""
    while st[0] < last:
        i = st[1]
        e = line_off[st[0] + 1]
        while i < e and c_is_ascii_space(data[i]):
            i += 1
        if i < e:
            j = i
            while j < e and not c_is_ascii_space(data[j]):
                j += 1
            st[1] = j
            k1, k2 = c_word_key(data, i, j)
            w = c_vocab_find(vk1, vk2, vids, k1, k2)
            p = st[2]
            st[2] = p + 1
            if w < 0:
                return unk, p, False, 1
            return w, p, False, 0
        p = st[2]
        st[0] += 1
        st[1] = line_off[st[0]]
        st[2] = 0
        if p > 0:
            return eos, p, True, 0
    return -1, 0, False, 0


@njit(parallel=True, cache=True, nogil=True)
def lm_score_docs(data, line_off, doc_lines, vk1, vk2, vids, keys, prob, bo, order, bos, eos, unk,
                  out_lp, out_tok, out_sent, out_oov):
    """Per document d (lines doc_lines[d] .. doc_lines[d+1]-1; line i = data[line_off[i]:line_off[i+1]]):
    out_lp float64 (n,) log10 probability (the float32 sentence sums of lm.score_keys' tokens, added in
    float64), out_tok / out_sent / out_oov int64 (n,). data uint8 (T,); line_off int64 (L+1,); doc_lines
    int64 (n+1,); vk1, vk2 uint64 (Cv,), vids int64 (Cv,) the vocabulary table; keys uint64 (C,), prob, bo
    float32 (C,) the n-gram table. Memory per thread: RING x (HIST + 3) int64 and 16 float32, whatever the
    document's size (the module doc's pipeline)."""
    n = doc_lines.shape[0] - 1
    mask = keys.shape[0] - 1
    cap = order - 1
    for g in prange((n + DOC_GROUP - 1) // DOC_GROUP):
        ids = np.empty(RING, np.int64)
        pos = np.empty(RING, np.int64)
        ends = np.empty(RING, np.bool_)
        kk = np.empty(RING * HIST, np.uint64)
        cbo = np.empty(CBO, np.float32)
        st = np.empty(3, np.int64)
        for d in range(g * DOC_GROUP, min(n, (g + 1) * DOC_GROUP)):
            st[0] = doc_lines[d]
            st[1] = line_off[st[0]]
            st[2] = 0
            last = doc_lines[d + 1]
            made = 0  # tokens read so far
            more = True
            lp = 0.0
            words = 0
            sents = 0
            oovs = 0
            total = np.float32(0.0)
            clen = 0
            t = 0
            while True:
                while more and made <= t + LOOKAHEAD:
                    w, p, end, miss = next_token(data, line_off, last, st, vk1, vk2, vids, unk, eos)
                    if w < 0:
                        more = False
                        break
                    r = made % RING
                    ids[r] = w
                    pos[r] = p
                    ends[r] = end
                    oovs += miss
                    if end:
                        sents += 1
                    else:
                        words += 1
                    hl = c_token_keys(w, ids, (made - 1) % RING, p, cap, bos, kk, r * HIST)
                    for j in range(hl + 1):
                        prefetch(keys, kk[r * HIST + j] & mask)
                    made += 1
                if t >= made:
                    break
                r = t % RING
                p = pos[r]
                if p == 0:
                    clen = c_start_context(bos, keys, bo, cbo)
                    total = np.float32(0.0)
                hlen = p + 1 if p + 1 < cap else cap
                tp, clen = c_score_keys(kk, r * HIST, hlen, cbo, clen, keys, prob, bo)
                total = np.float32(total + tp)
                if ends[r]:
                    lp += float(total)
                t += 1
            out_lp[d] = lp
            out_tok[d] = words + sents
            out_sent[d] = sents
            out_oov[d] = oovs


@njit(parallel=True, cache=True, nogil=True)
def lm_count_words(data, line_off, out):
    """out[i] = words of line i (int64 (L,)); data uint8 (T,), line_off int64 (L+1,)."""
    for i in prange(line_off.shape[0] - 1):
        out[i] = c_count_words(data, line_off[i], line_off[i + 1])


@njit(parallel=True, cache=True, nogil=True)
def lm_word_hashes(data, line_off, word_off, out_start, out_end, out_h1, out_h2):
    """Line i's words go to positions word_off[i] .. word_off[i+1]-1 (word_off int64 (L+1,), the cumulated
    lm_count_words): byte span [out_start, out_end) int64 (W,) and word key (lm.word_key) out_h1, out_h2
    uint64 (W,)."""
    for i in prange(line_off.shape[0] - 1):
        k = word_off[i]
        j = line_off[i]
        end = line_off[i + 1]
        while j < end:
            while j < end and c_is_ascii_space(data[j]):
                j += 1
            if j >= end:
                break
            s = j
            while j < end and not c_is_ascii_space(data[j]):
                j += 1
            h1, h2 = c_word_key(data, s, j)
            out_start[k] = s
            out_end[k] = j
            out_h1[k] = h1
            out_h2[k] = h2
            k += 1


@njit(parallel=True, cache=True, nogil=True)
def lm_ngram_keys(rows, out):
    """out[i] = n-gram key of rows[i] (int64 (M, n), words in text order) -> uint64 (M,)."""
    n = rows.shape[1]
    for i in prange(rows.shape[0]):
        c = KEY_SEED
        for j in range(n - 1, -1, -1):
            c = c_ngram_chain(c, rows[i, j])
        out[i] = c_ngram_key(c)


@njit(cache=True, nogil=True)
def lm_build_table(keys_in, prob_in, bo_in, keys, prob, bo):
    """Insert n-gram keys_in[i] uint64 (M,) with prob_in / bo_in float32 (M,) into the empty table keys uint64
    (C,), prob, bo float32 (C,) (C a power of two >= 2 M). Returns -1, or the first i whose key is already in
    the table (a duplicate n-gram, or a 64-bit key collision). Serial: built once per model."""
    mask = U64(keys.shape[0] - 1)
    for i in range(keys_in.shape[0]):
        key = keys_in[i]
        s = key & mask
        while keys[s] != U64(0) and keys[s] != key:
            s = (s + U64(1)) & mask
        if keys[s] == key:
            return i
        keys[s] = key
        prob[s] = prob_in[i]
        bo[s] = bo_in[i]
    return -1


@njit(cache=True, nogil=True)
def lm_build_vocab(h1, h2, ids, vk1, vk2, vids):
    """Insert word keys (h1[i], h2[i]) uint64 (V,) -> ids[i] int64 into the empty table vk1, vk2 uint64 (C,),
    vids int64 (C,) (C a power of two >= 2 V; probes from lm.word_slot, vk2 == 0 empty). Returns -1, or the
    first i whose key is already present."""
    mask = U64(vk1.shape[0] - 1)
    for i in range(h1.shape[0]):
        s = c_word_slot(h1[i], h2[i]) & mask
        while vk2[s] != U64(0) and not (vk1[s] == h1[i] and vk2[s] == h2[i]):
            s = (s + U64(1)) & mask
        if vk2[s] != U64(0):
            return i
        vk1[s] = h1[i]
        vk2[s] = h2[i]
        vids[s] = ids[i]
    return -1


@njit(parallel=True, cache=True, nogil=True)
def lm_span_hashes(data, starts, ends, out_h1, out_h2):
    """Word keys of the spans data[starts[i]:ends[i]] (int64 (V,)) -> out_h1, out_h2 uint64 (V,)."""
    for i in prange(starts.shape[0]):
        h1, h2 = c_word_key(data, starts[i], ends[i])
        out_h1[i] = h1
        out_h2[i] = h2

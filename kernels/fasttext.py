"""Device code of fastText supervised inference (``predict``), equal to the ``fasttext`` package's own.

The plain-Python functions in DEVICE_FUNCTIONS are compiled twice by ``_build.build``: with ``numba.njit`` for
the CPU kernels (``fasttext_cpu.py``) and with ``cuda.jit(device=True)`` for the GPU kernels
(``fasttext_cuda.py``), so both targets run one source and give bit-identical arrays.

What fastText does, and so what these functions do (facebookresearch/fastText, src/dictionary.cc, loss.cc,
densematrix.cc, quantmatrix.cc, productquantizer.cc; /work/shared/research/filtering.md section 1):
- tokens: the bytes between separators (space \\n \\r \\t \\v \\f \\0), then one end-of-sentence token
  ``</s>`` (the Python package appends "\\n"); a literal ``</s>`` token in the text ends the line early.
- token hash: 32-bit FNV-1a over the bytes, each byte sign-extended first (signed char).
- features of a word-type token, in order: its vocabulary row (if in vocabulary), then (unless it is
  ``</s>`` or maxn <= 0) the hashed character n-grams of "<" + token + ">" (lengths minn..maxn in code
  points, start bytes that are UTF-8 continuation bytes skipped); label-type tokens (in-vocabulary labels,
  out-of-vocabulary tokens starting with the label prefix) are not features. After all tokens: the word
  n-grams (n = 2..wordNgrams) over the int32 token hashes, sign-extended to 64 bits.
- hashed ids go through ``pushHash``: row nwords + id (unpruned), dropped (pruned, nothing kept) or remapped
  (pruned: the kept bucket ids map to new rows).
- hidden = f32 sum of the rows in feature order, times f32(1 / count); then softmax / hierarchical softmax
  (DFS) / one-vs-all or negative-sampling sigmoids (the 512-entry table) and the top-k heap, replaying
  libstdc++'s push_heap / pop_heap / sort_heap so that ties come out in fastText's order.

Bit-exactness rules: every sum is sequential f32 in fastText's order; products go through ``ft_mul`` (the GPU
build replaces it with ``__fmul_rn`` so that the CUDA compiler cannot fuse it with the next add, which
x86 SSE code never does); ``exp`` and ``log`` are evaluated in f64 and rounded to f32. fastText's ``expf``
(glibc, hierarchical softmax and the returned probability) agrees with that rounding except for about 6 in
10,000 arguments, where it differs by one f32 ulp (a relative 6e-8 of a probability).

Model parameters travel as one int64 array ``P`` (layout below, filled by gpu_dedup/filters/fasttext.py).
"""
import math

import numpy as np

U64 = np.uint64
U8 = np.uint8
U32 = np.uint32
F32 = np.float32
F64 = np.float64
FNV_OFFSET = U64(2166136261)
FNV_PRIME = U64(16777619)
MASK32 = U64(0xFFFFFFFF)
SIGN_BYTE = U64(0xFFFFFF00)
SIGN_WORD = U64(0xFFFFFFFF00000000)
BIT31 = U64(0x80000000)
NGRAM_MUL = U64(116049371)
F0 = F32(0.0)
F1 = F32(1.0)
F2 = F32(2.0)
F8 = F32(8.0)
F_M8 = F32(-8.0)
F512 = F32(512.0)
LOG_EPS = 1e-5           # std_log(x) = log(x + 1e-5) in double (loss.cc)
MAX_WORD_NGRAMS = 16     # ring of token hashes for word n-grams (a fixed-size local array on the GPU)
KSUB = 256               # centroids per product-quantizer sub-quantizer (8-bit codes)

# P layout (int64): vocabulary / features ...
P_NWORDS, P_BUCKET, P_MINN, P_MAXN, P_WORDNGRAMS, P_PRUNE, P_DIM = 0, 1, 2, 3, 4, 5, 6
P_IN_QUANT, P_IN_QNORM, P_IN_NSUBQ, P_IN_DSUB, P_IN_LASTDSUB = 7, 8, 9, 10, 11
P_EOS_ID, P_TABLE_MASK = 12, 13
P_BUCKET_MAGIC = 14      # fastmod's 2^64 // bucket + 1 as the int64 of the same bits (0 without buckets)
# ... and the output layer
P_LOSS, P_OSZ, P_OUT_QUANT, P_OUT_QNORM, P_OUT_NSUBQ, P_OUT_DSUB, P_OUT_LASTDSUB = 15, 16, 17, 18, 19, 20, 21
P_SIZE = 22
LOSS_HS, LOSS_NS, LOSS_SOFTMAX, LOSS_OVA = 1, 2, 3, 4   # fastText's loss_name enum
PRUNE_NONE, PRUNE_ALL, PRUNE_MAP = -1, 0, 1
# token kinds the GPU's token lists carry (fasttext_cuda.ft_token_chunks; bits): a word-type token (a feature
# and a word n-gram member), a "</s>" (a document's first one ends its line)
KIND_WORD, KIND_EOS = 1, 2


# ----------------------------------------------------------------------------------------------------
# Arithmetic
# ----------------------------------------------------------------------------------------------------

def ft_mul(a, b):
    """f32 product, rounded on its own (never fused into an FMA: the GPU build swaps in __fmul_rn)."""
    return a * b


def ft_exp(x):
    """exp of an f32, evaluated in f64 and rounded to f32."""
    return F32(math.exp(F64(x)))


def ft_std_log(x):
    """fastText's std_log: f32(log(double(x) + 1e-5)) for an f32 x."""
    return F32(math.log(F64(x) + LOG_EPS))


def ft_sigmoid_table(x, sig):
    """fastText's table sigmoid (Loss::sigmoid): 0 below -8, 1 above 8, else sig[int((x + 8) * 512 / 8 / 2)],
    all in f32; sig: f32 (513,)."""
    if x < F_M8:
        return F0
    if x > F8:
        return F1
    return sig[np.int64((x + F8) * F512 / F8 / F2)]


# ----------------------------------------------------------------------------------------------------
# Bytes, hashes, lookups
# ----------------------------------------------------------------------------------------------------

def ft_is_sep(c):
    """fastText's token separators: space, \\n, \\r, \\t, \\v, \\f, \\0."""
    return c == 0x20 or c == 0x0A or c == 0x0D or c == 0x09 or c == 0x0B or c == 0x0C or c == 0


def ft_fnv_step(h, c):
    """One FNV-1a step over byte c with fastText's sign extension (uint64 holding a 32-bit hash)."""
    x = U64(c)
    if c >= 0x80:
        x = x | SIGN_BYTE
    return ((h ^ x) * FNV_PRIME) & MASK32


def ft_vbyte(data, ts, n, i):
    """Byte i of "<" + data[ts:ts + n - 2] + ">" (n = token length + 2)."""
    if i == 0:  # uint8 like the data bytes: ft_fnv_step then has one signature (uint64, uint8) on the CPU
        return U8(0x3C)
    if i == n - 1:
        return U8(0x3E)
    return data[ts + i - 1]


def ft_is_eos(data, ts, te):
    """True when data[ts:te] is the end-of-sentence token "</s>"."""
    return (te - ts == 4 and data[ts] == 0x3C and data[ts + 1] == 0x2F and data[ts + 2] == 0x73
            and data[ts + 3] == 0x3E)


def ft_vocab_find(data, ts, te, h, vbytes, voff, vhash, vtable, mask):
    """Entry id of the token data[ts:te] (hash h) in the vocabulary, or -1. vtable: int32 open-addressing
    table (power-of-two size, linear probing from h & mask) of entry ids; an entry matches only when its
    hash, length and every byte are equal (exact, never probabilistic)."""
    ln = te - ts
    slot = np.int64(h & mask)
    m = np.int64(mask)
    while True:
        e = vtable[slot]
        if e < 0:
            return -1
        if vhash[e] == h and voff[e + 1] - voff[e] == ln:
            o = voff[e]
            same = True
            for t in range(ln):
                if vbytes[o + t] != data[ts + t]:
                    same = False
                    break
            if same:
                return np.int64(e)
        slot = (slot + 1) & m


def ft_popcount32(x):
    """Number of set bits of a 32-bit value (held in a uint64)."""
    x = x - ((x >> U64(1)) & U64(0x55555555))
    x = (x & U64(0x33333333)) + ((x >> U64(2)) & U64(0x33333333))
    x = (x + (x >> U64(4))) & U64(0x0F0F0F0F)
    return ((x * U64(0x01010101)) & MASK32) >> U64(24)


def ft_prune_find(ptab, pvals, key):
    """New index of hashed bucket ``key`` in a pruned model, or -1. ptab uint32 (ceil(bucket / 32), 2):
    [w, 0] = bitmap of the kept bucket ids 32w..32w+31, [w, 1] = number of kept ids below 32w; pvals int32
    (kept,): the new indexes in bucket-id order. One cache line answers the (usual) miss; a hit is
    pvals[rank]."""
    w = key >> 5
    bits = U64(ptab[w, 0])
    bit = U64(1) << U64(key & 31)
    if (bits & bit) == 0:
        return -1
    return np.int64(pvals[np.int64(ptab[w, 1]) + np.int64(ft_popcount32(bits & (bit - U64(1))))])


def ft_push_hash(P, pkeys, pvals, hid):
    """Input row of hashed bucket hid (fastText's pushHash), or -1 when a pruned model dropped it
    (pkeys: the ptab of ft_prune_find)."""
    return ft_push_row(P[P_PRUNE], P[P_NWORDS], pkeys, pvals, hid)


def ft_push_row(mode, nwords, pkeys, pvals, hid):
    """``ft_push_hash`` with P's prune mode and vocabulary size already read (a loop over n-grams reads them
    once: Numba cannot tell that the hidden vector's stores leave P unchanged)."""
    if mode == PRUNE_ALL:
        return -1
    if mode == PRUNE_MAP:
        hid = ft_prune_find(pkeys, pvals, hid)
        if hid < 0:
            return -1
    return nwords + hid


def ft_fastmod32(a, d, magic):
    """a % d for 32-bit a and d >= 1 (uint64 values) without a division: Lemire's fastmod, magic =
    2^64 // d + 1 (uint64, wrapped). Exact for every such a and d (the 128-bit product's high word is
    formed from two 32 x 32-bit products, neither of which overflows)."""
    low = magic * a
    return ((low >> U64(32)) * d + (((low & MASK32) * d) >> U64(32))) >> U64(32)


def ft_is_word(data, ts, te, wid, vtype, prefix):
    """Token type: True for a word, False for a label (in-vocabulary entry of type label, or an unknown
    token that starts with the label prefix)."""
    if wid >= 0:
        return vtype[wid] == 0
    n = prefix.shape[0]
    if te - ts < n:
        return True
    for t in range(n):
        if data[ts + t] != prefix[t]:
            return True
    return False


# ----------------------------------------------------------------------------------------------------
# Hidden vector
# ----------------------------------------------------------------------------------------------------

def ft_pq_centroid(m, c, nsubq, dsub, lastdsub):
    """(offset, length) in the centroid array of code ``c`` of sub-quantizer ``m``: fastText's
    get_centroids (256 centroids of dsub floats per sub-quantizer; the last one's are lastdsub long)."""
    if m == nsubq - 1:
        return m * KSUB * dsub + c * lastdsub, lastdsub
    return (m * KSUB + c) * dsub, dsub


def ft_add_row(hrow, P, win, wcodes, wcent, wnc, wncent, row):
    """hrow += input row ``row``: dense (win f32 (m, dim)) or product-quantized (wcodes uint8 (m, nsubq),
    wcent f32 (dim * 256,), norms wnc uint8 (m,) / wncent f32 (256,) when qnorm), as fastText adds it."""
    dim = P[P_DIM]
    if P[P_IN_QUANT] == 0:
        for j in range(dim):
            hrow[j] = hrow[j] + win[row, j]
        return
    for j in range(dim):
        hrow[j] = hrow[j] + ft_row_value(P, win, wcodes, wcent, wnc, wncent, row, j)


def ft_row_value(P, win, wcodes, wcent, wnc, wncent, row, j):
    """Element j of input row ``row`` as fastText adds it to the hidden vector (f32): win[row, j] (dense), or
    for a product-quantized matrix f32(norm * centroid value) of the sub-quantizer holding dimension j (the
    GPU's threads own dimensions, kernels/fasttext_cuda.py ``ft_doc_sum``)."""
    if P[P_IN_QUANT] == 0:
        return win[row, j]
    alpha = F1
    if P[P_IN_QNORM] != 0:
        alpha = wncent[wnc[row]]
    nsubq = P[P_IN_NSUBQ]
    dsub = P[P_IN_DSUB]
    m = j // dsub
    if m > nsubq - 1:
        m = nsubq - 1
    base, _ = ft_pq_centroid(m, np.int64(wcodes[row, m]), nsubq, dsub, P[P_IN_LASTDSUB])
    return ft_mul(alpha, wcent[base + j - m * dsub])


def ft_subwords(data, ts, te, i0, i1, P, pkeys, pvals, win, wcodes, wcent, wnc, wncent, hrow, mode, out, pos):
    """The character n-gram rows of token data[ts:te] (computeSubwords on "<" + token + ">", through
    pushHash) that start at bytes i0..i1-1 of "<" + token + ">" (all: 0, te - ts + 2; the GPU lists a long
    token's by pieces): mode 0 adds them to hrow, 1 only counts them, 2 writes them to out[pos:]. Returns
    how many. Work: (i1 - i0) * (maxn - minn + 1) n-grams of <= maxn code points."""
    n = te - ts + 2
    # P's fields read once: the stores into hrow would make Numba read them again for every n-gram
    minn = P[P_MINN]
    maxn = P[P_MAXN]
    bucket = U64(P[P_BUCKET])
    magic = U64(P[P_BUCKET_MAGIC])
    prune = P[P_PRUNE]
    nwords = P[P_NWORDS]
    dense = P[P_IN_QUANT] == 0
    dim = P[P_DIM]
    count = 0
    for i in range(i0, i1):
        if (ft_vbyte(data, ts, n, i) & 0xC0) == 0x80:
            continue
        h = FNV_OFFSET
        j = i
        ln = 1
        while j < n and ln <= maxn:
            h = ft_fnv_step(h, ft_vbyte(data, ts, n, j))
            j += 1
            while j < n and (ft_vbyte(data, ts, n, j) & 0xC0) == 0x80:
                h = ft_fnv_step(h, ft_vbyte(data, ts, n, j))
                j += 1
            if ln >= minn and not (ln == 1 and (i == 0 or j == n)):
                # fastText's 32-bit h % bucket, by multiplication (a division costs more than the rest of an n-gram)
                row = ft_push_row(prune, nwords, pkeys, pvals, np.int64(ft_fastmod32(h, bucket, magic)))
                if row >= 0:
                    if mode == 0:
                        if dense:
                            for t in range(dim):
                                hrow[t] = hrow[t] + win[row, t]
                        else:
                            ft_add_row(hrow, P, win, wcodes, wcent, wnc, wncent, row)
                    elif mode == 2:
                        out[pos + count] = row
                    count += 1
            ln += 1
    return count


def ft_eos_hash():
    """fastText hash of "</s>"."""
    h = FNV_OFFSET
    h = ft_fnv_step(h, U8(0x3C))  # uint8 bytes, as every other call (one CPU compile of ft_fnv_step)
    h = ft_fnv_step(h, U8(0x2F))
    h = ft_fnv_step(h, U8(0x73))
    return ft_fnv_step(h, U8(0x3E))


# ----------------------------------------------------------------------------------------------------
# Output layer
# ----------------------------------------------------------------------------------------------------

def ft_out_dot(hrow, P, ow, ocodes, ocent, onc, oncent, r):
    """Output row r . hidden, as fastText's dotRow (dense) or mulcode (quantized, times the row's norm)."""
    if P[P_OUT_QUANT] == 0:
        d = F0
        for j in range(P[P_DIM]):
            d = d + ft_mul(ow[r, j], hrow[j])
        return d
    norm = F1
    if P[P_OUT_QNORM] != 0:
        norm = oncent[onc[r]]
    nsubq = P[P_OUT_NSUBQ]
    dsub = P[P_OUT_DSUB]
    res = F0
    for m in range(nsubq):
        base, d = ft_pq_centroid(m, np.int64(ocodes[r, m]), nsubq, dsub, P[P_OUT_LASTDSUB])
        for t in range(d):
            res = res + ft_mul(hrow[m * dsub + t], ocent[base + t])
    return ft_mul(res, norm)


def ft_softmax_norm(hrow, P, ow, ocodes, ocent, onc, oncent):
    """(max logit, z = f32 sum of exp(logit - max)) of fastText's softmax."""
    osz = P[P_OSZ]
    mx = ft_out_dot(hrow, P, ow, ocodes, ocent, onc, oncent, 0)
    for i in range(osz):
        v = ft_out_dot(hrow, P, ow, ocodes, ocent, onc, oncent, i)
        if mx < v:
            mx = v
    z = F0
    for i in range(osz):
        z = z + ft_exp(ft_out_dot(hrow, P, ow, ocodes, ocent, onc, oncent, i) - mx)
    return mx, z


def ft_hs_sigmoid(x):
    """Hierarchical softmax's exact sigmoid: f32(1. / (1 + expf(-x)))."""
    return F32(1.0 / F64(F1 + ft_exp(-x)))


def ft_heap_up(sc, ix, hole, top, vs, vi):
    """libstdc++ __push_heap with fastText's comparePairs (greater score first: a min-heap on score)."""
    parent = (hole - 1) // 2
    while hole > top and sc[parent] > vs:
        sc[hole] = sc[parent]
        ix[hole] = ix[parent]
        hole = parent
        parent = (hole - 1) // 2
    sc[hole] = vs
    ix[hole] = vi


def ft_heap_adjust(sc, ix, hole, n, vs, vi):
    """libstdc++ __adjust_heap."""
    top = hole
    second = hole
    while second < (n - 1) // 2:
        second = 2 * (second + 1)
        if sc[second] > sc[second - 1]:
            second -= 1
        sc[hole] = sc[second]
        ix[hole] = ix[second]
        hole = second
    if (n & 1) == 0 and second == (n - 2) // 2:
        second = 2 * (second + 1)
        sc[hole] = sc[second - 1]
        ix[hole] = ix[second - 1]
        hole = second - 1
    ft_heap_up(sc, ix, hole, top, vs, vi)


def ft_heap_pop(sc, ix, n):
    """std::pop_heap over the first n entries: the top moves to n - 1."""
    if n > 1:
        last = n - 1
        vs = sc[last]
        vi = ix[last]
        sc[last] = sc[0]
        ix[last] = ix[0]
        ft_heap_adjust(sc, ix, 0, last, vs, vi)


def ft_heap_offer(sc, ix, n, k, score, idx):
    """Push (score, idx) (std::push_heap), popping the smallest when the heap exceeds k; returns the size."""
    sc[n] = score
    ix[n] = idx
    n += 1
    ft_heap_up(sc, ix, n - 1, 0, sc[n - 1], ix[n - 1])
    if n > k:
        ft_heap_pop(sc, ix, n)
        n -= 1
    return n


def ft_hs_dfs(hrow, P, ow, ocodes, ocent, onc, oncent, tleft, tright, k, thr_log, snode, sscore, sc, ix):
    """Hierarchical softmax prediction: fastText's recursive DFS from the root, as an explicit stack
    (snode int32 / sscore f32, depth + 2 entries) visiting nodes in the same order; returns the heap size."""
    osz = P[P_OSZ]
    n = 0
    snode[0] = 2 * osz - 2
    sscore[0] = F0
    sp = 1
    while sp > 0:
        sp -= 1
        node = np.int64(snode[sp])
        score = sscore[sp]
        if score < thr_log:
            continue
        if n == k and score < sc[0]:
            continue
        if tleft[node] == -1 and tright[node] == -1:
            n = ft_heap_offer(sc, ix, n, k, score, node)
            continue
        f = ft_hs_sigmoid(ft_out_dot(hrow, P, ow, ocodes, ocent, onc, oncent, node - osz))
        snode[sp] = tright[node]
        sscore[sp] = score + ft_std_log(f)
        snode[sp + 1] = tleft[node]
        sscore[sp + 1] = score + ft_std_log(F32(1.0 - F64(f)))
        sp += 2
    return n


def ft_doc_predict(hrow, P, ow, ocodes, ocent, onc, oncent, sig, tleft, tright, k, thr, snode, sscore, sc, ix):
    """Top-k of one document as fastText's Loss::predict: sc (f32 (k+1,)) / ix (int32 (k+1,)) receive the
    predictions best first, sc holding the reported probability exp(std_log(p)); returns their number."""
    loss = P[P_LOSS]
    osz = P[P_OSZ]
    n = 0
    if loss == LOSS_HS:
        n = ft_hs_dfs(hrow, P, ow, ocodes, ocent, onc, oncent, tleft, tright, k, ft_std_log(thr),
                      snode, sscore, sc, ix)
    else:
        mx = F0
        z = F1
        if loss == LOSS_SOFTMAX:
            mx, z = ft_softmax_norm(hrow, P, ow, ocodes, ocent, onc, oncent)
        for i in range(osz):
            v = ft_out_dot(hrow, P, ow, ocodes, ocent, onc, oncent, i)
            if loss == LOSS_SOFTMAX:
                p = ft_exp(v - mx) / z
            else:
                p = ft_sigmoid_table(v, sig)
            if p < thr:
                continue
            lp = ft_std_log(p)
            if n == k and lp < sc[0]:
                continue
            n = ft_heap_offer(sc, ix, n, k, lp, i)
    m = n
    while m > 1:   # std::sort_heap: best first
        ft_heap_pop(sc, ix, m)
        m -= 1
    for t in range(n):
        sc[t] = ft_exp(sc[t])
    return n


def ft_doc_label_prob(hrow, P, ow, ocodes, ocent, onc, oncent, sig, label, pnode, pright):
    """The probability fastText's predict reports for output ``label`` (exp(std_log(p))): softmax output,
    one-vs-all sigmoid, or for hierarchical softmax the path sum from the root (pnode: internal node rows,
    pright: 1 where the path takes the right child, both root first)."""
    loss = P[P_LOSS]
    if loss == LOSS_HS:
        score = F0
        for t in range(pnode.shape[0]):
            f = ft_hs_sigmoid(ft_out_dot(hrow, P, ow, ocodes, ocent, onc, oncent, np.int64(pnode[t])))
            if pright[t] != 0:
                score = score + ft_std_log(f)
            else:
                score = score + ft_std_log(F32(1.0 - F64(f)))
        return ft_exp(score)
    v = ft_out_dot(hrow, P, ow, ocodes, ocent, onc, oncent, label)
    if loss == LOSS_SOFTMAX:
        mx, z = ft_softmax_norm(hrow, P, ow, ocodes, ocent, onc, oncent)
        p = ft_exp(v - mx) / z
    else:
        p = ft_sigmoid_table(v, sig)
    return ft_exp(ft_std_log(p))


DEVICE_FUNCTIONS = ["ft_mul", "ft_exp", "ft_std_log", "ft_sigmoid_table", "ft_is_sep", "ft_fnv_step", "ft_vbyte",
                    "ft_is_eos", "ft_vocab_find", "ft_popcount32", "ft_prune_find", "ft_push_hash", "ft_push_row",
                    "ft_fastmod32", "ft_is_word",
                    "ft_pq_centroid", "ft_add_row", "ft_row_value", "ft_subwords", "ft_eos_hash", "ft_out_dot", "ft_softmax_norm", "ft_hs_sigmoid", "ft_heap_up",
                    "ft_heap_adjust", "ft_heap_pop", "ft_heap_offer", "ft_hs_dfs", "ft_doc_predict", "ft_doc_label_prob"]

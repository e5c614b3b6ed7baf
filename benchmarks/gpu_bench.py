"""GPU throughput per stage against the measured H200 ceilings, with the CPU path timed in the same run.

The corpus is made on the device (counter-based hashing with array-module operations only: no custom
kernel, no host round trip): documents of about --words words (uniform between half and 1.5 times that)
drawn Zipf-like from a 30k-word vocabulary with some capitals, punctuation and non-ASCII letters; every
fifth document is a copy of an earlier one with 0-30 % of its words replaced. Stages, in this order:

  0  compile + warm-up: every kernel is launched once on a tiny corpus (GPU and CPU), timed apart;
  1  signatures from UTF-8 bytes already on the device (fineweb preset, K=112), in batches sized as the
     pipeline sizes them: normalize, MinHash, plus exact hashes and band keys; the CPU runs the same on
     the first --cpu-docs documents, and its results are checked equal to the GPU's;
  3s the whole default pipeline on the first --cpu-docs documents, CPU and GPU: GPU/CPU ratio, decisions
     checked equal;
  3  the whole default pipeline on --pipeline-docs documents from an in-memory table, decisions and
     deduplicated/ written (the count is lowered to what fits --budget, estimated from stage 3s);
  2  Parquet on local disk -> signatures (read, H2D, normalize, MinHash) over at most --parquet-mb of
     text, written only now; then, when the budget allows, 3p the whole pipeline from that file.
Targets (issue): 1 >= 3 M docs/s, 2 >= 1 M docs/s, 3 >= 500 k docs/s.

After every stage --out gets gpu_bench.json (rows, checks, the stage running now) and
gpu_bench_table.txt, so a run stopped by a timeout still leaves the stages it finished. stdout gets
the table once, at the end.

    python benchmarks/gpu_bench.py --out $OUT                   # on the GPU machine (device_run.sh)
    NUMBA_ENABLE_CUDASIM=1 python benchmarks/gpu_bench.py --small --out /tmp/x     # script check
    NUMBA_ENABLE_CUDASIM=1 python benchmarks/gpu_bench.py --docs 200 --cpu-docs 100 --words 40 --out /tmp/x
(add GPU_DEDUP_STRICT_DEVICE=1 to run the device side under the strict CuPy stand-in).
"""
from __future__ import annotations

import argparse
import math
import os
import shutil
import sys
import tempfile
import time
import traceback
import warnings

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from device_report import bench_row, format_rows, write_json_atomic, write_text_atomic  # noqa: E402

# the shared device functions rely on uint64 wrap-around, which numpy scalars (simulator) warn about
warnings.filterwarnings("ignore", "overflow encountered", RuntimeWarning)

VOCAB = 30000
DUP_PERIOD = 5  # every fifth document is a copy of an earlier one
EDIT_RATES = (0.0, 0.02, 0.05, 0.1, 0.3)  # 0.0: exact copies, which the exact stage must catch
GEN_CHUNK = 125_000  # documents generated at a time: bounds the generator's temporaries (~10 GB at 400 words)
_SALT_SRC, _SALT_ROW, _SALT_LEN, _SALT_RATE, _SALT_TOK, _SALT_EDIT, _SALT_REPL = (np.uint64(s) for s in range(1, 8))


def _mix(x):
    """SplitMix64 finalizer of a uint64 array: a counter-based generator, so a document's words depend on
    its index only (no generator state, the same on any backend and in any chunking)."""
    z = x * np.uint64(0x9E3779B97F4A7C15) + np.uint64(0x632BE59BD9B4E019)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def _unit(xp, h):
    """Uniform float64 in [0, 1) from a uint64 hash."""
    return (h >> np.uint64(11)).astype(xp.float64) * (1.0 / (1 << 53))


def make_vocab(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(bytes uint8, offsets int64) of VOCAB words: 1-12 lowercase letters, 10 % capitalised, 6 % with a
    trailing comma or full stop, 3 % with a non-ASCII letter (the normalizer's slow path)."""
    rng = np.random.default_rng(seed)
    lens = np.clip(rng.poisson(4.5, VOCAB), 1, 12)
    letters = rng.integers(ord("a"), ord("z") + 1, int(lens.sum()), dtype=np.uint8).tobytes().decode()
    ends = np.cumsum(lens)
    accents = ["é", "ü", "ß", "ñ", "ø", "я", "ж", "日本", "語", "ł"]
    words = []
    for i, (e, n) in enumerate(zip(ends.tolist(), lens.tolist())):
        w = letters[e - n:e]
        r = rng.random(3)
        if r[0] < 0.03:
            j = int(rng.integers(0, n))
            w = w[:j] + accents[i % len(accents)] + w[j + 1:]
        if r[1] < 0.10:
            w = w[:1].upper() + w[1:]
        if r[2] < 0.06:
            w += ",." [i % 2]
        words.append(w.encode())
    off = np.zeros(VOCAB + 1, np.int64)
    np.cumsum([len(w) for w in words], out=off[1:])
    return np.frombuffer(b"".join(words), np.uint8), off


def make_corpus(xp, device: str, n: int, words: int, seed: int = 0, rates=EDIT_RATES):
    """(data uint8, offsets int64 (n+1,)) of n documents made on the device with array operations only.
    Words are separated by one space and every document ends with a newline."""
    from gpu_dedup.runtime.device import repeat_index, to_device

    vocab_h, voff_h = make_vocab(seed)
    vocab = to_device(np.concatenate([vocab_h, np.zeros(1, np.uint8)]), device)  # + pad: see `gather` below
    voff = to_device(voff_h[:-1], device)
    vlen = to_device(np.diff(voff_h), device)
    rate_of = to_device(np.asarray(rates, np.float64), device)
    seed64 = np.uint64(seed) << np.uint64(40)
    datas, offs, base = [], [to_device(np.zeros(1, np.int64), device)], 0
    for a in range(0, n, GEN_CHUNK):
        b = min(a + GEN_CHUNK, n)
        d = xp.arange(a, b, dtype=xp.uint64)
        dup = (d % np.uint64(DUP_PERIOD)) == np.uint64(DUP_PERIOD - 1)
        # the source is an earlier document that is not a copy itself: 5q + r with r < 4, below d
        q = _mix(d ^ _SALT_SRC ^ seed64) % xp.maximum(d // np.uint64(DUP_PERIOD), np.uint64(1))
        src = q * np.uint64(DUP_PERIOD) + (_mix(d ^ _SALT_ROW ^ seed64) % np.uint64(DUP_PERIOD - 1))
        eff = xp.where(dup, src, d)  # whose words this document has
        nlen = (words // 2 + _mix(eff ^ _SALT_LEN ^ seed64) % np.uint64(words + 1)).astype(xp.int64)
        rate = xp.where(dup, rate_of[(_mix(d ^ _SALT_RATE ^ seed64) % np.uint64(len(rates))).astype(xp.int64)], 0.0)
        # one entry per word of the chunk
        doc = repeat_index(xp, nlen)
        ends = xp.cumsum(nlen)
        pos = (xp.arange(int(ends[-1]), dtype=xp.int64) - (ends - nlen)[doc]).astype(xp.uint64)
        key = eff[doc] * np.uint64(1 << 20) + pos
        u = _unit(xp, _mix(key ^ _SALT_TOK ^ seed64))
        tok = xp.clip(xp.floor(xp.exp(u * math.log(VOCAB))).astype(xp.int64) - 1, 0, VOCAB - 1)  # ~ Zipf
        ekey = d[doc] * np.uint64(1 << 20) + pos
        edit = _unit(xp, _mix(ekey ^ _SALT_EDIT ^ seed64)) < rate[doc]
        tok = xp.where(edit, (_mix(ekey ^ _SALT_REPL ^ seed64) % np.uint64(VOCAB)).astype(xp.int64), tok)
        del u, key, ekey, edit, pos
        # bytes: each word takes its letters plus one separator byte
        wl = vlen[tok]
        tend = xp.cumsum(wl + 1)
        tstart = tend - (wl + 1)
        total = int(tend[-1])
        mark = xp.zeros(total, xp.int32)
        mark[tstart[1:]] = 1
        word_of = xp.cumsum(mark, dtype=xp.int32)  # word index of every byte (< 2^31 words per chunk)
        del mark
        within = xp.arange(total, dtype=xp.int64) - tstart[word_of]
        # gather: the separator slot reads the next word's first byte (or the pad), overwritten below
        out = vocab[voff[tok[word_of]] + within]
        del within, word_of
        sep = tstart + wl
        out[sep] = 32
        last = ends - 1
        out[sep[last]] = 10
        datas.append(out)
        offs.append(tend[last] + base)
        base += total
    data = xp.concatenate(datas) if len(datas) > 1 else datas[0]
    return data, xp.concatenate(offs)


def make_ids(lo: int, hi: int) -> pa.Array:
    """Ids "d00000042" for rows lo..hi-1, built as one fixed-width byte matrix (no Python strings)."""
    n = hi - lo
    width = max(8, len(str(max(hi - 1, 0))))
    nums = np.arange(lo, hi, dtype=np.int64)
    mat = np.empty((n, width + 1), np.uint8)
    mat[:, 0] = ord("d")
    for j in range(width):
        mat[:, width - j] = 48 + (nums // 10 ** j) % 10
    offsets = np.arange(n + 1, dtype=np.int32) * (width + 1)
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(mat))


def host_table(data_h: np.ndarray, off_h: np.ndarray, lo: int, hi: int) -> pa.Table:
    """Rows lo..hi-1 of the host copy of the corpus as an (id, text) table."""
    text = pa.LargeStringArray.from_buffers(hi - lo, pa.py_buffer(off_h[lo:hi + 1] - off_h[lo]),
                                            pa.py_buffer(data_h[off_h[lo]:off_h[hi]]))
    return pa.table({"id": make_ids(lo, hi), "text": text})


def _sync(xp) -> None:
    """Wait for the device: numba launches and CuPy operations may sit on different streams."""
    if xp.__name__ == "cupy":
        xp.cuda.Device().synchronize()


def _free(xp) -> None:
    if xp.__name__ == "cupy":
        xp.get_default_memory_pool().free_all_blocks()


def _device_info(xp, device: str) -> dict:
    import numba

    from gpu_dedup.runtime.device import simulator

    info = {"simulator": simulator(), "array_module": xp.__name__, "numba": numba.__version__,
            "numpy": np.__version__, "pyarrow": pa.__version__, "cpu_cores": os.cpu_count(),
            "numba_threads": numba.get_num_threads()}
    if xp.__name__ == "cupy":
        props = xp.cuda.runtime.getDeviceProperties(0)
        free, total = xp.cuda.runtime.memGetInfo()
        name = props["name"]
        info.update(gpu=name.decode() if isinstance(name, bytes) else str(name), cupy=xp.__version__,
                    gpu_mem_total_GiB=round(total / 2**30, 1), gpu_mem_free_GiB=round(free / 2**30, 1))
    return info


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=None, help="documents for stage 1 (default 2,000,000)")
    ap.add_argument("--words", type=int, default=None, help="mean words per document (default 400)")
    ap.add_argument("--cpu-docs", type=int, default=None, help="documents for the CPU path (default 20,000)")
    ap.add_argument("--pipeline-docs", type=int, default=None,
                    help="documents for stage 3, at most --docs; lowered to fit --budget (default 1,000,000)")
    ap.add_argument("--parquet-mb", type=float, default=None, help="text in stage 2's Parquet file (default 300)")
    ap.add_argument("--budget", type=float, default=140.0,
                    help="seconds this script should take; sizes stage 3 and drops 3p (default 140)")
    ap.add_argument("--small", action="store_true", help="tiny sizes for the CUDA simulator")
    ap.add_argument("--out", default=os.environ.get("OUT"), help="folder for gpu_bench.json and gpu_bench_table.txt")
    args = ap.parse_args()
    small = {"docs": 60, "words": 30, "cpu_docs": 30, "pipeline_docs": 60, "parquet_mb": 0.05}
    full = {"docs": 2_000_000, "words": 400, "cpu_docs": 20_000, "pipeline_docs": 1_000_000, "parquet_mb": 300.0}
    for k, v in (small if args.small else full).items():
        if getattr(args, k) is None:
            setattr(args, k, v)
    n, words = args.docs, args.words
    cpu_n = min(args.cpu_docs, n)
    t_start = time.perf_counter()

    import gpu_dedup
    from gpu_dedup import RunConfig, io
    from gpu_dedup.runtime.device import array_module, batch_bytes, resolve_device, to_device, to_host
    from gpu_dedup.lexical.exact import exact_hashes
    from gpu_dedup.io.gpu import resolve_reader
    from gpu_dedup.lexical.lsh import band_keys
    from gpu_dedup.lexical.minhash import compute_signatures, permutation_params
    from gpu_dedup.io.text import arrow_text_buffers
    from gpu_dedup.text.normalize import normalize_arrays

    device = resolve_device("cuda")
    xp = array_module(device)
    state = {"script": "gpu_bench", "args": vars(args), "device": _device_info(xp, device), "rows": [],
             "checks": [], "errors": [], "running": None, "done": False}
    out_dir = args.out
    if out_dir:
        os.makedirs(out_dir, exist_ok=True)

    def report() -> str:
        """The table with a header line and the checks: gpu_bench_table.txt, and stdout at the end."""
        info = state["device"]
        where = info.get("gpu", "CUDA simulator" if info["simulator"] else "?")
        lines = [f"gpu_bench: {where}, {n:,} docs x ~{words} words, CPU path on {info['cpu_cores']} cores, "
                 f"{state['elapsed_s']:.0f} s" + ("" if state["done"] else f"; running: {state['running']}"),
                 format_rows(state["rows"])]
        lines += [f"{'PASS' if c['ok'] else 'FAIL'}  {c['name']}" for c in state["checks"]]
        lines += [f"ERROR {e['stage']}: {e['error']}" for e in state["errors"]]
        return "\n".join(lines)

    def save() -> None:
        state["elapsed_s"] = round(time.perf_counter() - t_start, 2)
        if out_dir:
            write_json_atomic(os.path.join(out_dir, "gpu_bench.json"), state)
            write_text_atomic(os.path.join(out_dir, "gpu_bench_table.txt"), report() + "\n")

    def running(what: str | None) -> None:
        state["running"] = what
        save()

    def add(*rows: dict) -> None:
        state["rows"].extend(rows)
        save()

    def check(name: str, ok: bool, detail: str = "") -> None:
        state["checks"].append({"name": name, "ok": bool(ok), "detail": detail})
        save()

    def left() -> float:
        return args.budget - (time.perf_counter() - t_start)

    work = tempfile.mkdtemp(prefix="gd-bench-")  # never under $OUT: only eight files come back from there
    fw = RunConfig.preset("fineweb", progress=False)
    default = RunConfig.preset("default", progress=False)
    params = permutation_params(fw.minhash)
    K = fw.minhash.num_perm
    ctx: dict = {}  # what later stages take from earlier ones

    def stage(name: str, fn) -> bool:
        """Run one stage; a failure is recorded (row, traceback on stderr) and the next stage still runs
        when it does not depend on this one: one device call should return as much as it can."""
        running(name)
        try:
            fn()
            return True
        except Exception as exc:
            traceback.print_exc()
            state["errors"].append({"stage": name, "error": f"{type(exc).__name__}: {exc}"})
            add(bench_row(f"{name}: FAILED", None, note=f"{type(exc).__name__}: {exc}"[:400]))
            return False

    def signatures(data, off, dev: str):
        """Stage 1's four steps on one batch, each timed to completion: (times, results)."""
        times = []
        t = time.perf_counter()
        norm = normalize_arrays(data, off, fw.normalize, dev)
        for step in ("normalize", "exact", "minhash", "band_keys"):
            if step == "exact":
                h = exact_hashes(norm, dev)
            elif step == "minhash":
                sig = compute_signatures(norm, fw.shingle, fw.minhash, params, dev)
            elif step == "band_keys":
                keys = band_keys(sig.values, fw.lsh, dev)
            _sync(xp if dev == "cuda" else np)
            now = time.perf_counter()
            times.append(now - t)
            t = now
        return times, (norm, h, sig, keys)

    def warm_up(dev: str) -> None:
        """Compile every kernel once (numba CUDA or CPU, CuPy's elementwise kernels) outside the timings."""
        t = time.perf_counter()
        mod = xp if dev == "cuda" else np
        wd, wo = make_corpus(mod, dev, 12, 40, seed=1, rates=(0.0, 0.02))
        signatures(wd, wo, dev)
        tiny = host_table(to_host(wd), to_host(wo), 0, 12)
        for cfg in (default, fw):
            gpu_dedup.deduplicate(tiny, cfg.replace(device=dev), output_dir=os.path.join(work, "warm"))
        _sync(mod)
        add(bench_row(f"0  compile + warm-up, {'GPU' if dev == 'cuda' else 'CPU'} kernels (tiny corpus)",
                      time.perf_counter() - t, note="first launch of every kernel; not a pipeline stage"))

    def generate() -> None:
        t = time.perf_counter()
        data, offsets = make_corpus(xp, device, n, words)
        _sync(xp)
        nbytes = int(offsets[-1])
        add(bench_row("   generate corpus on the device (not a pipeline stage)", time.perf_counter() - t, n, nbytes,
                      note=f"{n:,} docs, {nbytes / n:,.0f} B/doc, {nbytes / 1e9:.2f} GB"))
        # the host copy the later stages use (pipeline table, CPU path, Parquet file): the first documents
        per_doc = nbytes / n
        parquet_n = max(1, min(n, int(args.parquet_mb * 1e6 / per_doc)))
        host_n = min(n, max(args.pipeline_docs, cpu_n, parquet_n))
        t = time.perf_counter()
        off_h = to_host(offsets[:host_n + 1])
        data_h = to_host(data[:int(off_h[-1])])
        add(bench_row("   device->host copy of the text (not a pipeline stage)", time.perf_counter() - t, host_n,
                      float(off_h[-1])))
        ctx.update(data=data, offsets=offsets, nbytes=nbytes, per_doc=per_doc, parquet_n=parquet_n,
                   host_n=host_n, data_h=data_h, off_h=off_h)

    def signatures_from_device_bytes() -> None:
        data, offsets, nbytes = ctx.pop("data"), ctx.pop("offsets"), ctx["nbytes"]
        tg = np.zeros(4)
        shingles = norm_bytes = 0
        first = None
        # batches as the pipeline sizes them (text bytes from free device memory); the first one holds the
        # CPU sample, which is checked against it
        step = max(cpu_n, int(batch_bytes(None, device) / ctx["per_doc"]))
        for lo in range(0, n, step):
            hi = min(lo + step, n)
            times, (norm, h, sig, keys) = signatures(data, offsets[lo:hi + 1], device)
            tg += times
            shingles += int(sig.nshingles.sum())
            norm_bytes += int(norm.offsets[-1]) - int(norm.offsets[0])
            if lo == 0:
                first = tuple(to_host(a[:cpu_n]) for a in (h, sig.values, sig.nshingles, keys))
            del norm, h, sig, keys
        del data, offsets
        _free(xp)
        data_h, off_h = ctx["data_h"], ctx["off_h"]
        tc, (_, ch, csig, ckeys) = signatures(data_h, off_h[:cpu_n + 1], "cpu")
        cps = [cpu_n / s if s > 0 else None for s in tc]
        cpu_sig = cpu_n / (tc[0] + tc[2]) if tc[0] + tc[2] > 0 else None
        add(bench_row("1  signatures from device bytes (normalize + MinHash)", tg[0] + tg[2], n, nbytes,
                      ceiling="minhash_ops", ceiling_work=shingles * K, cpu_docs_per_s=cpu_sig, target="signatures",
                      note=f"fineweb preset: word 5-grams, K={K}, {shingles / n:.0f} shingles/doc; "
                           f"batches of {min(step, n):,} docs"),
            bench_row("1a   normalize", tg[0], n, nbytes, ceiling="d2d", ceiling_work=nbytes + norm_bytes,
                      cpu_docs_per_s=cps[0]),
            bench_row(f"1b   shingle hash + MinHash K={K}", tg[2], n, nbytes, ceiling="minhash_ops",
                      ceiling_work=shingles * K, cpu_docs_per_s=cps[2]),
            bench_row("1c   exact hashes (2 x XXH64)", tg[1], n, nbytes, ceiling="d2d", ceiling_work=norm_bytes,
                      cpu_docs_per_s=cps[1]),
            bench_row(f"1d   band keys {fw.lsh.bands}x{fw.lsh.rows}", tg[3], n, nbytes, cpu_docs_per_s=cps[3]))
        gh, gsig, gnsh, gkeys = first
        check(f"GPU == CPU exact hashes, signatures, band keys on the bench corpus ({cpu_n:,} docs, fineweb)",
              np.array_equal(gh, ch) and np.array_equal(gnsh, csig.nshingles) and np.array_equal(gsig, csig.values)
              and np.array_equal(gkeys, ckeys), f"{int(off_h[cpu_n]) / 1e6:.1f} MB of text")

    def pipeline_small() -> None:
        """The whole default pipeline on the CPU sample on both devices: the GPU/CPU ratio, equal decisions."""
        data_h, off_h = ctx["data_h"], ctx["off_h"]
        table = host_table(data_h, off_h, 0, cpu_n)
        wall, res = {}, {}
        for dev in ("cpu", "cuda"):
            t = time.perf_counter()
            res[dev] = gpu_dedup.deduplicate(table, default.replace(device=dev),
                                             output_dir=os.path.join(work, f"small-{dev}"))
            wall[dev] = time.perf_counter() - t
            shutil.rmtree(os.path.join(work, f"small-{dev}"), ignore_errors=True)
        ctx.update(cpu_pipe=cpu_n / wall["cpu"], gpu_small=cpu_n / wall["cuda"])
        add(bench_row(f"3s whole default pipeline, {cpu_n:,} docs, same table as the CPU", wall["cuda"], cpu_n,
                      int(off_h[cpu_n]), cpu_docs_per_s=ctx["cpu_pipe"],
                      note=f"removed {res['cuda'].stats['counts']['removed']:,} (CPU "
                           f"{res['cpu'].stats['counts']['removed']:,}); deduplicated/ written"))
        check(f"GPU == CPU decisions on the bench corpus ({cpu_n:,} docs, default preset)",
              res["cuda"].decisions.equals(res["cpu"].decisions))

    def pipeline_large() -> None:
        """The whole default pipeline at the largest size that fits the budget; stage 3s gives the rate,
        and small runs are overhead-bound, so the estimate errs on the small side."""
        data_h, off_h = ctx["data_h"], ctx["off_h"]
        reserve = 25.0  # stage 2: write and read <= 300 MB of Parquet
        fit = int(0.7 * max(0.0, left() - reserve) * ctx.get("gpu_small", 0.0))
        p_n = min(args.pipeline_docs, ctx["host_n"], max(cpu_n, fit))
        running(f"3 whole pipeline, {p_n:,} docs")
        table = host_table(data_h, off_h, 0, p_n)
        p_bytes = int(off_h[p_n])
        out = os.path.join(work, "pipeline")
        t = time.perf_counter()
        r = gpu_dedup.deduplicate(table, default.replace(device="cuda"), output_dir=out)
        wall = time.perf_counter() - t
        shutil.rmtree(out, ignore_errors=True)
        ctx["gpu_pipe"] = p_n / wall
        tm = r.stats["timings_s"]
        sized = " (sized to fit the time budget)" if p_n < args.pipeline_docs else ""
        rows = [bench_row(f"3  whole default pipeline, in-memory table, {p_n:,} docs", wall, p_n, p_bytes,
                          cpu_docs_per_s=ctx.get("cpu_pipe"), target="pipeline",
                          note=f"read -> decisions.parquet + deduplicated/ written{sized}; removed "
                               f"{r.stats['counts']['removed']:,}; batches of "
                               f"{r.stats['config']['batch_bytes'] / 2**20:,.0f} MiB")]
        rows += [bench_row(f"3.   {name}", sec, p_n, p_bytes) for name, sec in tm.items() if name != "total"]
        rows.append(bench_row("3.   run.json + report.html (after timings_s total)", wall - tm["total"], p_n))
        add(*rows)

    def from_parquet(files, dev: str, limit: int | None):
        """Read -> H2D -> normalize -> MinHash, each part timed: (docs, [read, h2d, compute], bytes moved,
        reader name). The reader is the one the pipeline would pick (cudf when installed)."""
        mod = xp if dev == "cuda" else np
        reader = resolve_reader("auto", dev)
        parts, moved, docs = np.zeros(3), 0, 0
        t = time.perf_counter()
        for batch in io.iter_batches(files, id_field="id", text_field="text", batch_bytes=batch_bytes(None, dev),
                                     on_error="raise", device_reader=reader):
            t0 = time.perf_counter()
            if batch.device_text is not None:
                dd, od = batch.device_text.data, batch.device_text.offsets
            else:
                d, o = arrow_text_buffers(batch.text)
                dd, od = to_device(d, dev), to_device(o, dev)
                moved += d.nbytes + o.nbytes
                _sync(mod)
            t1 = time.perf_counter()
            sig = compute_signatures(normalize_arrays(dd, od, fw.normalize, dev), fw.shingle, fw.minhash, params, dev)
            _sync(mod)
            t2 = time.perf_counter()
            parts += (t0 - t, t1 - t0, t2 - t1)
            docs += len(batch)
            del sig, dd, od
            if limit is not None and docs >= limit:
                break
            t = time.perf_counter()
        return docs, parts, moved, (reader.name if reader is not None else "pyarrow")

    def parquet() -> None:
        """Parquet on local disk -> signatures; the file is bounded (--parquet-mb) and written only now,
        after the in-memory stages have reported."""
        parquet_n, per_doc = ctx["parquet_n"], ctx["per_doc"]
        src = os.path.join(work, "parquet")
        os.makedirs(src, exist_ok=True)
        path = os.path.join(src, "part-000.parquet")
        rg = max(1000, int(64e6 / per_doc))  # ~64 MB row groups, as a corpus writer would make them
        t = time.perf_counter()
        pq.write_table(host_table(ctx["data_h"], ctx["off_h"], 0, parquet_n), path, row_group_size=rg)
        q_bytes = int(ctx["off_h"][parquet_n])
        add(bench_row("   write Parquet for stage 2 (not a pipeline stage)", time.perf_counter() - t, parquet_n,
                      q_bytes, note=f"{os.path.getsize(path) / 1e6:.0f} MB snappy, row groups of {rg:,} docs"))
        ctx.update(src=src, q_bytes=q_bytes)
        running(f"2 Parquet -> signatures, {parquet_n:,} docs")
        files = io.resolve_inputs([path])
        gdocs, gp, moved, reader_name = from_parquet(files, "cuda", None)
        cdocs, cp, _, _ = from_parquet(files, "cpu", cpu_n)
        add(bench_row(f"2  Parquet on disk -> signatures, {reader_name} reader", gp.sum(), gdocs, q_bytes,
                      cpu_docs_per_s=cdocs / cp.sum(), target="parquet",
                      note=f"read + H2D + normalize + MinHash K={K}; the file is in the page cache"),
            bench_row("2a   Parquet read + decode (host)", gp[0], gdocs, q_bytes, ceiling="parquet_read",
                      cpu_docs_per_s=cdocs / cp[0] if cp[0] else None),
            bench_row("2b   host->device copy", gp[1], gdocs, moved, ceiling="h2d_pinned",
                      note=f"{moved / 1e6:.0f} MB moved" if moved else "text decoded on the device"),
            bench_row("2c   normalize + MinHash", gp[2], gdocs, q_bytes, cpu_docs_per_s=cdocs / cp[2]))

    def pipeline_parquet() -> None:
        """The whole pipeline from that file, when the budget still allows."""
        parquet_n = ctx["parquet_n"]
        need = 3.0 * parquet_n / ctx.get("gpu_pipe", ctx.get("gpu_small", 1.0))
        if left() < need:
            add(bench_row("3p whole pipeline from Parquet: skipped", None,
                          note=f"{left():.0f} s of the {args.budget:.0f} s budget left, ~{need:.0f} s needed"))
            return
        t = time.perf_counter()
        r = gpu_dedup.deduplicate(ctx["src"], default.replace(device="cuda"),
                                  output_dir=os.path.join(work, "pipeline-pq"))
        add(bench_row(f"3p whole default pipeline from Parquet on disk, {parquet_n:,} docs", time.perf_counter() - t,
                      parquet_n, ctx["q_bytes"], cpu_docs_per_s=ctx.get("cpu_pipe"), target="pipeline",
                      note=f"deduplicated/ written; text reader {r.stats.get('parquet_text_reader')}"))

    try:
        stage("0 compile + warm-up (GPU)", lambda: warm_up("cuda"))
        stage("0 compile + warm-up (CPU)", lambda: warm_up("cpu"))
        if stage("generate the corpus on the device", generate):
            stage("1 signatures from device bytes", signatures_from_device_bytes)
            stage(f"3s whole pipeline, {cpu_n:,} docs, CPU and GPU", pipeline_small)
            stage("3 whole pipeline", pipeline_large)
            stage("2 Parquet -> signatures", parquet)
            if "src" in ctx:  # the file was written, even if stage 2 failed after that
                stage("3p whole pipeline from Parquet", pipeline_parquet)
        state["done"] = True
        running(None)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(report())
    return 1 if state["errors"] or not all(c["ok"] for c in state["checks"]) else 0


if __name__ == "__main__":
    sys.exit(main())

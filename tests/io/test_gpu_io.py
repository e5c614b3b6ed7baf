"""gpu_dedup.io.gpu: the cudf (device) Parquet reader, checked without cudf.

- the UTF-8 validity kernel (CPU and simulated CUDA) against Python's decoder;
- ``string_buffers`` against the pylibcudf Column protocol (a stand-in column holding NumPy buffers:
  type().id(), size(), offset(), null_count(), data(), child(0));
- the reader orchestration (row-group batches, ids and keep values by pyarrow, host re-read of unclean
  batches) with a host stand-in for libcudf that returns the text column's Arrow buffers: decisions and
  the read report must equal the pyarrow reader's, for a simulated GPU run and a CPU run alike.
"""
import enum

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import gpu_dedup
from gpu_dedup import RunConfig
from gpu_dedup.runtime.device import gpu_status, simulator, to_device, to_host
from gpu_dedup.io import ReadReport, iter_batches, resolve_inputs
from gpu_dedup.io import gpu as gpu_io
from gpu_dedup.io.text import arrow_text_buffers, invalid_utf8_rows

UTF8_CASES = [b"", b"plain ascii", "Straße 日本語 👩\u200d💻 \ufffd".encode(), b"ok \xff end", b"cut \xe2\x82",
              b"surrogate \xed\xa0\x80 x", b"overlong \xc0\xaf", b"\xe0\x80\x80", b"\xf0\x80\x80\x80",
              b"\xf4\x90\x80\x80", b"\x80 lone continuation", b"\xfe\xfe", "\U0010FFFF end".encode(),
              b"trailing lead \xf0\x9f\x98"]


def _offsets(values):
    return np.concatenate([[0], np.cumsum([len(v) for v in values])]).astype(np.int64)


def _expected_invalid(values):
    out = []
    for v in values:
        try:
            v.decode("utf-8")
            out.append(False)
        except UnicodeDecodeError:
            out.append(True)
    return out


@pytest.mark.parametrize("device,chunk", [("cpu", None), ("cuda", 1), ("cuda", 3), ("cuda", 4096)])
def test_utf8_validity_kernel_matches_python(device, chunk, monkeypatch):
    if device == "cuda" and not simulator() and not gpu_status()[0]:
        pytest.skip("needs the CUDA simulator or a GPU")
    if chunk is not None:  # the GPU kernel works in chunks of UTF8_CHUNK bytes: 1 and 3 cut everywhere
        from gpu_dedup.ops import core

        monkeypatch.setattr(core, "UTF8_CHUNK", chunk)
    rng = np.random.default_rng(7)
    values = list(UTF8_CASES)
    # random byte strings biased towards UTF-8 lead/continuation bytes, and random valid text
    for _ in range(200 if chunk in (None, 4096) else 30):  # (the simulator runs a block per chunk)
        k = int(rng.integers(0, 12))
        values.append(bytes(rng.choice([0x41, 0x80, 0xBF, 0xC2, 0xDF, 0xE0, 0xED, 0xEF, 0xF0, 0xF4, 0xF5, 0xC0],
                                       size=k).astype(np.uint8)))
        values.append("".join(chr(int(c)) for c in rng.integers(0x20, 0x2FFFF, size=k)
                              if not 0xD800 <= c <= 0xDFFF).encode())
    data = np.frombuffer(b"".join(values), np.uint8).copy()
    got = to_host(invalid_utf8_rows(to_device(data, device), to_device(_offsets(values), device), device))
    assert got.tolist() == _expected_invalid(values)
    assert 10 < sum(got.tolist()) < len(values)  # the sample has both kinds


# --------------------------------------------------------------------------- the pylibcudf adapter

class TypeId(enum.Enum):
    STRING = 23
    INT32 = 3
    INT64 = 4
    FLOAT64 = 10


class _Type:
    def __init__(self, tid):
        self._tid = tid

    def id(self):
        return self._tid


class FakeColumn:
    """The part of pylibcudf.Column that string_buffers uses; buffers are NumPy arrays."""

    def __init__(self, tid, size, data, offset=0, nulls=0, children=()):
        self._t, self._size, self._data, self._offset, self._nulls = _Type(tid), size, data, offset, nulls
        self._children = list(children)

    def type(self):
        return self._t

    def size(self):
        return self._size

    def offset(self):
        return self._offset

    def null_count(self):
        return self._nulls

    def data(self):
        return self._data

    def child(self, i):
        return self._children[i]


def _strings_column(values, width=np.int32, offset=0, size=None):
    offs = _offsets(values).astype(width)
    chars = np.frombuffer(b"".join(values), np.uint8).copy() if any(values) else None
    child = FakeColumn(TypeId.INT32 if width == np.int32 else TypeId.INT64, len(offs), offs.view(np.uint8))
    return FakeColumn(TypeId.STRING, len(values) - offset if size is None else size, chars, offset=offset,
                      children=[child])


@pytest.mark.parametrize("width", [np.int32, np.int64])
def test_string_buffers_views_the_column(width):
    values = [b"alpha", b"", "日本語".encode(), b"omega"]
    data, offsets = gpu_io.string_buffers(_strings_column(values, width), np, TypeId)
    assert offsets.dtype == np.int64 and offsets.tolist() == _offsets(values).tolist()
    assert [bytes(data[a:b]) for a, b in zip(offsets[:-1], offsets[1:])] == values


def test_string_buffers_respects_a_sliced_column():
    values = [b"skip me", b"b", b"cc", b"ddd"]
    data, offsets = gpu_io.string_buffers(_strings_column(values, offset=1, size=2), np, TypeId)
    assert [bytes(data[a:b]) for a, b in zip(offsets[:-1], offsets[1:])] == [b"b", b"cc"]


def test_string_buffers_empty_and_all_empty_strings():
    data, offsets = gpu_io.string_buffers(FakeColumn(TypeId.STRING, 0, None), np, TypeId)
    assert data.shape == (0,) and offsets.tolist() == [0]
    data, offsets = gpu_io.string_buffers(_strings_column([b"", b""]), np, TypeId)
    assert data.shape == (0,) and offsets.tolist() == [0, 0, 0]


def test_string_buffers_rejects_wrong_types_and_corrupt_offsets():
    with pytest.raises(TypeError, match="FLOAT64.*reader='pyarrow'"):
        gpu_io.string_buffers(FakeColumn(TypeId.FLOAT64, 3, np.zeros(24, np.uint8)), np, TypeId)
    col = _strings_column([b"abc", b"de"])
    col._data = col._data[:2]  # fewer characters than the offsets claim
    with pytest.raises(ValueError, match="exceed"):
        gpu_io.string_buffers(col, np, TypeId)


# --------------------------------------------------------------------------- choosing the reader

def test_resolve_reader_rules(monkeypatch):
    assert gpu_io.resolve_reader("pyarrow", "cuda") is None
    assert gpu_io.resolve_reader("auto", "cpu") is None
    with pytest.raises(ValueError, match="reader must be one of"):
        gpu_io.resolve_reader("arrow", "cpu")
    with pytest.raises(ValueError, match="needs device='cuda' on a real GPU.*device='cpu'"):
        gpu_io.resolve_reader("cudf", "cpu")
    with pytest.raises(ValueError, match="reader must be"):
        RunConfig(reader="polars")
    if simulator():
        assert gpu_io.resolve_reader("auto", "cuda") is None  # the simulator has no device memory for cudf
        with pytest.raises(ValueError, match="CUDA simulator"):
            gpu_io.resolve_reader("cudf", "cuda")


def test_cudf_status_explains_a_missing_cudf(monkeypatch):
    import sys

    gpu_io.cudf_status.cache_clear()
    monkeypatch.setitem(sys.modules, "pylibcudf", None)  # import fails as if not installed
    try:
        usable, reason = gpu_io.cudf_status()
        assert not usable and "pylibcudf (cudf) is not importable" in reason
    finally:
        gpu_io.cudf_status.cache_clear()


# --------------------------------------------------------------------------- the reader orchestration

class HostTextReader:
    """Stands in for libcudf: the text column of the row groups, as Arrow buffers copied into fresh
    arrays (what the device reader hands over), through the same DeviceText wrapper."""

    name = "host-stand-in"

    def __init__(self, device):
        self.device = device
        self.calls = 0

    def read(self, path, row_groups, text_field):
        self.calls += 1
        col = pq.ParquetFile(path).read_row_groups(row_groups, columns=[text_field]).column(0).combine_chunks()
        nulls = col.null_count
        if nulls:  # offsets of null rows mean nothing; the wrapper must not look at the text
            col = col.fill_null("")
        data, offsets = arrow_text_buffers(col)
        # copied to the "device" as libcudf's buffers would be there (strict backend: device arrays)
        return gpu_io.device_text(to_device(data, self.device), to_device(offsets, self.device), nulls, self.device)


def _corpus(tmp_path, with_ids=True, bad=True, n=240, nwords=40):
    rng = np.random.default_rng(3)
    words = [f"w{i}" for i in range(300)] + ["Straße", "日本語", "naïve", "ΣΟΦΟΣ"]
    base = [" ".join(rng.choice(words, nwords)) for _ in range(n // 4)]
    texts = []
    for i in range(n):
        t = base[i % len(base)]
        if i >= len(base) and i % 3 == 0:  # near duplicate: one word changed
            parts = t.split()
            parts[int(rng.integers(0, nwords))] = "changed"
            t = " ".join(parts)
        texts.append(t.encode())
    if bad:
        texts[17] = b"invalid \xff utf8 " + texts[17]
        texts[n // 2 + 10] = None
    ids = pa.array([f"doc{i}" for i in range(len(texts))])
    cols = {"text": pa.array(texts, pa.binary()).view(pa.string()),
            "quality": pa.array(rng.random(len(texts)))}
    if with_ids:
        cols["id"] = ids
    path = tmp_path / "c.parquet"
    pq.write_table(pa.table(cols), path, row_group_size=20)
    return path


@pytest.mark.parametrize("bad", [False, True])
def test_device_reader_batches_equal_the_pyarrow_reader(tmp_path, bad):
    path = _corpus(tmp_path, bad=bad)
    files = resolve_inputs([path])
    opts = dict(id_field="id", text_field="text", batch_bytes=8_000, on_error="skip", keep_column="quality")
    host_rep, dev_rep = ReadReport(), ReadReport()
    host = list(iter_batches(files, report=host_rep, **opts))
    fake = HostTextReader("cpu")
    dev = list(iter_batches(files, report=dev_rep, device_reader=fake, **opts))
    assert fake.calls >= 3
    assert sum(b.device_text is not None for b in dev) >= 2  # clean batches stayed on the "device"

    def rows(batches):
        out = []
        for b in batches:
            if b.device_text is not None:
                d, o = b.device_text.data, b.device_text.offsets
                texts = [bytes(d[o[i]:o[i + 1]]).decode() for i in range(len(b))]
            else:
                texts = b.text.to_pylist()
            out += list(zip(b.ids.to_pylist(), texts, b.keep_values.tolist()))
        return out

    assert rows(dev) == rows(host)
    assert [b.row_start for b in dev][0] == 0 and sum(len(b) for b in dev) == sum(len(b) for b in host)
    assert dev_rep.to_dict() == host_rep.to_dict()
    if bad:  # the batch with the null and the one with invalid UTF-8 went through the host repair
        assert any(b.device_text is None for b in dev) and host_rep.invalid_utf8_rows == 1
        assert len(host_rep.skipped) == 1 and host_rep.skipped[0]["row"] == 130


def test_device_reader_generated_ids_and_null_ids(tmp_path):
    path = _corpus(tmp_path, with_ids=False, bad=False)
    files = resolve_inputs([path])
    opts = dict(id_field="id", text_field="text", batch_bytes=30_000, on_error="raise")
    host = [i for b in iter_batches(files, **opts) for i in b.ids.to_pylist()]
    dev = [i for b in iter_batches(files, device_reader=HostTextReader("cpu"), **opts) for i in b.ids.to_pylist()]
    assert dev == host and dev[5] == "c.parquet:5"
    t = pq.read_table(path).append_column("id", pa.array([None if i == 33 else f"d{i}" for i in range(240)]))
    pq.write_table(t, path, row_group_size=20)
    files = resolve_inputs([path])  # a new run: the InputFiles of one remember the file as first read
    with pytest.raises(Exception, match="c.parquet row 33.*id field 'id' is null"):
        list(iter_batches(files, device_reader=HostTextReader("cpu"), **opts))


def test_pipeline_with_device_reader_gives_identical_decisions(tmp_path, monkeypatch):
    if not simulator():
        pytest.skip("the host stand-in replaces libcudf only under the simulator")
    path = _corpus(tmp_path, n=100, nwords=25)  # 5 row groups of ~2.3 KB; small K: the simulator is slow
    cfg = RunConfig.preset("default", on_error="skip", batch_bytes=5_000, progress=False, minhash__num_perm=32,
                           lsh__bands=8, lsh__rows=4, cluster__keep="max:quality", write_deduplicated=False)
    cpu = gpu_dedup.deduplicate(str(path), cfg.replace(device="cpu"))
    fake = HostTextReader("cuda")
    seen = []

    def resolve(reader, device):
        seen.append((reader, device))
        return fake

    from gpu_dedup.lexical import signatures  # pass 1 picks the reader

    monkeypatch.setattr(signatures, "resolve_reader", resolve)
    gpu = gpu_dedup.deduplicate(str(path), cfg.replace(device="cuda"))
    assert set(seen) == {("auto", "cuda")} and fake.calls >= 3
    assert gpu.stats["parquet_text_reader"] == "host-stand-in" and cpu.stats["parquet_text_reader"] == "pyarrow"
    assert gpu.decisions.equals(cpu.decisions)
    assert gpu.stats["read"] == cpu.stats["read"] and gpu.removed == cpu.removed > 10

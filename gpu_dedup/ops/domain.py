"""Front end of the domain-rules kernel family (``kernels/domain_cpu.py`` / ``kernels/domain_cuda.py``): the
per-document script / symbol / keyword counts of the filter stage's domain rules. One signature on both targets;
the GPU's line-aligned pieces are cut and summed here."""
from __future__ import annotations

from ..runtime.device import array_module, line_chunks, run_kernel


def domain_counts(device: str, data, offsets, ranges, symbols, kw_data, kw_off, n_stats: int, chunk: int | None = None):
    """int64 (n, n_stats): the statistics (kernels/domain.py ``domain_stats``) of each document
    data[offsets[d]:offsets[d+1]] with the tables ranges / symbols / kw_data / kw_off (all of the device's array
    module). CPU: a scan per document (prange). GPU: a thread per line-aligned piece of about ``chunk`` bytes
    (default kernels/domain_cuda.DOMAIN_CHUNK; ``device.line_chunks``), the pieces' rows summed per document (line
    counts are additive over pieces): the same counts."""
    xp = array_module(device)
    n = int(offsets.shape[0]) - 1
    stats = xp.zeros((n, n_stats), dtype=xp.int64)
    if n == 0:
        return stats
    if device == "cuda":
        from ..kernels import domain_cuda as k

        starts, ends, bounds = line_chunks(xp, data, offsets, chunk or k.DOMAIN_CHUNK)
        pieces = int(starts.shape[0])
        if pieces:
            rows = xp.empty((pieces, n_stats), dtype=xp.int64)
            run_kernel(device, k.domain_chunks, pieces, data, starts, ends, ranges, symbols, kw_data, kw_off, rows)
            total = xp.zeros((pieces + 1, n_stats), dtype=xp.int64)  # total[i] = the rows of pieces < i
            xp.cumsum(rows, axis=0, out=total[1:])
            stats = total[bounds[1:]] - total[bounds[:-1]]
        return stats
    from ..kernels import domain_cpu as k

    run_kernel(device, k.domain_stats, n, data, offsets, ranges, symbols, kw_data, kw_off, stats)
    return stats

"""Run report: one self-contained HTML page (figures inline as SVG) plus the SVG files, from a run's outputs.

``write_report(out_dir)`` reads ``decisions.parquet`` and ``run.json`` from ``out_dir`` and writes
``out_dir/report.html`` and ``out_dir/report/*.svg``. For text excerpts and retained bytes/tokens it also
reads the run's input files: found from run.json (``input_paths`` when recorded, else ``inputs`` relative
to the working directory) or given as ``source=``. When they cannot be found, or no longer match the
decisions (ids differ), the report says so and leaves those parts out; it never fails for that. When the run
recorded the retained sizes, only the rows shown are needed: a Parquet file of which the run dropped no row
is read only in the row groups that hold them; other files are read from their start up to the last row
shown.

What the run records, and so what the report can show:

* counts per reason and stage, clusters and their members: from the decisions (one row per document);
* LSH load: buckets per band, bucket entries and the largest bucket (run.json ``stages.lsh``); the full
  bucket-size distribution is drawn only when run.json has ``stages.lsh.bucket_size_log2_counts``;
* over the S-curve: ``jaccard_histogram`` of the removed near-duplicates' exact Jaccard with the document
  kept for them (the decisions' ``jaccard`` column). That is not a candidate rate: pairs LSH never
  proposed do not appear. The candidate rate needs labelled pairs: ``candidate_rates`` computes it (see
  notebooks/03_choosing_parameters.ipynb) and ``plot_candidate_rates`` draws it over the theory.

The figures are drawn from the aggregates as SVG by ``svg.py`` (no plotting library: the page costs
milliseconds to draw at any size); only ``plot_candidate_rates`` (notebooks) uses matplotlib. A run that writes
deduplicated/ picks up the shown clusters' texts as it copies the kept records (``shown_rows``), so its report
reads no input again.

One step per module: ``metrics`` (histograms, candidate rates, largest clusters), ``diff`` (word diffs),
``inputs`` (reading the run's outputs and, again, its inputs), ``plots`` (the figures), ``svg`` (drawing
them), ``page`` (HTML building blocks), ``sections`` (the page's sections), ``html`` (``write_report``); the
``report`` command is gpu_dedup/cli/report.py.
"""
from .diff import diff_words
from .html import PLOTS_DIR, REPORT_FILE, shown_rows, write_report
from .metrics import CandidateRates, ClusterView, JaccardHistogram, candidate_rates, jaccard_histogram, largest_clusters
from .plots import plot_candidate_rates

__all__ = ["CandidateRates", "ClusterView", "JaccardHistogram", "PLOTS_DIR", "REPORT_FILE",
           "candidate_rates", "diff_words", "jaccard_histogram", "largest_clusters", "plot_candidate_rates",
           "shown_rows", "write_report"]

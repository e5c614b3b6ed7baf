"""Run report: one self-contained HTML page (plots embedded as base64 PNGs) plus the PNGs, from a run's outputs.

``write_report(out_dir)`` reads ``decisions.parquet`` and ``run.json`` from ``out_dir`` and writes
``out_dir/report.html`` and ``out_dir/report/*.png``. For text excerpts and retained bytes/tokens it also
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

matplotlib (the ``plot`` extra) is imported only when plots are drawn; without it the report is written
without images and says how to get them.

One step per module: ``metrics`` (histograms, candidate rates, largest clusters), ``diff`` (word diffs),
``inputs`` (reading the run's outputs and, again, its inputs), ``plots`` (matplotlib), ``page`` (HTML
building blocks), ``sections`` (the page's sections), ``html`` (``write_report``); the ``report``
command is gpu_dedup/cli/report.py.
"""
from .diff import diff_words
from .html import PLOTS_DIR, REPORT_FILE, write_report
from .metrics import CandidateRates, ClusterView, JaccardHistogram, candidate_rates, jaccard_histogram, largest_clusters
from .plots import plot_candidate_rates

__all__ = ["CandidateRates", "ClusterView", "JaccardHistogram", "PLOTS_DIR", "REPORT_FILE",
           "candidate_rates", "diff_words", "jaccard_histogram", "largest_clusters", "plot_candidate_rates",
           "write_report"]

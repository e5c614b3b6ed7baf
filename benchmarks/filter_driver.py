"""The driver's peak RSS of `gpu-dedup filter --engine ray` (report.html included) at several corpus sizes: it must
not grow with the documents (issue 35). Each run is a child process (`ru_maxrss` of the command line itself, as
benchmarks/scale.py measures `run`), one JSON line per corpus.

    python benchmarks/filter_driver.py --model M.arpa IN_100K IN_1M

The corpora: e.g. the Parquet folders benchmarks/distributed.py makes (WORK/driver-N/corpus-N-20); the model: any
ARPA file (`gpu-dedup train-lm ONE_FILE -o M.arpa --order 3`).
"""
import argparse
import json
import os
import subprocess
import sys
import time

CHILD = ("import resource, sys, gpu_dedup.cli as c; rc = c.main(sys.argv[1:]); "
         "print('PEAK_RSS', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss); sys.exit(rc)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("corpora", nargs="+")
    ap.add_argument("--model", required=True, help="ARPA model of the perplexity selection (keep=0.7)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--work", default="/tmp/gd-filter-driver")
    args = ap.parse_args()
    for src in args.corpora:
        out = os.path.join(args.work, f"out-{os.path.basename(os.path.normpath(src))}")
        cmd = [sys.executable, "-c", CHILD, "filter", src, "-o", out, "--overwrite", "-q", "--rules", "gopher",
               "--perplexity", f"{args.model}:keep=0.7", "--engine", "ray", "--workers", str(args.workers),
               "--work-dir", out + "-work"]
        t = time.perf_counter()
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode:
            sys.exit(r.stderr[-3000:])
        peak = int([x for x in r.stdout.splitlines() if x.startswith("PEAK_RSS")][0].split()[1]) * 1024
        print(json.dumps({"corpus": src, "wall": round(time.perf_counter() - t, 1),
                          "driver_peak_mib": round(peak / 2**20, 1), "load": os.getloadavg()[0]}), flush=True)


if __name__ == "__main__":
    main()

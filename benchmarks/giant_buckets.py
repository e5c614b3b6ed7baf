"""Giant buckets stay linear: N identical documents; an N-document template family (the same ~100-word
boilerplate, one word different: J ~ 0.9, all but one removed); and a template family whose members are
just below the threshold (J ~ 0.77: all kept, so each new member is compared with up to
max_representatives_per_bucket kept ones: the cap bounds the work). Timed and measured at doubling N in
child processes.

    python benchmarks/giant_buckets.py --sizes 25000,50000,100000,200000 --below-sizes 25000,50000
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile

CHILD = r"""
import json, sys, time, pyarrow as pa, gpu_dedup
kind, n = sys.argv[1], int(sys.argv[2])
words = ("this manual page documents the command line options of the tool and explains how each flag "
         "changes its behaviour when it is given on the command line by the user").split()
base = " ".join(f"{w}{j // len(words)}" for j, w in enumerate(words * 4))  # ~100 distinct words
short_base = " ".join(words * 3)  # repeated: only ~30 distinct shingles
if kind == "identical":
    texts = [base] * n
elif kind == "template":
    texts = [base + f" the option is called option{i} and nothing else differs" for i in range(n)]
else:
    texts = [short_base + f" the option is called option{i} and nothing else differs" for i in range(n)]
t = pa.table({"id": [f"d{i}" for i in range(n)], "text": texts})
t0 = time.perf_counter()
r = gpu_dedup.deduplicate(t, gpu_dedup.RunConfig(progress=False, device="cpu"))
print(json.dumps({"seconds": time.perf_counter() - t0, "removed": r.removed,
                  "largest_bucket": r.stats["stages"]["lsh"]["largest_bucket"],
                  "verified_pairs": r.stats["stages"].get("policy", {}).get("verified_pairs", 0)}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="25000,50000,100000,200000")
    ap.add_argument("--below-sizes", default="10000,20000")
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    below = [int(x) for x in args.below_sizes.split(",")]
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(CHILD)
    subprocess.run([sys.executable, f.name, "identical", "10"], check=True, capture_output=True)  # compile cache
    print(f"{'corpus':26s} {'docs':>9s} {'seconds':>8s} {'us/doc':>7s} {'peak RSS MB':>12s} {'removed':>9s} "
          f"{'largest bucket':>15s} {'Jaccard checks':>15s}")
    for kind, ns in (("identical", sizes), ("template", sizes), ("template-below-theta", below)):
        for n in ns:
            before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
            r = subprocess.run([sys.executable, f.name, kind, str(n)], check=True, capture_output=True, text=True)
            rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
            d = json.loads(r.stdout.strip().splitlines()[-1])
            peak = f"{rss / 1024:12.0f}" if rss > before else f"{'<= prev':>12s}"
            print(f"{kind:26s} {n:9,d} {d['seconds']:8.2f} {d['seconds'] / n * 1e6:7.1f} {peak} {d['removed']:9,d} "
                  f"{d['largest_bucket']:15,d} {d['verified_pairs']:15,d}")
    os.unlink(f.name)


if __name__ == "__main__":
    main()

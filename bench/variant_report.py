#!/usr/bin/env python3
"""variant_report: compares builds of collmux (variants) that gpu_bench ran
in separate processes, taking turns, several rounds each.

Absolute times shift by a microsecond or more from one process to the next
on the GPU machine (NCCL's too), so each variant is judged by its speed-up
over NCCL measured in the same process. Reads bench-VARIANT.csv (gpu_bench
output, rounds appended; rows of path "nccl" then the variant's policy) and
prints, per all-reduce size, every round's speed-up and the median time.

usage: variant_report.py DIR VARIANT...
"""
import collections
import csv
import os
import statistics
import sys


def load(path, coll):
    """(bytes -> [(time_us, speed-up over NCCL of the same round)])"""
    out = collections.defaultdict(list)
    nccl = {}
    for row in csv.reader(open(path)):
        if not row or row[0] != coll:
            continue
        size, us = int(row[2]), float(row[3])
        if row[1] == "nccl":
            nccl[size] = us
        else:
            out[size].append((us, nccl[size] / us))
    return out


def main():
    args, coll = sys.argv[1:], "allreduce"
    if args[:1] == ["--coll"]:
        coll, args = args[1], args[2:]
    d, variants = args[0], args[1:]
    runs = {v: load(os.path.join(d, "bench-%s.csv" % v), coll) for v in variants}
    sizes = sorted(set().union(*runs.values()))
    print("| bytes | " + " | ".join(variants) + " |")
    print("|---" * (len(variants) + 1) + "|")
    for b in sizes:
        cells = []
        for v in variants:
            r = runs[v].get(b, [])
            ups = " ".join("%.2f" % x[1] for x in r)
            cells.append("%s (%.1f µs)" % (ups, statistics.median(x[0] for x in r)) if r else "")
        print("| %d | %s |" % (b, " | ".join(cells)))
    # a variant whose runs all failed (no rows) gets an empty cell, as above
    ups = {v: [x[1] for r in runs[v].values() for x in r] for v in variants}
    means = ["%.3f" % statistics.mean(ups[v]) if ups[v] else "" for v in variants]
    print("| mean speed-up | " + " | ".join(means) + " |")


if __name__ == "__main__":
    main()

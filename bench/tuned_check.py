"""Checks a tuning table against every single backend, measured in one run.

usage: tuned_check.py tuning.json policies.csv
policies.csv is bench/gpu_bench run with the policies "tuned" (the defaults
and the table, COLLMUX_TUNING=tuning.json) and "via-B" for each backend B
forced alone, every size measured under each policy in turn.
Targets: tuned / best single backend <= 1.02 at every size, and the mixed
policy's summed time below every single backend's.

Where the tuned policy takes the same backend as the best single one, the
two run the same code, so their ratio is the run's noise; it is reported
alongside, since a ratio above 1.02 within that noise says nothing.
"""
import csv
import json
import sys
from collections import defaultdict


FUSED_MAX = 8 << 20  # the fused kernels' workspace: above it "fused" runs NCCL
FUSED_COLLS = {"allreduce", "allgather", "alltoall", "bcast"}


def path(coll, size, backend):
    """The path a call really takes: the fused backend falls back to NCCL
    above its workspace and for collectives it has no kernel for."""
    if backend == "fused" and (size > FUSED_MAX or coll not in FUSED_COLLS):
        return "nccl"
    return backend


def chosen(table, coll, size):
    for r in table["ranges"]:
        if r["collective"] == coll and r["lo"] <= size <= r["hi"]:
            return path(coll, size, r["backend"])
    return None


def main():
    table = json.load(open(sys.argv[1]))
    t = defaultdict(dict)  # (coll, bytes) -> policy -> us
    for r in csv.DictReader(open(sys.argv[2])):
        t[(r["collective"], int(r["bytes"]))][r["path"]] = float(r["time_us"])
    singles = sorted({p for v in t.values() for p in v if p.startswith("via-")})
    print("# Tuned policy vs every single backend, measured in one run\n")
    print("Rules of the table:", ", ".join(f"`{x}`" for x in table["rules"]), "\n")
    print("Each size is timed under every policy in turn within one `gpu_bench` run (policies switched with "
          "`collmux_set_rules`). `via-B` is collmux with every device collective forced to backend B "
          "(`via-fused` falls back to NCCL above the 8 MiB workspace; `via-staged` is measured up to its own limit). "
          "Same path: the sizes where the table picks the backend that was fastest alone, so that the ratio is noise.\n")
    print("| collective | sizes | worst tuned/best single (size) | sizes ≤ 1.02 | ratio range where the path is the same | "
          "sum tuned µs | sum per single backend µs, over the sizes it was measured (tuned over the same sizes) |")
    print("|---|---|---|---|---|---|---|")
    ok_ratio, ok_sum = True, True
    for c in sorted({c for c, _ in t}):
        keys = sorted(k for k in t if k[0] == c and "tuned" in t[k] and any(p in t[k] for p in singles))
        ratios, same = {}, []
        for k in keys:
            best_p = min((p for p in singles if p in t[k]), key=lambda p: t[k][p])
            ratios[k] = t[k]["tuned"] / t[k][best_p]
            if chosen(table, c, k[1]) == path(c, k[1], best_p[len("via-"):]):
                same.append(ratios[k])
        worst = max(ratios, key=ratios.get)
        within = sum(r <= 1.02 for r in ratios.values())
        ok_ratio = ok_ratio and within == len(keys)
        sums = {}
        for p in singles:
            ks = [k for k in keys if p in t[k]]
            sums[p] = (sum(t[k][p] for k in ks), sum(t[k]["tuned"] for k in ks))
        ok_sum = ok_sum and all(tu < s for s, tu in sums.values())
        per = ", ".join(f"{p[4:]} {s:.0f} ({tu:.0f})" for p, (s, tu) in sums.items())
        rng = f"{min(same):.3f}–{max(same):.3f} ({len(same)} sizes)" if same else "–"
        print(f"| {c} | {len(keys)} | {ratios[worst]:.3f} ({worst[1]} B) | {within} of {len(keys)} | {rng} | "
              f"{sum(t[k]['tuned'] for k in keys):.0f} | {per} |")
    print(f"\ntuned ≤ 1.02 × the best single backend at every size: {'yes' if ok_ratio else 'NO'}")
    print(f"mixed policy's summed time below every single backend's: {'yes' if ok_sum else 'NO'}")


if __name__ == "__main__":
    main()

"""Checks a tuning table against a run that used it.

usage: tuned_check.py tuning.json tuned.csv
tuning.json holds the sweep of every single backend (collmux tune); tuned.csv
is bench/gpu_bench run with COLLMUX_TUNING=tuning.json and label "tuned".
Targets: tuned / best single backend <= 1.02 at every size (noise aside),
and the mixed policy's summed time below every single backend's.
"""
import csv
import json
import sys
from collections import defaultdict


def main():
    table = json.load(open(sys.argv[1]))
    single = defaultdict(dict)  # (coll, bytes) -> backend -> us
    for s in table["samples"]:
        single[(s["collective"], s["bytes"])][s["backend"]] = s["us"]
    tuned = {}
    for r in csv.DictReader(open(sys.argv[2])):
        if r["path"] == "tuned":
            tuned[(r["collective"], int(r["bytes"]))] = float(r["time_us"])
    print("# Tuned policy vs single backends, same machine\n")
    print("Rules in force:", ", ".join(f"`{x}`" for x in table["rules"]), "\n")
    print("| collective | sizes | worst tuned/best single | sizes within 2% / 5% | sum tuned µs | " +
          "sum per single backend µs (over the sizes it was measured) |\n|---|---|---|---|---|---|")
    ok_all = True
    for c in sorted({c for c, _ in tuned}):
        keys = sorted(k for k in tuned if k[0] == c and k in single)
        ratios = [tuned[k] / min(single[k].values()) for k in keys]
        within2 = sum(r <= 1.02 for r in ratios)
        within5 = sum(r <= 1.05 for r in ratios)
        sums = {}
        for b in sorted({b for k in keys for b in single[k]}):
            ks = [k for k in keys if b in single[k]]
            sums[b] = (sum(single[k][b] for k in ks), sum(tuned[k] for k in ks))
        better = all(t < s for s, t in sums.values() if s)
        ok_all = ok_all and better
        per = ", ".join(f"{b} {s:.0f} (tuned {t:.0f})" for b, (s, t) in sums.items())
        print(f"| {c} | {len(keys)} | {max(ratios):.3f} | {within2} / {within5} of {len(keys)} | {sum(tuned[k] for k in keys):.0f} | {per} |")
    print(f"\nmixed policy strictly better than every single backend over the measured range: {'yes' if ok_all else 'NO'}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Two builds of gnio side by side: the median over repeated runs of every point, and their ratio.

    bench/compare-builds.py --old 'old-*.json' --new 'new-*.json' [--markdown OUT.md]
                            [--title TEXT] [--tolerance 0.03]

Each argument is a glob of gnio-perf JSON files (`gnio-perf coll ... --json` or `gnio-perf
coll-kernel ... --json`), one per run of the same command. Rows are matched by every field that
names a point (subcommand, collective, type, operator, in place, algorithm column aside, bytes,
cooperation group); the figure is the row's time_us (itself the median of the run's repetitions),
and a point's time is the median over the runs. For each point:

    ratio = new_time / old_time   (< 1: the new build is faster)

A point is flagged SLOWER when ratio > 1 + tolerance (default 3%); the runs' range (min-max of
the per-run times) of each build is printed beside it, to tell a change from noise. The summary gives the number of
points, how many are within the tolerance or faster, the geometric mean of the ratios and the
worst point. Rows with a failed data check (#wrong > 0) in any run are flagged and counted.
Standard library only. Exit status: 0, or 1 when a data check failed.
"""

import argparse
import glob
import json
import math
import statistics
import sys

KEY_FIELDS = ("coll", "op", "type", "root", "inplace", "scope", "mode", "bytes")


def load_runs(pattern):
    files = sorted(glob.glob(pattern))
    if not files:
        sys.exit(f"compare-builds: no file matches {pattern!r}")
    runs = []
    for path in files:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        runs.append((path, doc))
    return runs


def points(runs):
    """{key: ([time_us per run], wrong_total, algos)}"""
    table = {}
    for _, doc in runs:
        sub = doc.get("subcommand", "?")
        for row in doc.get("rows", []):
            # gnio-perf coll rows carry time_us, coll-kernel and rma rows median_us.
            t = row.get("time_us", row.get("median_us"))
            if t is None:
                continue
            key = (sub,) + tuple(row.get(k) for k in KEY_FIELDS)
            times, wrong, algos = table.get(key, ([], 0, set()))
            times.append(float(t))
            wrong += int(row.get("wrong") or 0)
            if row.get("algo"):
                algos.add(str(row["algo"]))
            table[key] = (times, wrong, algos)
    return table


def size_text(b):
    for unit, div in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if b >= div and b % div == 0:
            return f"{b // div}{unit}"
    return str(b)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--old", required=True, help="glob of the old build's JSON files")
    ap.add_argument("--new", required=True, help="glob of the new build's JSON files")
    ap.add_argument("--markdown", help="also write the table as Markdown here")
    ap.add_argument("--title", default="old vs new build")
    ap.add_argument("--tolerance", type=float, default=0.03)
    args = ap.parse_args()

    old_runs, new_runs = load_runs(args.old), load_runs(args.new)
    old, new = points(old_runs), points(new_runs)
    keys = sorted(set(old) & set(new), key=lambda k: tuple(str(x) if not isinstance(x, int) else f"{x:020d}" for x in k))
    header = ["what", "type", "op", "inplace", "size", "algo", "old us", "new us", "new/old",
              "old runs", "new runs", ""]
    rows, ratios, bad_data = [], [], 0
    for k in keys:
        (ot, ow, oa), (nt, nw, na) = old[k], new[k]
        o, n = statistics.median(ot), statistics.median(nt)
        ratio = n / o if o > 0 else float("nan")
        ratios.append(ratio)
        flag = ""
        if ow or nw:
            flag = "WRONG DATA"
            bad_data += 1
        elif ratio > 1 + args.tolerance:
            flag = "SLOWER"
        sub, coll, op, typ, _root, inplace, scope, mode, nbytes = k
        what = coll or op or sub
        if scope:
            what = f"{what} ({scope})"
        if coll is None:  # coll-kernel / rma rows: `op` names the operation, not a reduction
            op = ""
        algo = ",".join(sorted(oa | na))
        rows.append([f"{sub}:{what}", str(typ or ""), str(op or ""), str(inplace if inplace is not None else ""),
                     size_text(int(nbytes)), algo, f"{o:.2f}", f"{n:.2f}", f"{ratio:.3f}",
                     f"{min(ot):.2f}-{max(ot):.2f}", f"{min(nt):.2f}-{max(nt):.2f}", flag])
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths))]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows]
    finite = [r for r in ratios if r > 0 and math.isfinite(r)]
    geo = math.exp(sum(math.log(r) for r in finite) / len(finite)) if finite else float("nan")
    within = sum(1 for r in finite if r <= 1 + args.tolerance)
    worst = max(range(len(rows)), key=lambda i: ratios[i]) if rows else None
    summary = [
        f"{args.title}: {len(rows)} points, {len(old_runs)} old and {len(new_runs)} new result files "
        f"(median over runs of each run's median)",
        f"within {args.tolerance:.0%} or faster: {within}/{len(finite)}; geometric mean new/old "
        f"{geo:.3f}",
    ]
    if worst is not None:
        summary.append("worst: " + " ".join(rows[worst][:6]) + f" new/old {ratios[worst]:.3f}")
    if bad_data:
        summary.append(f"{bad_data} points with a failed data check")
    only_old = len(set(old) - set(new))
    only_new = len(set(new) - set(old))
    if only_old or only_new:
        summary.append(f"unmatched points: {only_old} only in old, {only_new} only in new")
    print("\n".join(lines + [""] + summary))
    if args.markdown:
        with open(args.markdown, "w", encoding="utf-8") as f:
            f.write(f"# {args.title}\n\n")
            f.write("\n".join("* " + s for s in summary) + "\n\n")
            f.write("| " + " | ".join(header) + " |\n")
            f.write("|" + "---|" * len(header) + "\n")
            for r in rows:
                f.write("| " + " | ".join(r) + " |\n")
    return 1 if bad_data else 0


if __name__ == "__main__":
    sys.exit(main())

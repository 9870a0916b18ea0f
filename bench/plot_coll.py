#!/usr/bin/env python3
"""Plots `gnio-perf coll --json` results: time per call against size (log-log) and bus bandwidth
against size, one line per (file, collective, type, operator, placement); NCCL's times from
--vs-nccl runs as dashed lines beside gnio's.

    bench/plot_coll.py RESULT.json [MORE.json ...] [-o coll.png] [--coll allreduce]
                       [--type f32] [--op sum] [--inplace 0|1|both] [--title TEXT]

Several files (runs on other machines, other revisions, other rank counts) share the axes; each
file's lines are labelled with its `--label` or, by default, the file name. Needs matplotlib
(`pip install matplotlib`); everything else is the standard library.
"""

import argparse
import json
import os
import sys


def load(path):
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        sys.exit(f"plot_coll.py: cannot read {path}: {e}")
    if doc.get("schema") != "gnio-perf/1" or doc.get("subcommand") != "coll":
        sys.exit(f"plot_coll.py: {path} is not gnio-perf coll JSON (schema gnio-perf/1, "
                 f"subcommand coll); got {doc.get('schema')!r}/{doc.get('subcommand')!r}")
    return doc


def wanted(row, args):
    if args.coll and row["coll"] not in args.coll:
        return False
    if args.type and row["type"] not in args.type:
        return False
    if args.op and row["op"] is not None and row["op"] not in args.op:
        return False
    if args.inplace != "both" and row["inplace"] != int(args.inplace):
        return False
    return True


def series(docs, labels, args):
    """{(label, coll, type, op, inplace): [(bytes, time_us, busbw, nccl_time_us, nccl_busbw)]}"""
    out = {}
    for doc, label in zip(docs, labels):
        for row in doc["rows"]:
            if not wanted(row, args) or not row.get("time_us"):
                continue
            key = (label, row["coll"], row["type"], row["op"], row["inplace"])
            nccl_us = row.get("nccl_time_us")
            # busbw scales with 1/time at a fixed size: NCCL's follows from gnio's and the ratio.
            nccl_busbw = row["busbw"] * row["time_us"] / nccl_us if nccl_us else None
            out.setdefault(key, []).append(
                (row["bytes"], row["time_us"], row["busbw"], nccl_us, nccl_busbw))
    for points in out.values():
        points.sort()
    return out


def main():
    p = argparse.ArgumentParser(description="Plot gnio-perf coll JSON results (latency and busbw "
                                            "against size; gnio vs NCCL when present).")
    p.add_argument("files", nargs="+", help="JSON files written by gnio-perf coll --json")
    p.add_argument("-o", "--output", default="coll.png", help="PNG to write [coll.png]")
    p.add_argument("--label", action="append", default=[],
                   help="label of each file, in order [the file names]")
    p.add_argument("--coll", action="append", help="only this collective (repeatable)")
    p.add_argument("--type", action="append", help="only this element type (repeatable)")
    p.add_argument("--op", action="append", help="only this operator (repeatable)")
    p.add_argument("--inplace", choices=["0", "1", "both"], default="0",
                   help="out of place (0), in place (1) or both [0]")
    p.add_argument("--title", help="figure title [from the first file's metadata]")
    args = p.parse_args()

    try:
        import matplotlib
        matplotlib.use("Agg")  # files only: no display needed
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("plot_coll.py: matplotlib is missing; install it with: pip install matplotlib")

    docs = [load(f) for f in args.files]
    labels = list(args.label) + [os.path.basename(f) for f in args.files[len(args.label):]]
    data = series(docs, labels, args)
    if not data:
        sys.exit("plot_coll.py: no rows match the filters (--coll/--type/--op/--inplace)")

    fig, (ax_t, ax_b) = plt.subplots(1, 2, figsize=(14, 5.5))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, (key, points) in enumerate(sorted(data.items(), key=lambda kv: str(kv[0]))):
        label, coll, dtype, op, inplace = key
        name = " ".join(x for x in (coll, dtype, op) if x) + (" in-place" if inplace else "")
        if len(docs) > 1:
            name = f"{label}: {name}"
        color = colors[i % len(colors)]
        sizes = [pt[0] for pt in points]
        ax_t.plot(sizes, [pt[1] for pt in points], "o-", color=color, ms=3, label=f"gnio {name}")
        ax_b.plot(sizes, [pt[2] for pt in points], "o-", color=color, ms=3, label=f"gnio {name}")
        nccl = [pt for pt in points if pt[3]]
        if nccl:
            ns = [pt[0] for pt in nccl]
            ax_t.plot(ns, [pt[3] for pt in nccl], "s--", color=color, ms=3, label=f"NCCL {name}")
            ax_b.plot(ns, [pt[4] for pt in nccl], "s--", color=color, ms=3, label=f"NCCL {name}")

    ax_t.set_xscale("log", base=2)
    ax_t.set_yscale("log")
    ax_t.set_xlabel("size (bytes, nccl-tests' definition)")
    ax_t.set_ylabel("time per call (us)")
    ax_t.set_title("latency")
    ax_b.set_xscale("log", base=2)
    ax_b.set_xlabel("size (bytes, nccl-tests' definition)")
    ax_b.set_ylabel("bus bandwidth (GB/s, 1e9 B/s)")
    ax_b.set_title("busbw")
    for ax in (ax_t, ax_b):
        ax.grid(True, which="both", alpha=0.3)
    handles, names = ax_b.get_legend_handles_labels()
    fig.legend(handles, names, loc="lower center", ncol=min(4, max(1, len(names))), fontsize=7,
               frameon=False)
    d = docs[0]
    title = args.title or (f"gnio-perf coll: {d.get('backend')} backend, {d.get('ranks')} ranks, "
                           f"{d.get('timing')} timing; {d.get('device')}")
    fig.suptitle(title, fontsize=10)
    legend_rows = (len(names) + 3) // 4
    fig.tight_layout(rect=(0, min(0.5, 0.04 * legend_rows + 0.02), 1, 0.95))
    try:
        fig.savefig(args.output, dpi=120)
    except OSError as e:
        sys.exit(f"plot_coll.py: cannot write {args.output}: {e}")
    print(f"plot_coll.py: wrote {args.output} ({len(data)} series)")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""One table from gnio-perf JSON files of the same measurement under different network backends.

    bench/net-table.py LABEL=FILE.json [LABEL=FILE.json ...] [--markdown OUT.md] [--title TEXT]

Rows are matched by (op, scope, mode, bytes) for `gnio-perf rma` files and by (coll, type, op,
inplace, bytes) for `gnio-perf coll` files. Each label gets a column with its figure: microseconds
per operation (rma latency rows, coll time), GB/s (rma bandwidth rows); the columns after the
first also get `xFIRST`, the speed-up over the first label (> 1: faster than the first). A row
whose data check failed (#wrong > 0) is flagged. Standard library only.
"""

import argparse
import json
import math
import sys

from compare import fmt, size_text  # bench/compare.py: the same size and number formats


def number(v):
    """A finite figure, or None (missing, null, inf, nan)."""
    return v if isinstance(v, (int, float)) and math.isfinite(v) else None


def load(path):
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        sys.exit(f"net-table.py: cannot read {path}: {e}")
    rows = {}
    for r in doc.get("rows", []):
        if "coll" in r:
            key = (r["coll"], r["type"], r["op"], "in" if r.get("inplace") else "out",
                   int(r["bytes"]))
            rows[key] = (number(r.get("time_us")), "us", r.get("wrong"))
        else:
            lat = r["mode"] == "lat"
            key = (r["op"], r["scope"], r["mode"], int(r["bytes"]))
            rows[key] = (number(r.get("median_us") if lat else r.get("gbps")),
                         "us" if lat else "GB/s", r.get("wrong"))
    return doc, rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", metavar="LABEL=FILE")
    ap.add_argument("--markdown", metavar="FILE")
    ap.add_argument("--title", default="gnio-perf across network backends")
    args = ap.parse_args()
    runs = []
    for spec in args.runs:
        label, _, path = spec.partition("=")
        if not path:
            sys.exit(f"net-table.py: '{spec}' is not LABEL=FILE")
        runs.append((label,) + load(path))
    first = runs[0][0]
    keys = sorted(set().union(*(set(r[2]) for r in runs)), key=lambda k: tuple(map(str, k[:-1])) + (k[-1],))
    head = ["key", "size", "unit"]
    for i, (label, _, _) in enumerate(runs):
        head.append(label)
        if i:
            head.append(f"x{first}")
    lines = []
    for k in keys:
        unit = next(r[2][k][1] for r in runs if k in r[2])
        base = runs[0][2].get(k, (None,))[0]
        cells = ["/".join(map(str, k[:-1])), size_text(k[-1]), unit]
        flag = ""
        for i, (label, _, rows) in enumerate(runs):
            v, _, wrong = rows.get(k, (None, unit, None))
            if wrong:
                flag = " DATA WRONG"
            cells.append(fmt(v))
            if i:
                good = v is not None and base is not None and v > 0 and base > 0
                cells.append(fmt((base / v if unit == "us" else v / base) if good else None))
        cells[-1] += flag
        lines.append(cells)
    meta = [f"{label}: {doc.get('command', '?')} ({doc.get('date', '?')}, {doc.get('host', '?')}, "
            f"backend {doc.get('backend', '?')})" for label, doc, _ in runs]
    widths = [max([len(h)] + [len(c[i]) for c in lines]) for i, h in enumerate(head)]
    print("\n".join("# " + m for m in meta))
    print("  ".join(h.ljust(w) for h, w in zip(head, widths)))
    for c in lines:
        print("  ".join(v.rjust(w) if i else v.ljust(w) for i, (v, w) in enumerate(zip(c, widths))))
    if args.markdown:
        out = [f"# {args.title}", ""] + [f"* {m}" for m in meta] + [
            "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        out += ["| " + " | ".join(c) + " |" for c in lines]
        with open(args.markdown, "w", encoding="utf-8") as f:
            f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()

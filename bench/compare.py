#!/usr/bin/env python3
"""Side-by-side table of two gnio-perf JSON files (gnio-perf and nvshmem-perf, see report.hpp).

    bench/compare.py GNIO.json NVSHMEM.json [--markdown OUT.md] [--title TEXT]

Rows are matched by (op, scope, mode, bytes). For every matched row it prints the figure each
library reached, the time per operation for latency rows and GB/s for bandwidth rows, and

    ratio = nvshmem_time / gnio_time   (latency)
    ratio = gnio_gbps / nvshmem_gbps   (bandwidth)

so that ratio > 1 always means gnio is better. Rows that only one file has are listed at the end;
rows with a failed data check (#wrong > 0) are flagged. With --markdown the same table is written
as Markdown (for bench/results/). Standard library only.
"""

import argparse
import json
import math
import sys

MODE_ORDER = {"lat": 0, "bw": 1, "bibw": 2}
OP_ORDER = {"put": 0, "get": 1, "put_signal": 2, "fetch_add": 3, "compare_swap": 4}
SCOPE_ORDER = {"thread": 0, "warp": 1, "block": 2}


def load(path):
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        sys.exit(f"compare.py: cannot read {path}: {e}")
    if not isinstance(doc, dict) or not isinstance(doc.get("rows"), list):
        sys.exit(f"compare.py: {path} is not a gnio-perf JSON file (no 'rows' list)")
    rows = {}
    for r in doc["rows"]:
        try:
            key = (r["op"], r["scope"], r["mode"], int(r["bytes"]))
        except (KeyError, TypeError, ValueError):
            sys.exit(f"compare.py: {path}: malformed row {r!r}")
        rows[key] = r
    return doc, rows


def size_text(n):
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if n >= (1 << shift) and n % (1 << shift) == 0:
            return f"{n >> shift}{unit}"
    return str(n)


def figure(row, mode):
    """The row's headline number: microseconds for latency, GB/s for bandwidth."""
    value = row.get("median_us") if mode == "lat" else row.get("gbps")
    return value if isinstance(value, (int, float)) and math.isfinite(value) else None


def ratio(mode, g, n):
    if g is None or n is None or g <= 0 or n <= 0:
        return None
    return n / g if mode == "lat" else g / n


def sort_key(key):
    op, scope, mode, size = key
    return (OP_ORDER.get(op, 99), op, MODE_ORDER.get(mode, 99), SCOPE_ORDER.get(scope, 99), size)


def describe(doc):
    return (f"{doc.get('library', '?')} {doc.get('version', '?')} on {doc.get('backend', '?')}, "
            f"{doc.get('device', '?')}, {doc.get('date', '?')}")


def build_table(gnio_rows, nv_rows):
    table = []
    for key in sorted(set(gnio_rows) & set(nv_rows), key=sort_key):
        op, scope, mode, size = key
        g, n = gnio_rows[key], nv_rows[key]
        gf, nf = figure(g, mode), figure(n, mode)
        wrong = int(g.get("wrong", 0)) + int(n.get("wrong", 0))
        table.append({
            "op": op, "scope": scope, "mode": mode, "size": size_text(size),
            "unit": "us" if mode == "lat" else "GB/s",
            "gnio": gf, "nvshmem": nf, "ratio": ratio(mode, gf, nf),
            "note": "DATA WRONG" if wrong else "",
        })
    return table


def fmt(v):
    """Two decimals, or three significant digits below 1 (small-message GB/s, ratios)."""
    if v is None:
        return "-"
    return f"{v:.2f}" if abs(v) >= 1 or v == 0 else f"{v:.3g}"


def text_lines(table, header):
    cols = ["op", "scope", "mode", "size", "unit", "gnio", "nvshmem", "ratio", "note"]
    cells = [[r["op"], r["scope"], r["mode"], r["size"], r["unit"], fmt(r["gnio"]),
              fmt(r["nvshmem"]), fmt(r["ratio"]), r["note"]] for r in table]
    widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(cols)]
    right = {3, 5, 6, 7}
    def line(values):
        return "  ".join(v.rjust(w) if i in right else v.ljust(w)
                         for i, (v, w) in enumerate(zip(values, widths))).rstrip()
    out = [f"# {h}" for h in header]
    out.append(line(cols))
    out.append(line(["-" * w for w in widths]))
    out.extend(line(row) for row in cells)
    return out


def markdown_lines(table, header, title):
    out = [f"# {title}", ""]
    out.extend(f"* {h}" for h in header)
    out += ["", "| op | scope | mode | size | unit | gnio | nvshmem | ratio | note |",
            "|---|---|---|---:|---|---:|---:|---:|---|"]
    for r in table:
        out.append(f"| {r['op']} | {r['scope']} | {r['mode']} | {r['size']} | {r['unit']} | "
                   f"{fmt(r['gnio'])} | {fmt(r['nvshmem'])} | {fmt(r['ratio'])} | {r['note']} |")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("gnio_json")
    ap.add_argument("nvshmem_json")
    ap.add_argument("--markdown", metavar="FILE", help="also write the table as Markdown here")
    ap.add_argument("--title", default="gnio vs NVSHMEM: one-sided operations (gnio-perf rma)")
    args = ap.parse_args()

    gdoc, grows = load(args.gnio_json)
    ndoc, nrows = load(args.nvshmem_json)
    table = build_table(grows, nrows)
    header = [
        f"gnio:    {describe(gdoc)}",
        f"nvshmem: {describe(ndoc)}",
        "lat rows: median time per operation in us (put_signal: one way of a ping-pong); "
        "bw/bibw rows: GB/s at the median (1 GB = 1e9 B)",
        "ratio > 1 means gnio is better: nvshmem_us / gnio_us for latency, "
        "gnio_GBps / nvshmem_GBps for bandwidth",
        "eager launches with in-kernel loops, timed with CUDA events; details in "
        "docs/guide/benchmarks.md",
    ]
    only = sorted(set(grows) ^ set(nrows), key=sort_key)
    if only:
        header.append("rows in one file only: " + ", ".join(
            f"{'gnio' if k in grows else 'nvshmem'}:{k[0]}/{k[1]}/{k[2]}/{size_text(k[3])}"
            for k in only[:20]) + (" ..." if len(only) > 20 else ""))
    ratios = [r["ratio"] for r in table if r["ratio"]]
    if ratios:
        geo = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
        header.append(f"{len(table)} rows matched; geometric mean ratio {geo:.2f}; "
                      f"gnio better in {sum(1 for x in ratios if x > 1)} of {len(ratios)}")

    if args.markdown:
        try:
            with open(args.markdown, "w", encoding="utf-8") as f:
                f.write("\n".join(markdown_lines(table, header, args.title)) + "\n")
        except OSError as e:
            sys.exit(f"compare.py: cannot write {args.markdown}: {e}")
    try:
        print("\n".join(text_lines(table, header)))
        sys.stdout.flush()
    except BrokenPipeError:  # e.g. piped into head: not an error of the comparison
        sys.stderr.close()
    bad = any(r["note"] for r in table)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

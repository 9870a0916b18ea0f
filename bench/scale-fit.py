#!/usr/bin/env python3
"""Fits how gnio's per-rank costs grow with the job (gnio-scale-probe's JSON, one file per size)
and projects them to large jobs.

For each figure: the log-log slope over the measured sizes (1 = grows like N, 0 = constant) and a
straight-line fit y = a + b*N, whose values at 1 k, 16 k and 64 k ranks are the projection (only
meaningful where the slope says the figure is linear in N; a figure that grows faster is marked);
and creation time over N log2 N (a slope <= 0 there: creation grows no faster than N log N).

  bench/scale-fit.py OUT/scale-*.json [--markdown FILE]
"""
import argparse
import json
import math
import sys

FIGURES = [
    ("threads_max", "threads per rank"),
    ("sockets_mean", "sockets per rank"),
    ("fds_mean", "file descriptors per rank"),
    ("rss_mib_mean", "resident MiB per rank"),
    ("create_ms", "creation ms (slowest rank)"),
    ("create_cpu_ms", "creation CPU ms (busiest rank's process)"),
    ("allreduce_us_max", "allreduce 1 KiB us"),
    ("idle_cores_mean", "CPU of an idle communicator (cores per rank)"),
]
PROJECT = [1024, 16384, 65536]


def line_fit(xs, ys):
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else 0.0
    return my - b * mx, b


def loglog_slope(xs, ys):
    pts = [(math.log(x), math.log(y)) for x, y in zip(xs, ys) if x > 0 and y > 0]
    if len(pts) < 2:
        return float("nan")
    return line_fit([p[0] for p in pts], [p[1] for p in pts])[1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--markdown")
    args = ap.parse_args()
    runs = sorted((json.load(open(f)) for f in args.files), key=lambda r: r["ranks"])
    if len(runs) < 2:
        sys.exit("scale-fit: need at least two sizes")
    sizes = [r["ranks"] for r in runs]
    out = ["| figure | " + " | ".join(f"N={n}" for n in sizes) +
           " | log-log slope | fit a + b*N | " + " | ".join(f"N={n}" for n in PROJECT) + " |",
           "|---" * (len(sizes) + 3 + len(PROJECT)) + "|"]
    for key, label in FIGURES:
        if any(key not in r for r in runs):
            continue  # a figure older probes did not measure
        ys = [float(r[key]) for r in runs]
        slope = loglog_slope(sizes, ys)
        a, b = line_fit(sizes, ys)
        note = "" if slope < 1.3 else " (grows faster than N: projection low)"
        proj = [f"{a + b * n:.4g}{note}" for n in PROJECT]
        out.append(f"| {label} | " + " | ".join(f"{y:.4g}" for y in ys) +
                   f" | {slope:.2f} | {a:.3g} + {b:.3g}*N | " + " | ".join(proj) + " |")
    # Issue 30's bar for creation: growing no faster than N log N, i.e. this ratio not growing.
    if all("create_ms" in r for r in runs):
        ratios = [float(r["create_ms"]) / (n * math.log2(n)) for r, n in zip(runs, sizes)]
        out.append("| creation ms / (N log2 N) | " + " | ".join(f"{q:.3g}" for q in ratios) +
                   f" | {loglog_slope(sizes, ratios):.2f} | | " + " | ".join("" for _ in PROJECT) +
                   " |")
    nodes = ", ".join(f"{r['ranks']}:{r['nodes']}" for r in runs)
    text = (f"ranks:nodes measured: {nodes}; backend {runs[0]['backend']}; "
            f"wrong allreduce elements: {sum(r['wrong'] for r in runs):.0f}\n\n" + "\n".join(out) +
            "\n")
    print(text)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""gnio-perf network figures as ratios to raw TCP measured on the same machine (the floor).

    bench/net-vs-floor.py --floor FLOOR.json FILE.json [FILE.json ...] [--streams N]
                          [--markdown OUT.md] [--title TEXT]

FLOOR.json is `gnio-tcp-floor --json` (perf/probes/tcp_floor.cpp); each FILE.json a gnio-perf
`rma`, `coll` or `msgrate` file from a run through the proxy (ranks on different nodes, or
`gnio-run --nodes 2`) in the same session. Per row:

  * rma put_signal latency (one way): gnio us, the floor's 8-byte one-way latency, and gnio's
    excess over it (us); other rma latency rows are round trips, set beside twice the floor's one
    way latency;
  * rma bandwidth and coll bus bandwidth: GB/s over the floor's throughput with N streams
    (--streams; default: every stream count the floor measured gets a column);
  * coll time below 64 KiB: against twice the floor's one way latency (a round trip);
  * msgrate: operations per second over the floor's 16-byte records, one per write and batched.

Rows whose data check failed (#wrong > 0) are flagged. Standard library only.
"""

import argparse
import json
import sys

from compare import size_text  # bench/compare.py: the size format every bench table uses


def load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def floor_figures(doc):
    lat = None
    streams = {}
    records = {}
    for row in doc.get("rows", []):
        m = row.get("measure")
        if m == "latency":
            lat = float(row["one_way_us"])
        elif m == "throughput":
            streams[int(row["streams"])] = float(row["gbps"])
        elif m == "records":
            records[int(row["batch_bytes"])] = float(row["records_per_s"])
    if lat is None or not streams:
        sys.exit("net-vs-floor: the floor file has no latency or throughput row")
    return lat, streams, records


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--floor", required=True)
    ap.add_argument("files", nargs="+")
    ap.add_argument("--streams", type=int, default=0)
    ap.add_argument("--markdown")
    ap.add_argument("--title", default="gnio through the proxy, against raw TCP on the same machine")
    a = ap.parse_args()
    floor_doc = load(a.floor)
    one_way, streams, records = floor_figures(floor_doc)
    counts = [a.streams] if a.streams else sorted(streams)
    for n in counts:
        if n not in streams:
            sys.exit(f"net-vs-floor: the floor measured no {n}-stream throughput")
    lines = [f"# {a.title}", ""]
    lines.append(
        f"Floor (`{floor_doc.get('command', 'gnio-tcp-floor')}`, {floor_doc.get('date', '?')}): "
        f"8 B one way {one_way:.2f} us; "
        + ", ".join(f"{n} stream(s) {streams[n]:.2f} GB/s" for n in sorted(streams))
        + "; "
        + ", ".join(f"{records[b] / 1e6:.2f} M 16-byte records/s {'one per write' if b <= 16 else f'{b // 1024} KiB per write'}"
                    for b in sorted(records)))
    lines.append("")
    lines.append("| file | what | size | gnio | floor | gnio vs floor |")
    lines.append("|---|---|---|---|---|---|")
    bad = 0
    for path in a.files:
        doc = load(path)
        sub = doc.get("subcommand", "?")
        name = path.rsplit("/", 1)[-1]
        for row in doc.get("rows", []):
            wrong = int(row.get("wrong") or 0)
            flag = " **data check failed**" if wrong else ""
            bad += 1 if wrong else 0
            size = size_text(int(row.get("bytes", 0)))
            if sub == "rma" and row.get("mode") == "lat":
                us = float(row["median_us"])
                if row.get("op") == "put_signal":
                    what, ref = f"put_signal one way ({row.get('scope')})", one_way
                else:
                    what, ref = f"{row.get('op')} round trip ({row.get('scope')})", 2 * one_way
                lines.append(f"| {name} | {what} | {size} | {us:.2f} us | {ref:.2f} us | "
                             f"+{us - ref:.2f} us ({us / ref:.2f}x){flag} |")
            elif sub == "rma" and row.get("mode") in ("bw", "bibw"):
                g = float(row["gbps"])
                ratios = ", ".join(f"{g / streams[n]:.2f} x {n}-stream" for n in counts)
                lines.append(f"| {name} | {row.get('op')} {row.get('mode')} ({row.get('scope')}) | "
                             f"{size} | {g:.2f} GB/s | {', '.join(f'{streams[n]:.2f}' for n in counts)} GB/s | "
                             f"{ratios}{flag} |")
            elif sub == "msgrate":
                rate = 1.0 / float(row["median_us"]) * 1e6  # operations per second
                single = records.get(16)
                batched = max((v for b, v in records.items() if b > 16), default=None)
                parts = []
                if single:
                    parts.append(f"{rate / single:.2f} x one record per write")
                if batched:
                    parts.append(f"{rate / batched:.3f} x batched records")
                lines.append(f"| {name} | {row.get('op')} message rate | 8 B | {rate / 1e6:.2f} M/s | "
                             f"{(single or 0) / 1e6:.2f} / {(batched or 0) / 1e6:.1f} M/s | {', '.join(parts)}{flag} |")
            elif sub == "coll":
                t = row.get("time_us")
                busbw = row.get("busbw")
                b = int(row.get("bytes", 0))
                what = f"{row.get('coll')} {row.get('type', '')} {row.get('op', '')}".strip()
                if b < 64 * 1024 and t is not None:
                    ref = 2 * one_way
                    lines.append(f"| {name} | {what} time | {size} | {float(t):.2f} us | {ref:.2f} us | "
                                 f"+{float(t) - ref:.2f} us ({float(t) / ref:.2f}x){flag} |")
                elif busbw is not None:
                    g = float(busbw)
                    ratios = ", ".join(f"{g / streams[n]:.2f} x {n}-stream" for n in counts)
                    lines.append(f"| {name} | {what} busbw | {size} | {g:.2f} GB/s | "
                                 f"{', '.join(f'{streams[n]:.2f}' for n in counts)} GB/s | {ratios}{flag} |")
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if a.markdown:
        with open(a.markdown, "w", encoding="utf-8") as f:
            f.write(text)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

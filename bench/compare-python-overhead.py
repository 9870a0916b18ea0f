#!/usr/bin/env python3
"""The Python call's overhead: perf/python/coll_overhead.py's table beside gnio-perf coll's
(eager, the same sizes, calls per measurement and repetitions), as a markdown table with
python - C++ per call. Files named by glob patterns; several runs of each take the median of
their medians per size.

    bench/compare-python-overhead.py --python 'r/py-*.json' --cpp 'r/cpp-*.json'
"""

import argparse
import glob
import json
import statistics
import sys


def per_size(pattern, pick):
    files = sorted(glob.glob(pattern))
    if not files:
        sys.exit(f"no file matches {pattern}")
    runs = {}
    for name in files:
        with open(name) as f:
            for row in pick(json.load(f)):
                if row.get("wrong"):
                    sys.exit(f"{name}: {row['bytes']} B has wrong elements: not a valid timing")
                runs.setdefault(row["bytes"], []).append(row["time_us"])
    return {size: statistics.median(t) for size, t in runs.items()}, len(files)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--python", required=True)
    ap.add_argument("--cpp", required=True)
    ap.add_argument("--bar", type=float, default=5.0, help="allowed overhead in us [5]")
    a = ap.parse_args()
    py, n_py = per_size(a.python, lambda d: d["rows"])
    cpp, n_cpp = per_size(a.cpp, lambda d: [r for r in d["rows"]
                                            if r["coll"] == "allreduce" and r["inplace"] == 0])
    print(f"| bytes | C++ us | Python us | overhead us | <= {a.bar:g} us |")
    print("|---|---|---|---|---|")
    worst = None
    for size in sorted(set(py) & set(cpp)):
        over = py[size] - cpp[size]
        worst = over if worst is None else max(worst, over)
        print(f"| {size} | {cpp[size]:.2f} | {py[size]:.2f} | {over:+.2f} | "
              f"{'yes' if over <= a.bar else 'NO'} |")
    print(f"\n{n_cpp} C++ and {n_py} Python runs (median of their medians); largest overhead "
          f"{worst:+.2f} us")
    return 0 if worst is not None and worst <= a.bar else 1


if __name__ == "__main__":
    sys.exit(main())

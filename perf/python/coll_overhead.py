"""What a collective costs when called from Python, timed the way gnio-perf coll times the same
call in C++ (eager: `iters` calls enqueued one by one per measurement, CUDA events around them,
the slowest rank's time per call, the median over `reps` measurements), so the two tables side
by side give the Python call's overhead. Every point is checked once first (outputs poisoned).

    torchrun --nproc-per-node 2 perf/python/coll_overhead.py --json py.json
    gnio-run -n 2 -- gnio-perf coll --coll allreduce -d f32 -o sum -b 8 -e 64K -f 4 -G 0 \\
        -n 200 -w 20 --reps 15 --inplace 0 --json cpp.json
    bench/compare-python-overhead.py py.json cpp.json

Needs the cuda backend and torch (GPU). Buffers are symmetric (comm.empty), as gnio-perf's
default (--mem sym); --private times torch.empty tensors instead (gnio-perf --mem priv).
"""

import argparse
import json
import statistics
import time

import torch

import gnio


def sizes(lo, hi, factor):
    s = lo
    while s <= hi:
        yield s
        s *= factor


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-b", type=int, default=8, help="smallest size in bytes [8]")
    ap.add_argument("-e", type=int, default=64 * 1024, help="largest size in bytes [64K]")
    ap.add_argument("-f", type=int, default=4, help="size factor [4]")
    ap.add_argument("-n", type=int, default=200, help="calls per measurement [200]")
    ap.add_argument("-w", type=int, default=20, help="warm-up calls [20]")
    ap.add_argument("--reps", type=int, default=15, help="measurements per size [15]")
    ap.add_argument("--private", action="store_true", help="torch.empty tensors, not comm.empty")
    ap.add_argument("--json", help="write the table here")
    args = ap.parse_args()

    comm = gnio.Comm.from_env()
    torch.cuda.set_device(comm.device)
    dev = torch.device("cuda", comm.device)
    stream = torch.cuda.current_stream(dev)
    rows = []
    if comm.rank == 0:
        print(f"# Python all_reduce (f32 sum, out of place, eager, {'private' if args.private else 'symmetric'} "
              f"buffers), {comm.size} ranks; per call: CUDA events around {args.n} calls / {args.n}, "
              f"slowest rank, median of {args.reps}; host_us: Python's enqueue time per call")
        print(f"{'bytes':>8} {'time_us':>9} {'min_us':>8} {'max_us':>8} {'host_us':>8}")
    for nbytes in sizes(args.b, args.e, args.f):
        count = max(1, nbytes // 4)
        if args.private:
            x = torch.empty(count, dtype=torch.float32, device=dev)
            out = torch.empty(count, dtype=torch.float32, device=dev)
        else:
            x, out = comm.empty(count, "float32"), comm.empty(count, "float32")
        x.copy_(torch.arange(count, dtype=torch.float32, device=dev) % 7 + comm.rank)
        out.fill_(-77.0)
        comm.all_reduce(x, out=out)  # checked once, exactly
        want = sum(torch.arange(count, dtype=torch.float32) % 7 + r for r in range(comm.size))
        wrong = int((out.cpu() != want).sum())
        if wrong:
            raise SystemExit(f"rank {comm.rank}: {nbytes} B: {wrong} wrong elements")
        for _ in range(args.w):
            comm.all_reduce(x, out=out)
        times, hosts = [], []
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        for _ in range(args.reps):
            comm.barrier()
            begin.record(stream)
            t0 = time.perf_counter()
            for _ in range(args.n):
                comm.all_reduce(x, out=out)
            host = (time.perf_counter() - t0) / args.n * 1e6
            end.record(stream)
            end.synchronize()
            per_call = torch.tensor([begin.elapsed_time(end) * 1e3 / args.n, host], device=dev)
            comm.all_reduce(per_call, op="max")  # the slowest rank's
            times.append(float(per_call[0]))
            hosts.append(float(per_call[1]))
        row = {"bytes": nbytes, "time_us": statistics.median(times), "min_us": min(times),
               "max_us": max(times), "host_us": statistics.median(hosts), "wrong": 0}
        rows.append(row)
        if comm.rank == 0:
            print(f"{nbytes:>8} {row['time_us']:>9.2f} {row['min_us']:>8.2f} {row['max_us']:>8.2f} "
                  f"{row['host_us']:>8.2f}", flush=True)
        del x, out
    if comm.rank == 0 and args.json:
        with open(args.json, "w") as f:
            json.dump({"what": "python all_reduce f32 sum, out of place, eager",
                       "buffers": "private" if args.private else "symmetric", "ranks": comm.size,
                       "iters": args.n, "reps": args.reps, "rows": rows}, f, indent=1)
    comm.close()


if __name__ == "__main__":
    main()

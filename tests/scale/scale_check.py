#!/usr/bin/env python3
"""Checks two gnio-scale-probe results (a smaller and a larger job) against what a rank may
cost as the job grows: the same threads; resident memory growing by less than 256 KiB per added
remote peer (it was 1 MiB when every connection's read buffer was zero-filled at creation);
sockets at most 2 x GNIO_NET_NSOCKS (4: the host backend's default, which the scale test runs
on) per remote peer it talks to (one set each way) plus a few; no wrong allreduce element.

  scale_check.py SMALL.json LARGE.json
  scale_check.py --ring RING.json

With --ring, one run whose allreduce was a ring: each rank talks to its 2 neighbours only, so its
sockets must stay at 2 x 2 x GNIO_NET_NSOCKS plus a few, however many ranks the job has (with
every connection opened at creation, 16 ranks on 16 nodes held 71-77).
"""
import json
import sys

LANES = 4
SLACK_SOCKETS = 16  # liveness, bootstrap connections, a listener or two


def ring(path):
    run = json.load(open(path))
    limit = 2 * 2 * LANES + SLACK_SOCKETS + 8  # + a liveness parent and children (fan-out 8)
    print(f"ring allreduce, {run['ranks']} ranks: sockets per rank max {run['sockets_max']:.0f}, "
          f"mean {run['sockets_mean']:.1f} (limit {limit})")
    failures = []
    if run["wrong"] != 0:
        failures.append(f"{run['wrong']:.0f} wrong allreduce elements")
    if run["sockets_max"] > limit:
        failures.append(f"{run['sockets_max']:.0f} sockets on a rank that talks to 2 peers")
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


def main():
    if sys.argv[1] == "--ring":
        return ring(sys.argv[2])
    small, large = (json.load(open(p)) for p in sys.argv[1:3])
    failures = []
    for run in (small, large):
        if run["wrong"] != 0:
            failures.append(f"{run['ranks']} ranks: {run['wrong']:.0f} wrong allreduce elements")
        remote = run["ranks"] - run["ranks_per_node"]
        if run["sockets_max"] > 2 * LANES * remote + SLACK_SOCKETS:
            failures.append(f"{run['ranks']} ranks: {run['sockets_max']:.0f} sockets on a rank, "
                            f"more than {2 * LANES} per remote peer ({remote}) + {SLACK_SOCKETS}")
    if large["threads_max"] != small["threads_max"]:
        failures.append(f"threads per rank grew with the job: {small['threads_max']:.0f} at "
                        f"{small['ranks']} ranks, {large['threads_max']:.0f} at {large['ranks']}")
    added = (large["ranks"] - large["ranks_per_node"]) - (small["ranks"] - small["ranks_per_node"])
    grown_kib = (large["rss_mib_mean"] - small["rss_mib_mean"]) * 1024
    per_peer = grown_kib / added
    print(f"threads {small['threads_max']:.0f} -> {large['threads_max']:.0f}; resident memory "
          f"+{grown_kib:.0f} KiB for {added} more remote peers ({per_peer:.0f} KiB each); "
          f"sockets {small['sockets_max']:.0f} -> {large['sockets_max']:.0f}")
    if per_peer >= 256:
        failures.append(f"resident memory grows {per_peer:.0f} KiB per remote peer (limit 256)")
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

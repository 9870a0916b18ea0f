#!/usr/bin/env python3
"""Prints every include and cast that breaks gnio's layering (docs/design/architecture.md):

  * a file under src/<layer>/ includes a header of a layer above its own;
  * a file outside src/platform/<backend>/ includes that backend's private headers, or
    dynamic_casts to a concrete backend outside src/platform/;
  * the bindings and tools (tools/, python/, nccl/, examples/) include anything but gnio's public
    headers (include/gnio/);
  * the performance programs (perf/) include anything but the public headers and the harness they
    share (perf/harness/, which itself includes only the public headers).

Exit status: 0 when the number of violations is at most --allow (default 0; CI allows none),
else 1.

  scripts/check-layers.py [--allow N] [--quiet]
"""
import argparse
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
# Lower layers first; a layer may include its own headers and those of any layer below.
RANKS = {
    "base": 0,
    "platform": 1,
    "bootstrap": 1,
    "memory": 2,
    "transport": 3,
    "core": 4,
    "coll": 5,
    "msg": 5,
    "rma": 5,
    "eth": 5,
}
BACKENDS = ("cuda", "host", "no_cuda")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
CAST = re.compile(r"dynamic_cast<\s*(?:const\s+)?(?:platform::)?(\w+Backend)\s*[*&]")
SOURCES = (".cpp", ".hpp", ".cu", ".cuh", ".inl", ".c", ".h")


def violations():
    found = []
    for path in sorted(ROOT.rglob("*")):
        if path.suffix not in SOURCES or not path.is_file():
            continue
        rel = path.relative_to(ROOT)
        parts = rel.parts
        if parts[0].startswith("build") or parts[0] in (".deps", "tests", "include"):
            continue
        text = path.read_text(errors="replace")
        for m in INCLUDE.finditer(text):
            inc = m.group(1)
            head = inc.split("/")[0]
            line = text.count("\n", 0, m.start()) + 1
            where = f"{rel}:{line}"
            if parts[0] == "src" and len(parts) > 2:
                layer = parts[1]
                if head in RANKS and RANKS[head] > RANKS.get(layer, 99):
                    found.append(f"{where}: {layer} includes {inc} (layer {head} is above it)")
                if head == "platform" and len(inc.split("/")) > 2:
                    backend = inc.split("/")[1]
                    # no_cuda is the cuda backend's stand-in in builds without CUDA.
                    home = {"no_cuda": "cuda"}.get(parts[2], parts[2]) if len(parts) > 3 else ""
                    own = layer == "platform" and home == backend
                    if backend in BACKENDS and not own and not (layer == "platform" and len(parts) == 3):
                        found.append(f"{where}: {inc} is the {backend} backend's private header")
            elif parts[0] in ("tools", "python", "nccl", "examples"):
                local = (path.parent / inc).exists()
                if not inc.startswith("gnio/") and not local:
                    found.append(f"{where}: {parts[0]} includes {inc} (not a public header)")
            elif parts[0] == "perf":
                local = (path.parent / inc).exists()
                harness = inc.startswith("harness/") and parts[1] != "harness"
                if not inc.startswith("gnio/") and not local and not harness:
                    found.append(f"{where}: perf includes {inc} (neither public nor the harness)")
        if not (parts[0] == "src" and len(parts) > 1 and parts[1] == "platform"):
            for m in CAST.finditer(text):
                if m.group(1) != "Backend":
                    line = text.count("\n", 0, m.start()) + 1
                    found.append(f"{rel}:{line}: dynamic_cast to {m.group(1)} outside src/platform/")
    return found


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--allow", type=int, default=0)
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args()
    found = violations()
    if not args.quiet:
        for v in found:
            print(v)
    print(f"check-layers: {len(found)} violation(s), {args.allow} allowed")
    return 0 if len(found) <= args.allow else 1


if __name__ == "__main__":
    sys.exit(main())

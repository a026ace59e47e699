#!/usr/bin/env python3
"""Sorts the findings of one compute-sanitizer log by the library that made the call.

  scripts/sanitizer-findings.py LOG [--library-own libnccl.so]...

A finding is a block that starts "========= Program hit ..." (a failed API call) or
"========= Invalid ..." (a bad access), followed by its saved host backtrace. Its origin is
the first host frame outside the driver (libcuda.so): the library that made the call.
Findings whose origin is one of the --library-own libraries are that library's own doing
(NCCL probes its kernels' images with cudaFuncGetAttributes at initialisation, for
instance, and the driver answers "no kernel image" for the architectures it was not built
for); every other finding counts. Prints "counted N, library-own M" and the first line of
each counted finding; exits 1 when any finding counts.
"""
import argparse
import re
import sys


def findings(lines):
    block = None
    for line in lines:
        text = line.rstrip("\n")
        if re.match(r"^========= (Program hit|Invalid|Uninitialized|Race|Barrier|Error)", text):
            if block:
                yield block
            block = [text]
        elif block is not None and text.startswith("========= "):
            block.append(text)
        elif block is not None:
            yield block
            block = None
    if block:
        yield block


def origin(block):
    for line in block[1:]:
        m = re.search(r"Host Frame:.* in (\S+)$", line)
        if m and not m.group(1).startswith("libcuda.so"):
            return m.group(1)
    return ""


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("log")
    parser.add_argument("--library-own", action="append", default=[])
    args = parser.parse_args()
    with open(args.log, errors="replace") as f:
        blocks = list(findings(f))
    own = [b for b in blocks if any(origin(b).startswith(lib) for lib in args.library_own)]
    counted = [b for b in blocks if b not in own]
    print(f"counted {len(counted)}, library-own {len(own)}"
          + (f" (in {', '.join(sorted({origin(b) for b in own}))})" if own else ""))
    for b in counted[:5]:
        print("  " + b[0].replace("========= ", "") + (f" [from {origin(b)}]" if origin(b) else ""))
    return 1 if counted else 0


if __name__ == "__main__":
    sys.exit(main())

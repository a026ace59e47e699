#!/usr/bin/env bash
# Builds (if needed) and gathers what the GPU machine runs into build/device-bundle:
# the cudakit command, the test binaries, the examples. Everything is linked
# statically against its third-party code, so the bundle runs on the GPU machine's
# image without Debian's shared libraries. Carry build/device-bundle to the device call.
set -euo pipefail
cd "$(dirname "$0")/.."
make build >/dev/null
b=build/device-bundle
rm -rf "$b"
mkdir -p "$b/examples"
cp build/tools/cudakit build/tests/cudakit_device_tests build/tests/cudakit_unit_tests "$b/"
for ex in build/examples/*; do
  [ -f "$ex" ] && [ -x "$ex" ] && cp "$ex" "$b/examples/"
done
strip --strip-debug "$b"/cudakit* "$b"/examples/* 2>/dev/null || true
du -sh "$b"

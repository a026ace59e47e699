#!/usr/bin/env bash
# Builds (if needed) and gathers what the GPU machine runs into build/device-bundle:
# the cudakit command, the test binaries, the examples. Everything is linked
# statically against its third-party code, so the bundle runs on the GPU machine's
# image without Debian's shared libraries. Carry build/device-bundle to the device call,
# or run this script on the GPU machine itself (it has CMake, Ninja, g++ and GoogleTest,
# and 16 cores: a clean build takes a few minutes there, far less than here).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --preset default >/dev/null
cmake --build --preset default -j "$(nproc)" >build/build.log 2>&1 || { tail -40 build/build.log; exit 1; }
b=build/device-bundle
rm -rf "$b"
mkdir -p "$b/examples"
cp build/tools/cudakit build/tests/cudakit_device_tests build/tests/cudakit_unit_tests build/tests/cudakit_profiler_tests \
   build/tests/libcudakit_nvtx_recorder.so "$b/"
for ex in build/examples/* build/examples/decoder/decoder; do
  [ -f "$ex" ] && [ -x "$ex" ] && cp "$ex" "$b/examples/"
done
strip --strip-debug "$b"/cudakit* "$b"/examples/* 2>/dev/null || true
du -sh "$b"

#!/usr/bin/env bash
# Builds (if needed) and gathers what the GPU machine runs into BUILD/device-bundle:
# the cudakit command, the test binaries, the examples. Everything is linked
# statically against its third-party code, so the bundle runs on the GPU machine's
# image without Debian's shared libraries. Carry the bundle to the device call, or run
# this script on the GPU machine itself (it has CMake, Ninja, g++ and GoogleTest, and 16
# cores: a clean build takes a few minutes there, far less than here).
#
#   scripts/make-bundle.sh                     # build/ from the default preset
#   scripts/make-bundle.sh --build-dir DIR     # an already configured build folder, e.g.
#                                              # one made with -DCUDAKIT_KERNEL_ARCHS=90
#   scripts/make-bundle.sh ... --no-unit-tests # leave the fake-driver unit tests out
#                                              # (the largest binary: a smaller carry)
set -euo pipefail
cd "$(dirname "$0")/.."
build=build
unit_tests=1
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build=$2; shift 2 ;;
    --no-unit-tests) unit_tests=0; shift ;;
    *) echo "make-bundle: unknown option $1" >&2; exit 3 ;;
  esac
done
# The examples folder's own "all" (Ninja's per-folder target) builds every example.
targets=(cudakit_tool cudakit_device_tests cudakit_profiler_tests cudakit_nvtx_recorder examples/all)
[ $unit_tests -eq 1 ] && targets+=(cudakit_unit_tests)
# CUDAKIT_KERNEL_ARCHS in the environment (e.g. 90) narrows the kernels built in build/.
if [ "$build" = build ]; then cmake --preset default ${CUDAKIT_KERNEL_ARCHS:+-DCUDAKIT_KERNEL_ARCHS=$CUDAKIT_KERNEL_ARCHS} >/dev/null; fi
cmake --build "$build" -j "$(nproc)" --target "${targets[@]}" >"$build/build.log" 2>&1 ||
  { tail -40 "$build/build.log"; exit 1; }
b=$build/device-bundle
rm -rf "$b"
mkdir -p "$b/examples"
cp "$build/tools/cudakit" "$build/tests/cudakit_device_tests" "$build/tests/cudakit_profiler_tests" \
   "$build/tests/libcudakit_nvtx_recorder.so" "$b/"
[ $unit_tests -eq 1 ] && cp "$build/tests/cudakit_unit_tests" "$b/"
for ex in "$build"/examples/* "$build"/examples/decoder/decoder; do
  [ -f "$ex" ] && [ -x "$ex" ] && cp "$ex" "$b/examples/"
done
strip --strip-debug "$b"/cudakit* "$b"/examples/* 2>/dev/null || true
du -sh "$b"

#!/usr/bin/env bash
# Installs, with apt-get, whatever the build needs and this machine lacks. Quiet when
# everything is there. The CUDA toolkit itself (headers, nvcc) is not a Debian package
# of the right version: it must be at /usr/local/cuda (or CUDAToolkit_ROOT).
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
command -v cmake >/dev/null || missing+=(cmake)
command -v ninja >/dev/null || missing+=(ninja-build)
command -v g++ >/dev/null || missing+=(g++)
[ -f /usr/include/gtest/gtest.h ] || missing+=(libgtest-dev)
[ -f /usr/include/gmock/gmock.h ] || missing+=(libgmock-dev)
# The cudakit command's argument parser and JSON writer (header-only; never part of the
# library's interface). scripts/gather-tool-deps.sh copies them for machines without apt.
[ -f /usr/include/CLI/CLI.hpp ] || [ -f .deps/include/CLI/CLI.hpp ] || missing+=(libcli11-dev)
[ -f /usr/include/nlohmann/json.hpp ] || [ -f .deps/include/nlohmann/json.hpp ] || missing+=(nlohmann-json3-dev)

# make test also builds the unit tests with g++'s sanitizers. Their runtimes (libasan,
# libtsan, libubsan) come with g++ on Debian and Ubuntu (libgcc-N-dev depends on them);
# install them explicitly where they are missing.
if command -v g++ >/dev/null; then
  for runtime in libasan.so libtsan.so libubsan.so; do
    case "$(g++ -print-file-name=$runtime)" in
      /*) ;;
      *) missing+=("libgcc-$(g++ -dumpversion | cut -d. -f1)-dev"); break ;;
    esac
  done
fi

if [ ${#missing[@]} -gt 0 ]; then
  echo "ensure-deps: installing ${missing[*]}" >&2
  if [ "$(id -u)" -ne 0 ]; then sudo=sudo; else sudo=; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

cuda_root=${CUDAToolkit_ROOT:-/usr/local/cuda}
if [ ! -f "$cuda_root/include/cuda.h" ]; then
  echo "ensure-deps: the CUDA toolkit (12.0 or newer) is needed at $cuda_root (cuda.h not found); install it from NVIDIA or set CUDAToolkit_ROOT" >&2
  exit 1
fi

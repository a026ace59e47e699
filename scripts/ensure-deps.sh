#!/usr/bin/env bash
# Checks what the build needs, installs with apt-get what is missing and comes from the
# distribution, and says what is wrong, and how to fix it, where a tool is too old. Quiet
# when everything is there. The minimum versions (README.md, "Requirements"):
#
#   Linux; apt-get for the automatic installs (Debian 12, Ubuntu 22.04 or newer)
#   CMake 3.25, Ninja
#   g++ 12 or clang 14 (the compiler CMake will use: $CXX, else c++/g++)
#   the CUDA toolkit 12.x or 13.0 (cuda.h and nvcc) at /usr/local/cuda or $CUDAToolkit_ROOT
#   GoogleTest, CLI11 and nlohmann/json (the distribution's packages)
#   OpenSSL 3: libssl3 (libcrypto.so.3) at run time for the TCP rendezvous; libssl-dev for
#   make test's check of cudakit's declarations of it (the build itself needs no header)
#   clang 14 or newer with libFuzzer, for make test's fuzz targets (tests/fuzz)
#   at run time only: an NVIDIA driver for CUDA 12.0 or newer (525.60.13 or newer)
#
# Exit status: 0 when the build can go ahead, 1 after listing every problem found.
set -euo pipefail
cd "$(dirname "$0")/.."

problems=()  # what cannot be fixed here, each with what to do
missing=()   # apt packages to install

say() { echo "ensure-deps: $*" >&2; }
# version_at_least A B: whether the dotted version A is B or newer.
version_at_least() { [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n1)" = "$2" ]; }

if [ "$(uname -s)" != Linux ]; then
  say "cudakit builds and runs on Linux (the CUDA driver API as NVIDIA ships it there); this is $(uname -s)"
  exit 1
fi

# ---- what apt-get can install ----
command -v cmake >/dev/null || missing+=(cmake)
command -v ninja >/dev/null || missing+=(ninja-build)
compiler=${CXX:-}
if [ -z "$compiler" ]; then
  if command -v g++ >/dev/null; then compiler=g++; elif command -v c++ >/dev/null; then compiler=c++; else missing+=(g++); compiler=g++; fi
fi
[ -f /usr/include/gtest/gtest.h ] || missing+=(libgtest-dev)
[ -f /usr/include/gmock/gmock.h ] || missing+=(libgmock-dev)
# The cudakit command's argument parser and JSON writer (header-only; never part of the
# library's interface). scripts/gather-tool-deps.sh copies them for machines without apt.
[ -f /usr/include/CLI/CLI.hpp ] || [ -f .deps/include/CLI/CLI.hpp ] || missing+=(libcli11-dev)
[ -f /usr/include/nlohmann/json.hpp ] || [ -f .deps/include/nlohmann/json.hpp ] || missing+=(nlohmann-json3-dev)
# The TCP rendezvous authenticates its ranks with OpenSSL's libcrypto, opened at run time
# (libssl3); its headers (libssl-dev) let make test check cudakit's declarations of it.
[ -f /usr/include/openssl/evp.h ] || missing+=(libssl-dev)
if command -v ldconfig >/dev/null && ! ldconfig -p 2>/dev/null | grep -q 'libcrypto\.so\.3 '; then missing+=(libssl3); fi
# make test runs libFuzzer targets built with clang (tests/fuzz).
if ! command -v clang++ >/dev/null; then
  missing+=(clang)  # its recommended libclang-rt-N-dev brings libFuzzer
elif [ ! -f "$(clang++ -print-resource-dir)/lib/linux/libclang_rt.fuzzer-$(uname -m).a" ]; then
  missing+=("libclang-rt-$(clang++ -dumpversion | cut -d. -f1)-dev")
fi

# `make docs` (ensure-deps.sh --docs): Doxygen for the API reference.
[ "${1:-}" = --docs ] && { command -v doxygen >/dev/null || missing+=(doxygen); }

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
  if command -v apt-get >/dev/null; then
    say "installing ${missing[*]}"
    if [ "$(id -u)" -ne 0 ]; then sudo=sudo; else sudo=; fi
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    problems+=("missing: ${missing[*]} (Debian/Ubuntu package names); this machine has no apt-get: install them with its package manager")
  fi
fi

# ---- versions ----
if command -v cmake >/dev/null; then
  v=$(cmake --version | head -n1 | awk '{print $3}')
  version_at_least "$v" 3.25 ||
    problems+=("CMake $v is older than 3.25 (the presets and the CUDA language support need 3.25): install a newer one (pip install cmake, or Kitware's apt repository, apt.kitware.com)")
fi

if command -v "$compiler" >/dev/null; then
  clang_major=$("$compiler" -dM -E -x c++ /dev/null 2>/dev/null | awk '/__clang_major__/ {print $3}')
  if [ -n "$clang_major" ]; then
    [ "$clang_major" -ge 14 ] ||
      problems+=("$compiler is clang $clang_major, older than clang 14 (C++20 concepts and ranges): install clang-14 or newer, or g++-12, and set CXX")
  else
    v=$("$compiler" -dumpfullversion 2>/dev/null || "$compiler" -dumpversion)
    version_at_least "$v" 12 ||
      problems+=("$compiler is g++ $v, older than g++ 12 (C++20 concepts and ranges): install g++-12 or newer and set CXX=g++-12 (or clang 14 or newer)")
  fi
elif [ -n "${CXX:-}" ]; then
  problems+=("CXX is '$CXX', which is not a command: unset it or point it at g++ 12 or clang 14 or newer")
fi

cuda_root=${CUDAToolkit_ROOT:-/usr/local/cuda}
if [ ! -f "$cuda_root/include/cuda.h" ]; then
  problems+=("the CUDA toolkit (12.x or 13.0: headers and nvcc) is needed at $cuda_root (cuda.h not found): install it from NVIDIA (developer.nvidia.com/cuda-downloads) or set CUDAToolkit_ROOT")
else
  cuda=$(awk '/#define CUDA_VERSION / {print $3}' "$cuda_root/include/cuda.h")
  cuda_words="$((cuda / 1000)).$(((cuda % 1000) / 10))"
  if [ "$cuda" -lt 12000 ]; then
    problems+=("the CUDA toolkit at $cuda_root is $cuda_words, older than 12.0: install 12.x or 13.0, or set CUDAToolkit_ROOT to one")
  elif [ "$cuda" -gt 13000 ]; then
    say "note: the CUDA toolkit at $cuda_root is $cuda_words; cudakit is built and tested with 12.x and 13.0"
  fi
  [ -x "$cuda_root/bin/nvcc" ] ||
    problems+=("nvcc is not at $cuda_root/bin/nvcc: the default build compiles the kernels of the tests, examples and the cudakit command with it (a library-only build does not need it: README, \"Using cudakit in your project\")")
fi

# The driver is needed only to run on a GPU; without one the device tests skip.
if command -v nvidia-smi >/dev/null; then
  driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -n1 || true)
  if [ -n "$driver" ] && ! version_at_least "$driver" 525.60.13; then
    say "note: NVIDIA driver $driver is older than 525.60.13 (CUDA 12.0): the build works, but cudakit will refuse this driver at run time; update the driver"
  fi
fi

if [ ${#problems[@]} -gt 0 ]; then
  for p in "${problems[@]}"; do say "$p"; done
  exit 1
fi

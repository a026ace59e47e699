#!/usr/bin/env bash
# Runs the data-parallel example as N processes of one job, one GPU each, bootstrapped
# through cudakit's TCP rendezvous at rank 0 (examples/data_parallel_rank.cpp).
#
#   scripts/run-data-parallel.sh [N] [BINARY]
#
# N defaults to the number of GPUs (1 when nvidia-smi is absent); BINARY to the build's
# data_parallel_rank (or the device bundle's). Each rank's output goes to stdout with a
# "[rank r]" prefix; the script exits 0 when every rank printed "ok:", 1 otherwise.
# NVLink multicast stays off: NCCL_NVLS_ENABLE=0 unless it is set already.
set -uo pipefail
cd "$(dirname "$0")/.."
n="${1:-$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)}"
[ -z "$n" ] || [ "$n" -lt 1 ] && n=1
bin="${2:-}"
if [ -z "$bin" ]; then
  for c in build/examples/data_parallel_rank build/device-bundle/examples/data_parallel_rank examples/data_parallel_rank; do
    [ -x "$c" ] && bin="$c" && break
  done
fi
[ -x "$bin" ] || { echo "run-data-parallel: no data_parallel_rank binary (build the examples first)"; exit 1; }
export NCCL_NVLS_ENABLE="${NCCL_NVLS_ENABLE:-0}"
port=$((20000 + RANDOM % 20000))
logs="$(mktemp -d)"
pids=()
for ((r = 0; r < n; r++)); do
  CUDAKIT_RANK=$r CUDAKIT_RANKS=$n CUDAKIT_RENDEZVOUS="127.0.0.1:$port" timeout 300 "$bin" >"$logs/$r" 2>&1 &
  pids+=($!)
done
failed=0
for ((r = 0; r < n; r++)); do
  wait "${pids[$r]}" || failed=1
  sed "s/^/[rank $r] /" "$logs/$r"
  grep -q '^ok:' "$logs/$r" || failed=1
done
rm -rf "$logs"
if [ "$failed" -eq 0 ]; then echo "ok: $n processes"; else echo "FAILED: see the ranks' output above"; fi
exit "$failed"

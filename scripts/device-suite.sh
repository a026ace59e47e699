#!/usr/bin/env bash
# The whole GPU cycle in one call (run on the GPU machine, from the repo root):
#   info, the device test suite (CUDAKIT_REQUIRE_GPU=1: a skip is a failure), the
#   examples, the multi-process NCCL example and `cudakit bench --filter nccl`, cudakit
#   doctor (text and --json), the doctor and the examples again with CUDA_FORCE_PTX_JIT=1
#   (the kernels' PTX path), cudakit bench (--json --plot), the peers' script, the decoder
#   workload beside PyTorch (bench/decoder_compare.py), and compute-sanitizer over the
#   device suite. NVLink multicast stays off (NCCL_NVLS_ENABLE=0) throughout.
# Binaries come from a bundle built elsewhere (scripts/make-bundle.sh), so the GPU
# machine spends no time compiling. Full logs go to $OUT (logs.tgz plus the key files);
# a short summary is printed last.
#
#   scripts/device-suite.sh [--bundle DIR] [--build-if-needed] [--skip STAGE]... [--only STAGE]...
#   --build-if-needed: when the bundle is missing or does not run on this machine (one
#   built elsewhere may need other system libraries), build one here first
#   (scripts/make-bundle.sh, without the unit tests; CUDAKIT_KERNEL_ARCHS, e.g. 90,
#   shortens the build).
#   stages: info tests examples sanitize-examples nccl doctor ptx-jit bench peers decoder sanitize
#   (and, run only when named with --only: blas, the cuBLAS bench group at 41 rounds;
#   profile, the decoder's graph-cache step kernel by kernel under ncu; probe, the
#   decoder's own settings side by side, cudakit only)
set -uo pipefail

bundle=build/device-bundle
build_if_needed=0
declare -A skip=() only=()
while [ $# -gt 0 ]; do
  case "$1" in
    --bundle) bundle=$2; shift 2 ;;
    --build-if-needed) build_if_needed=1; shift ;;
    --skip) skip[$2]=1; shift 2 ;;
    --only) only[$2]=1; shift 2 ;;
    *) echo "device-suite: unknown option $1" >&2; exit 3 ;;
  esac
done
want() { [ -z "${skip[$1]:-}" ] && { [ ${#only[@]} -eq 0 ] || [ -n "${only[$1]:-}" ]; }; }

out=${OUT:-/tmp/cudakit-device-out}
logs=$out/logs
mkdir -p "$logs"
export CUDAKIT_REQUIRE_GPU=1
export NCCL_NVLS_ENABLE=0  # shared machines: NVLink multicast stays off (docs/multi-gpu.md)
export LD_LIBRARY_PATH=$bundle/lib:${LD_LIBRARY_PATH:-}
summary=$out/summary.txt
: >"$summary"
note() { echo "$*" | tee -a "$summary"; }

note "cudakit device suite, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
if ! "$bundle/cudakit" --version >"$logs/bundle-check.txt" 2>&1; then
  if [ $build_if_needed -eq 0 ]; then
    note "bundle: $bundle/cudakit does not run here ($(tail -1 "$logs/bundle-check.txt")); build one with scripts/make-bundle.sh or pass --build-if-needed"
    exit 2
  fi
  note "bundle: $bundle does not run here ($(tail -1 "$logs/bundle-check.txt")): building one"
  start=$(date +%s)
  if ! scripts/make-bundle.sh --no-unit-tests >"$logs/make-bundle.txt" 2>&1; then
    note "bundle: the build failed after $(( $(date +%s) - start )) s (logs/make-bundle.txt)"
    tail -20 "$logs/make-bundle.txt"
    exit 2
  fi
  bundle=build/device-bundle
  export LD_LIBRARY_PATH=$bundle/lib:${LD_LIBRARY_PATH:-}
  note "bundle: built in $(( $(date +%s) - start )) s"
fi
note "bundle: $bundle ($("$bundle/cudakit" --version 2>&1))"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv,noheader >"$logs/nvidia-smi.txt" 2>&1
note "gpu: $(head -1 "$logs/nvidia-smi.txt")"

status=0
if want info; then
  "$bundle/cudakit" info >"$logs/info.txt" 2>&1
  "$bundle/cudakit" info --json >"$logs/info.json" 2>&1
  note "info: exit $? ($(grep -m1 '^driver' "$logs/info.txt"))"
fi

if want tests; then
  start=$(date +%s)
  timeout 420 "$bundle/cudakit_device_tests" --gtest_output=json:"$logs/device_tests.json" >"$logs/device_tests.log" 2>&1
  rc=$?
  [ $rc -ne 0 ] && status=1
  passed=$(grep -c '^\[       OK \]' "$logs/device_tests.log")
  failed=$(grep -c '^\[  FAILED  \] [A-Za-z]' "$logs/device_tests.log")
  skipped=$(grep -c '^\[  SKIPPED \] [A-Za-z].* ms)$' "$logs/device_tests.log")  # not gtest's closing list
  note "device tests: exit $rc, $passed passed, $failed failed, $skipped skipped, $(( $(date +%s) - start )) s"
  grep '^\[  FAILED  \] [A-Za-z]' "$logs/device_tests.log" | sort -u | head -20 | tee -a "$summary"
  if [ -x "$bundle/cudakit_unit_tests" ]; then
    "$bundle/cudakit_unit_tests" >"$logs/unit_tests.log" 2>&1
    note "unit tests (fake driver) on the GPU machine: exit $? $(tail -1 "$logs/unit_tests.log")"
  fi
  if [ -x "$bundle/cudakit_profiler_tests" ]; then
    # The profiler's names, as an injected NVTX tool sees them, with the names on and off.
    tool=$(cd "$bundle" && pwd)/libcudakit_nvtx_recorder.so
    NVTX_INJECTION64_PATH=$tool "$bundle/cudakit_profiler_tests" >"$logs/profiler_tests.log" 2>&1
    rc=$?
    CUDAKIT_NVTX=0 NVTX_INJECTION64_PATH=$tool "$bundle/cudakit_profiler_tests" >>"$logs/profiler_tests.log" 2>&1
    rc_off=$?
    [ $rc -ne 0 ] || [ $rc_off -ne 0 ] && status=1
    note "profiler names (NVTX tool injected): exit $rc with names on, $rc_off with CUDAKIT_NVTX=0"
  fi
fi

if want examples; then
  for ex in "$bundle"/examples/*; do
    [ -x "$ex" ] || continue
    timeout 120 "$ex" >"$logs/example_$(basename "$ex").log" 2>&1
    rc=$?
    [ $rc -ne 0 ] && status=1
    note "example $(basename "$ex"): exit $rc; $(tail -1 "$logs/example_$(basename "$ex").log")"
  done
fi

if want sanitize-examples && command -v compute-sanitizer >/dev/null; then
  # A correct program that uses cudakit is clean under compute-sanitizer's default
  # settings (memcheck, failed API calls reported), as users run it in their own CI:
  # each example once, --error-exitcode 1, 0 errors expected. A finding's first lines
  # (which call failed, or which access) go to the summary.
  for ex in "$bundle"/examples/*; do
    [ -x "$ex" ] || continue
    name=$(basename "$ex")
    # The decoder runs minutes of GEMMs; under memcheck it would take the stage's hour.
    [ "$name" = decoder ] && continue
    log=$logs/sanitize_example_$name.log
    timeout 600 compute-sanitizer --error-exitcode 1 "$ex" >"$log" 2>&1
    rc=$?
    errors=$(grep -oE 'ERROR SUMMARY: [0-9]+' "$log" | tail -1 | grep -oE '[0-9]+$')
    # NCCL's own calls are NCCL's: at initialisation it asks cudaFuncGetAttributes about
    # each of its kernels, and those built for other architectures answer "no kernel
    # image" (4 findings on an H200, every frame below the driver in libnccl.so). They are
    # reported apart; every other finding fails the stage.
    sorted=$(python3 scripts/sanitizer-findings.py "$log" --library-own libnccl.so)
    counted_ok=$?
    if [ -z "$errors" ]; then
      status=1  # no summary: the run crashed or timed out
    elif [ "$errors" = 0 ]; then
      [ $rc -ne 0 ] && status=1
    elif [ $counted_ok -ne 0 ]; then
      status=1
    fi
    note "compute-sanitizer (default settings) example $name: exit $rc, ${errors:-no summary} errors; $(echo "$sorted" | head -1)"
    echo "$sorted" | tail -n +2 | tee -a "$summary"
  done
fi

if want nccl; then
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
  [ "${gpus:-0}" -ge 1 ] || gpus=1
  timeout 300 scripts/run-data-parallel.sh "$gpus" "$bundle/examples/data_parallel_rank" >"$logs/nccl_processes.txt" 2>&1
  rc=$?
  [ $rc -ne 0 ] && status=1
  note "nccl: $gpus-process data-parallel step: exit $rc; $(tail -1 "$logs/nccl_processes.txt")"
  timeout 300 "$bundle/cudakit" bench --filter nccl --json "$out/bench_nccl.json" >"$logs/bench_nccl.txt" 2>&1
  rc=$?
  [ $rc -ne 0 ] && status=1
  note "nccl: cudakit bench --filter nccl: exit $rc"
  grep -E 'nccl|peer copy' "$logs/bench_nccl.txt" | head -40 >>"$summary"
fi

# The doctor's "modules" line says which code the GPU ran from the embedded kernels:
# "native sm_90" on an H200.
kernels_line() { grep -m1 -E '^  (pass|FAIL) +modules' "$1" | sed -E 's/^ *(pass|FAIL) +modules +[0-9.]+ ms +//'; }

if want doctor; then
  timeout 300 "$bundle/cudakit" doctor >"$logs/doctor.txt" 2>&1
  rc=$?
  [ $rc -ne 0 ] && status=1
  note "doctor: exit $rc; $(tail -1 "$logs/doctor.txt"); kernels: $(kernels_line "$logs/doctor.txt")"
  timeout 300 "$bundle/cudakit" doctor --no-perf --json >"$logs/doctor.json" 2>"$logs/doctor-json.err"
  rc=$?
  parsed=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print("exit_code", d["exit_code"], "failed", d["failed"])' "$logs/doctor.json" 2>&1)
  { [ $rc -ne 0 ] || ! echo "$parsed" | grep -q '^exit_code 0 failed 0$'; } && status=1
  note "doctor --json: exit $rc; $parsed"
fi

# The PTX path: the driver JIT-compiles the kernels' PTX instead of running their machine
# code. The doctor's modules check must say "PTX JIT from compute_XY (CUDA_FORCE_PTX_JIT=1)"
# and every check and example must pass as they do natively.
if want ptx-jit; then
  CUDA_FORCE_PTX_JIT=1 timeout 300 "$bundle/cudakit" doctor --no-perf >"$logs/ptx-jit-doctor.txt" 2>&1
  rc=$?
  kernels=$(kernels_line "$logs/ptx-jit-doctor.txt")
  { [ $rc -ne 0 ] || [[ "$kernels" != "PTX JIT from compute_"*"(CUDA_FORCE_PTX_JIT=1)" ]]; } && status=1
  note "ptx-jit doctor: exit $rc; $(tail -1 "$logs/ptx-jit-doctor.txt"); kernels: $kernels"
  # saxpy_nvrtc and decoder are left out: they load cubins that NVRTC compiled for the GPU
  # present, machine code without PTX, which the driver refuses under CUDA_FORCE_PTX_JIT=1.
  # The cuBLAS examples too: cuBLAS itself makes no handle under CUDA_FORCE_PTX_JIT=1
  # (CUBLAS_STATUS_INTERNAL_ERROR from cublasCreate), whatever calls it.
  for ex in "$bundle"/examples/*; do
    [ -x "$ex" ] || continue
    case "$(basename "$ex")" in saxpy_nvrtc|decoder|blas_*) continue ;; esac
    CUDA_FORCE_PTX_JIT=1 timeout 120 "$ex" >"$logs/ptx-jit-example_$(basename "$ex").log" 2>&1
    rc=$?
    [ $rc -ne 0 ] && status=1
    note "ptx-jit example $(basename "$ex"): exit $rc; $(tail -1 "$logs/ptx-jit-example_$(basename "$ex").log")"
  done
fi

if want bench; then
  timeout 600 "$bundle/cudakit" bench --json "$out/bench.json" --plot "$out/bench.svg" >"$logs/bench.txt" 2>&1
  rc=$?
  note "bench: exit $rc"
  # The judged figures; the reported ones (the idiom's phases, ...) are in bench.txt.
  grep -E '^(  |[a-z])' "$logs/bench.txt" | grep -E 'ratio|x raw|target' | grep -v 'reported$' | head -60 >>"$summary"
fi

# The cuBLAS group alone at 41 rounds, beside the raw library: only with --only blas (the
# bench stage runs the same group in the whole bench).
if [ -n "${only[blas]:-}" ]; then
  timeout 300 "$bundle/cudakit" bench --filter blas --rounds 41 --json "$out/bench_blas.json" >"$logs/bench_blas.txt" 2>&1
  rc=$?
  [ $rc -ne 0 ] && status=1
  note "blas: cudakit bench --filter blas --rounds 41: exit $rc"
  grep -E '^(  |[a-z])' "$logs/bench_blas.txt" | grep -E 'ratio|x raw|target' | grep -v 'reported$' | head -30 >>"$summary"
fi

if want peers && [ -f bench/peers.py ]; then
  PYTHONUNBUFFERED=1 timeout 240 python3 bench/peers.py --cudakit "$bundle/cudakit" --json "$out/peers.json" >"$logs/peers.txt" 2>&1
  note "peers: exit $?"
  tail -25 "$logs/peers.txt" >>"$summary"
fi

# The decoder workload on cudakit and on PyTorch, on the same weights, in this one run
# (bench/decoder_compare.py): its JSON, SVG chart and table go to $OUT/decoder; the
# weights file (about 270 MB, written by the run itself) is removed afterwards. The
# stage passes when every correctness check holds: hidden states within 1e-2 relative L2
# of PyTorch's, and cudakit's greedy tokens agreeing with the fp32 reference at least as
# often as PyTorch's (ties within one bf16 step set aside), and the graph cache's own
# checks. The speed goals (against PyTorch's best arm) are reported, not judged.
# DECODER_TIMEOUT bounds the stage (PyTorch's torch.compile arms compile on the GPU
# machine); DECODER_ARGS adds options (--batches, --autotune-batches, --torch-compile off).
if want decoder && [ -x "$bundle/examples/decoder" ]; then
  start=$(date +%s)
  limit=${DECODER_TIMEOUT:-570}
  # shellcheck disable=SC2086
  PYTHONUNBUFFERED=1 timeout "$limit" python3 bench/decoder_compare.py --decoder "$bundle/examples/decoder" \
    --out "$out/decoder" --python "${DECODER_PYTHON:-python3}" --timeout 180 --torch-timeout $((limit - 120 > 120 ? limit - 120 : 120)) \
    ${DECODER_ARGS:-} >"$logs/decoder.txt" 2>&1
  rc=$?
  [ $rc -ne 0 ] && status=1
  note "decoder: exit $rc, $(( $(date +%s) - start )) s"
  if [ -f "$out/decoder/decoder.json" ]; then
    verdict=$(python3 - "$out/decoder/decoder.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
failed = [k["check"] for k in m["checks"] if not k["passed"]]
c = m["results"]["pytorch"].get("check", {})
f = c.get("fp32_reference", {})
detail = ""
if "cudakit_token_agreement_decided" in f:
    detail = (f"hidden rel L2 max {c['hidden_rel_l2_max']:.2e} (bound 1e-2); tokens vs fp32: cudakit "
              f"{100 * f['cudakit_token_agreement_decided']:.2f}%, PyTorch {100 * f['pytorch_token_agreement_decided']:.2f}% "
              f"of {f['positions'] - f['ties_set_aside']} decided positions")
print(("PASS" if not failed else "FAIL") + (": " + detail if detail else "")
      + "".join("\n  failed: " + k for k in failed))
PY
)
    note "decoder check: $verdict"
    case "$verdict" in PASS*) ;; *) status=1 ;; esac
  else
    note "decoder check: FAIL (no decoder.json)"
    status=1
  fi
  if [ -f "$out/decoder/decoder.txt" ]; then sed -n '/^goals/,$p' "$out/decoder/decoder.txt" >>"$summary"
  else tail -15 "$logs/decoder.txt" >>"$summary"; fi
  rm -f "$out/decoder/weights.safetensors"
fi

# The decoder's step kernel by kernel (bench/decoder_profile.py): Nsight Compute's time
# and DRAM reads of each kernel of the graph cache's replays at batch PROFILE_BATCH
# (default 1), beside the streaming floor. Only with --only profile.
# The decoder's settings (the GEMV path or cuBLASLt, early triggers or not) side by side,
# cudakit only (bench/decoder_probe.py; PROBE_SETTINGS, PROBE_BATCHES). Only with --only probe.
if [ -n "${only[probe]:-}" ] && [ -x "$bundle/examples/decoder" ]; then
  start=$(date +%s)
  timeout "${PROBE_TIMEOUT:-560}" python3 bench/decoder_probe.py --decoder "$bundle/examples/decoder" \
    --out "$out/probe" --batches "${PROBE_BATCHES:-1,8,32}" \
    --settings "${PROBE_SETTINGS:-gemv,gemv-fused,gemv-g1,gemv-g4,lt}" \
    >"$logs/probe.txt" 2>&1
  rc=$?
  [ $rc -ne 0 ] && status=1
  note "probe: exit $rc, $(( $(date +%s) - start )) s"
  head -40 "$logs/probe.txt" >>"$summary"
  rm -rf "$out/probe/data" "$out/probe"/*.check.safetensors
fi

if [ -n "${only[profile]:-}" ] && [ -x "$bundle/examples/decoder" ]; then
  start=$(date +%s)
  timeout "${PROFILE_TIMEOUT:-420}" python3 bench/decoder_profile.py --decoder "$bundle/examples/decoder" \
    --out "$out/profile" --batch "${PROFILE_BATCH:-1}" >"$logs/profile.txt" 2>&1
  rc=$?
  [ $rc -ne 0 ] && status=1
  note "profile: exit $rc, $(( $(date +%s) - start )) s"
  head -40 "$logs/profile.txt" >>"$summary"
  rm -rf "$out/profile/data" "$out/profile/check.safetensors"
fi

if want sanitize && command -v compute-sanitizer >/dev/null; then
  # Every device test under each tool, so that "zero findings" covers the whole suite.
  # Each tool runs one test suite per process; the processes run side by side
  # (SANITIZE_JOBS at a time), each with its own time limit. A tool's
  # findings are its ERROR SUMMARY; a test that fails its own checks is a test failure,
  # reported apart.
  # API-error reporting is off: many tests provoke driver errors on purpose. *Poison*
  # leaves out PoisonedContextTest, whose child process writes through a bad address on
  # purpose (memcheck would report it, and the sanitizer follows children).
  # The tools run kernels one at a time: the ordering tests' gates must not hold a stream
  # there (tests/device/stream_gate.hpp says what those tests check under a sanitizer).
  export CUDAKIT_TEST_UNDER_SANITIZER=1
  base_filter=${SANITIZE_FILTER:-'*'}
  exclude='*Poison*:*Nccl*'  # NCCL's own kernels are not cudakit's to check; its tests spawn processes
  # 4 at a time: with 8 memcheck and racecheck processes at once, stream creation ran out
  # of device memory (CUDA_ERROR_OUT_OF_MEMORY in 12 tests on an H200).
  jobs=${SANITIZE_JOBS:-4}
  limit=${SANITIZE_TIMEOUT:-300}
  # The suites with a test that runs (not the child entry points, all DISABLED_, that
  # two-process tests start themselves).
  suites=$("$bundle/cudakit_device_tests" --gtest_list_tests --gtest_filter="$base_filter" |
    awk '/^[A-Za-z][^ ]*\.$/ { s = substr($1, 1, length($1) - 1); next }
         /^  / && s != "" && $1 !~ /^DISABLED_/ && !(s in seen) { seen[s] = 1; print s }' | grep -v Poison | grep -v Nccl)
  plan=$logs/sanitize_plan.txt
  : >"$plan"
  for tool in memcheck racecheck synccheck initcheck; do
    for suite in $suites; do
      # The cuBLAS suites run under memcheck and synccheck only: racecheck and initcheck
      # would judge NVIDIA's GEMM kernels (their shared-memory pipelines and workspace
      # scratch), not cudakit's use of them; memcheck checks every address cudakit hands them.
      # initcheck does not see the writes of cuBLASLt's kernels on an H200: it reports every
      # later read of a GEMM's output as uninitialized, in the decoder's attention kernels
      # as in a PyTorch program that reads F.linear's output, while the values read are the
      # GEMM's (checked against the host and against PyTorch). The decoder's suite, whose
      # kernels read GEMM outputs throughout, runs under memcheck, racecheck and synccheck.
      case "$tool:$suite" in racecheck:*Blas* | initcheck:*Blas* | initcheck:DecoderTest) continue ;; esac
      # The full-size decoder runs past any time limit under racecheck; its small twin
      # takes every kernel and GEMM path of a step. (Only the twin: the GEMV-against-
      # cuBLASLt test runs cuBLASLt's split-K kernels at up to 32 rows, whose shared-memory
      # pipelines racecheck flags inside NVIDIA's kernels, as in the cuBLAS suites above.)
      tests="$suite.*"
      case "$tool:$suite" in racecheck:DecoderTest) tests="$suite.EightGraphCacheStepsOfASmallDecoder*" ;; esac
      # memcheck and synccheck misreport the two device-side loops (conditional while
      # nodes) whose kernels are programmatic dependents: on an H100 with driver 580,
      # memcheck called a 4-byte read at the very start of a live 4-byte allocation "out
      # of bounds ... inside the nearest allocation at" that same address, and synccheck
      # called every barrier of the decoder's first kernel divergent, barriers that every
      # thread of the block reaches unconditionally. With the decoder's programmatic
      # launches off, memcheck finds nothing in its loop (loop_no_pdl below), but
      # synccheck still reports those barriers, and with the GEMV path off as well the
      # loop's graph faults on an illegal address under synccheck only: the same test
      # without a tool passes, its tokens equal to those of one step per launch. The same
      # kernels in the graph cache's replays draw no report from any tool. So the
      # programmatic loop test runs under racecheck and initcheck, the decoder's loop
      # under memcheck without programmatic launches.
      case "$tool:$suite" in
        memcheck:DecoderTest | synccheck:DecoderTest) exclude_here="$exclude:*StepsInOneDeviceSideLoop*" ;;
        memcheck:ProgrammaticLaunchGpuTest | synccheck:ProgrammaticLaunchGpuTest) exclude_here="$exclude:*ALoopOfSteps*" ;;
        *) exclude_here=$exclude ;;
      esac
      echo "$tool ${suite//\//_} $tests-$exclude_here" >>"$plan"
    done
  done
  if grep -qx DecoderTest <<<"$suites"; then
    echo "memcheck DecoderTest_loop_no_pdl DecoderTest.StepsInOneDeviceSideLoop* CUDAKIT_DECODER_PDL=0" >>"$plan"
  fi
  run_one() {  # tool name filter [environment]
    env ${4:-} timeout "$limit" compute-sanitizer --tool "$1" --report-api-errors no --error-exitcode 99 \
      "$bundle/cudakit_device_tests" --gtest_filter="$3" >"$logs/sanitize_$1_$2.log" 2>&1
    echo "$1 $2 $?" >>"$logs/sanitize_exit.txt"
  }
  export -f run_one
  export bundle logs limit
  : >"$logs/sanitize_exit.txt"
  start=$(date +%s)
  # initcheck runs one process at a time, after the others. Beside other sanitizer
  # processes on the GPU it reported uninitialized reads that the data contradict: in
  # the 16-thread graph stress test, reads of a buffer the graph's previous node had just
  # written, in replays whose every output matched the host reference on fresh random
  # data; the same binary under initcheck alone, or beside 8 other initcheck processes,
  # reported none. Serial, a finding is one to chase.
  grep -v '^initcheck ' "$plan" | xargs -P "$jobs" -L 1 bash -c 'run_one "$0" "$1" "$2" "$3"'
  grep '^initcheck ' "$plan" | xargs -P 1 -L 1 bash -c 'run_one "$0" "$1" "$2" "$3"'
  # Beside other sanitizer processes a suite can run out of device resources (a stream
  # or a context refused with CUDA_ERROR_OUT_OF_MEMORY): such a run is repeated alone,
  # and the summary counts the repeats.
  cp "$logs/sanitize_exit.txt" "$logs/sanitize_exit_first.txt"
  repeated=0
  while read -r tool name rc; do
    [ "$rc" != 0 ] && grep -q CUDA_ERROR_OUT_OF_MEMORY "$logs/sanitize_${tool}_${name}.log" || continue
    mv "$logs/sanitize_${tool}_${name}.log" "$logs/sanitize_${tool}_${name}.log.beside-others"
    grep "^$tool $name " "$plan" | { read -r t s f e; run_one "$t" "$s" "$f" "$e"; }
    repeated=$((repeated + 1))
  done <"$logs/sanitize_exit_first.txt"
  note "compute-sanitizer: $(wc -l <"$plan") runs (each tool over each test suite), $repeated repeated alone after running out of device memory beside the others, $(( $(date +%s) - start )) s"
  for tool in memcheck racecheck synccheck initcheck; do
    errors=0 runs=0 timeouts=0 failed_tests=0 tests_run=0
    for log in "$logs"/sanitize_${tool}_*.log; do
      [ -f "$log" ] || continue
      runs=$((runs + 1))
      # memcheck, synccheck, initcheck: "ERROR SUMMARY: N errors"; racecheck: "RACECHECK SUMMARY: N hazards"
      e=$(grep -oE '(ERROR|RACECHECK) SUMMARY: [0-9]+' "$log" | tail -1 | grep -oE '[0-9]+$')
      if [ -z "$e" ]; then timeouts=$((timeouts + 1)); note "  $tool $(basename "$log" .log): no summary (timed out or crashed)"; else errors=$((errors + e)); fi
      tests_run=$((tests_run + $(grep -c '^\[       OK \]\|^\[  FAILED  \] [A-Za-z].*(' "$log")))
      failed_tests=$((failed_tests + $(grep -c '^\[  FAILED  \] [A-Za-z].*(' "$log")))
    done
    { [ "$errors" -ne 0 ] || [ "$timeouts" -ne 0 ]; } && status=1
    note "compute-sanitizer $tool: $errors findings over $runs run(s), $tests_run tests ($failed_tests failed their own checks), $timeouts without a summary"
    grep -h '^\[  FAILED  \] [A-Za-z].*(' "$logs"/sanitize_${tool}_*.log 2>/dev/null | sort -u | head -5 | sed "s/^/  $tool: /" | tee -a "$summary"
  done
fi

tar -czf "$out/logs.tgz" -C "$out" logs 2>/dev/null && rm -rf "$logs"
note "overall: $([ $status -eq 0 ] && echo PASS || echo FAIL)"
exit $status

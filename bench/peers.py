#!/usr/bin/env python3
"""Times the operations cudakit's benchmarks time, in the Python peers that are
installed (cuda.core, CuPy, PyTorch), and prints them beside cudakit's figures from
the same run.

  python3 bench/peers.py --cudakit build/tools/cudakit [--json FILE] [--quick]

Method, the same as `cudakit bench` where the operation exists in both: CPU submission
cost is wall time around a batch of calls (the stream synchronized between batches,
not inside the timed region), median of the batches; graph replay is wall time of
repeated replays with a synchronize at the end, per node; bandwidth is timed with CUDA
events around one large copy, median of repetitions. A peer that is not installed or
fails is reported as such, never silently left out.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

LAUNCH_BATCH = 1000
ROUNDS = 15
GRAPH_NODES = 1000
COPY_BYTES = 256 << 20


def median_per_op(fn, batch, rounds, sync):
    """Median over `rounds` of (wall time of `batch` calls of fn) / batch, in microseconds."""
    for _ in range(3):  # warm up
        fn()
    sync()
    samples = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(batch):
            fn()
        t1 = time.perf_counter()
        sync()
        samples.append((t1 - t0) / batch * 1e6)
    return statistics.median(samples)


def bench_torch(quick):
    import torch
    out = {"version": torch.__version__}
    dev = torch.device("cuda")
    s = torch.cuda.Stream()
    x = torch.zeros(1, device=dev)
    with torch.cuda.stream(s):
        out["launch_us (smallest op: x.add_(1) on 1 element)"] = median_per_op(
            lambda: x.add_(1), LAUNCH_BATCH, ROUNDS, s.synchronize)
        ev = torch.cuda.Event()
        out["event_record_us"] = median_per_op(lambda: ev.record(s), LAUNCH_BATCH, ROUNDS, s.synchronize)
    # Graph replay: GRAPH_NODES tiny kernels captured once, replayed.
    g = torch.cuda.CUDAGraph()
    y = torch.zeros(1, device=dev)
    warm = torch.cuda.Stream()
    with torch.cuda.stream(warm):
        y.add_(1)
    torch.cuda.synchronize()
    with torch.cuda.graph(g):
        for _ in range(GRAPH_NODES):
            y.add_(1)
    g.replay()
    torch.cuda.synchronize()
    reps = 20 if quick else 100
    t0 = time.perf_counter()
    for _ in range(reps):
        g.replay()
    torch.cuda.synchronize()
    out["graph_replay_us_per_node"] = (time.perf_counter() - t0) / (reps * GRAPH_NODES) * 1e6
    expected = 1 + (reps + 1) * GRAPH_NODES
    out["graph_result_correct"] = bool(y.item() == expected)
    # Copy bandwidth, pinned host memory, one large copy each way, and device to device.
    n = COPY_BYTES // 4
    h = torch.empty(n, dtype=torch.float32, pin_memory=True).uniform_()
    d = torch.empty(n, dtype=torch.float32, device=dev)
    d2 = torch.empty_like(d)

    def timed(fn, bytes_moved):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        ts = []
        for _ in range(3 if quick else 10):
            start.record()
            fn()
            stop.record()
            stop.synchronize()
            ts.append(start.elapsed_time(stop) / 1e3)
        return bytes_moved / statistics.median(ts) / 1e9

    out["h2d_pinned_GBps"] = timed(lambda: d.copy_(h, non_blocking=True), COPY_BYTES)
    out["d2h_pinned_GBps"] = timed(lambda: h.copy_(d, non_blocking=True), COPY_BYTES)
    out["d2d_GBps (read+write)"] = timed(lambda: d2.copy_(d), 2 * COPY_BYTES)
    return out


def bench_cupy(quick):
    import cupy as cp
    out = {"version": cp.__version__}
    k = cp.RawKernel(r'extern "C" __global__ void empty_kernel() {}', "empty_kernel")
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        k((1,), (1,), ())
        s.synchronize()
        out["launch_us (empty kernel)"] = median_per_op(lambda: k((1,), (1,), ()), LAUNCH_BATCH, ROUNDS, s.synchronize)
        ev = cp.cuda.Event(disable_timing=True)
        out["event_record_us"] = median_per_op(lambda: ev.record(s), LAUNCH_BATCH, ROUNDS, s.synchronize)

    def create_destroy():
        st = cp.cuda.Stream(non_blocking=True)
        del st
    out["stream_create_destroy_us"] = median_per_op(create_destroy, 200, ROUNDS, lambda: None)
    return out


def bench_cuda_core(quick):
    try:
        from cuda.core import Device, LaunchConfig, Program, ProgramOptions, launch
        import cuda.core as core
    except ImportError:
        from cuda.core.experimental import Device, LaunchConfig, Program, ProgramOptions, launch
        import cuda.core.experimental as core
    out = {"version": getattr(core, "__version__", "unknown")}
    dev = Device()
    dev.set_current()
    s = dev.create_stream()
    arch = "".join(str(v) for v in dev.compute_capability)
    prog = Program('extern "C" __global__ void empty_kernel() {}', code_type="c++",
                   options=ProgramOptions(std="c++17", arch=f"sm_{arch}"))
    mod = prog.compile("cubin")
    ker = mod.get_kernel("empty_kernel")
    cfg = LaunchConfig(grid=1, block=1)
    launch(s, cfg, ker)
    s.sync()
    out["launch_us (empty kernel)"] = median_per_op(lambda: launch(s, cfg, ker), LAUNCH_BATCH, ROUNDS, s.sync)

    def create_close():
        st = dev.create_stream()
        st.close()
    out["stream_create_destroy_us"] = median_per_op(create_close, 200, ROUNDS, lambda: None)
    return out


def run_cudakit(binary, quick):
    if not binary or not os.path.exists(binary):
        return {"error": f"cudakit binary not found: {binary}"}
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "bench.json")
        cmd = [binary, "bench", "--json", path] + (["--quick"] if quick else [])
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        if not os.path.exists(path):
            return {"error": f"cudakit bench exited {proc.returncode}: {proc.stdout[-500:]}{proc.stderr[-500:]}"}
        with open(path) as f:
            return json.load(f)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cudakit", help="path to the cudakit command (its bench runs first)")
    ap.add_argument("--json", help="write every figure to this file")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()

    results = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "peers": {}}
    results["cudakit"] = run_cudakit(args.cudakit, args.quick)
    for name, fn in (("cuda.core", bench_cuda_core), ("cupy", bench_cupy), ("torch", bench_torch)):
        try:
            results["peers"][name] = fn(args.quick)
        except Exception as e:  # a missing or failing peer is reported, not hidden
            results["peers"][name] = {"error": f"{type(e).__name__}: {e}"}

    print("\ncudakit (same run):")
    ck = results["cudakit"]
    if "error" in ck:
        print("  " + ck["error"])
    for r in ck.get("results", []):
        mine = (r.get("cudakit") or {}).get("median")
        raw = (r.get("raw") or {}).get("median")
        mine = float("nan") if mine is None else mine
        raw = float("nan") if raw is None else raw
        print(f"  {r.get('name', '?'):<44} {mine:>10.3f} {r.get('unit', '')}   raw {raw:>10.3f}")
    for peer, figures in results["peers"].items():
        print(f"\n{peer}:")
        for k, v in figures.items():
            print(f"  {k:<44} {v:>10.3f}" if isinstance(v, float) else f"  {k:<44} {v}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())

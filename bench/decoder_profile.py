#!/usr/bin/env python3
"""Which kernels bound the decoder's step: Nsight Compute over its graph-cache replays.

Runs the decoder example under ncu, profiling only kernels inside the graph cache's
replays (cudakit's NVTX range "graph cache: hit"), skipping the first ones (warm-up and
the first generation's prompt) and profiling a window of whole steps. Each kernel's time
and DRAM traffic are then summed by kernel name and set beside the streaming floor: the
time the step's DRAM reads would take at the streaming rate the decoder itself measures
(`streaming_floor` in its JSON, 3.48 TB/s on an H200). ncu runs kernels one at a time, so
the per-kernel times add up to more than a replay takes with programmatic dependent
launch: the table says where the time goes, decoder.json says what a step costs.

    python3 bench/decoder_profile.py --decoder build/device-bundle/examples/decoder \\
        --out $OUT/profile [--batch 1] [--steps 64] [--skip 3000] [--count 240]

Writes OUT/profile.json and OUT/profile.txt (the table, also printed). Exit 0 when the
profile ran, 1 when ncu or the decoder failed, 2 on bad arguments.
"""
import argparse
import csv
import io
import json
import os
import subprocess
import sys

METRICS = ["gpu__time_duration.sum", "dram__bytes_read.sum", "dram__bytes_write.sum"]
TIME_SCALE = {"nsecond": 1e-9, "ns": 1e-9, "usecond": 1e-6, "us": 1e-6, "msecond": 1e-3, "ms": 1e-3, "second": 1.0,
              "s": 1.0}
BYTE_SCALE = {"byte": 1.0, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "KB": 1e3, "MB": 1e6, "GB": 1e9}
DEFAULT_FLOOR_BYTES_PER_S = 3.48e12  # the H200's streaming rate, when the decoder's JSON lacks one


def number(text):
    """A metric value as ncu prints it (thousands separators allowed); None when empty or n/a."""
    text = text.replace(",", "").strip()
    try:
        return float(text)
    except ValueError:
        return None


def parse_raw_csv(text):
    """The rows of `ncu --import R --csv --page raw`: one dict per profiled kernel with its
    name and each metric in base units (seconds, bytes)."""
    rows = list(csv.reader(io.StringIO(text)))
    header_at = next((i for i, r in enumerate(rows) if r and r[0] == "ID" and "Kernel Name" in r), None)
    if header_at is None:
        raise ValueError("no ncu raw-page header (a row starting with ID and naming Kernel Name)")
    header = rows[header_at]
    units = {}
    kernels = []
    for r in rows[header_at + 1:]:
        if len(r) != len(header):
            continue
        if not r[0].strip().isdigit():  # the units row has no ID
            units = dict(zip(header, r))
            continue
        k = {"name": r[header.index("Kernel Name")]}
        for m in METRICS:
            if m not in header:
                continue
            v = number(r[header.index(m)])
            unit = units.get(m, "")
            scale = TIME_SCALE.get(unit) if m.startswith("gpu__time") else BYTE_SCALE.get(unit)
            if v is not None:
                k[m] = v * (scale if scale is not None else (1e-9 if m.startswith("gpu__time") else 1.0))
        kernels.append(k)
    return kernels


def short_name(name):
    """A kernel's name without its template arguments and parameter list."""
    cut = len(name)
    for ch in "<(":
        i = name.find(ch)
        if i > 0:
            cut = min(cut, i)
    return name[:cut].strip() or name


def step_period(names):
    """The number of kernels in one step: the shortest period of the launch sequence that
    repeats at least twice (a replayed step launches the same kernels in the same order);
    None when the window holds no repetition."""
    n = len(names)
    for p in range(1, n // 2 + 1):
        if all(names[i] == names[i + p] for i in range(n - p)):
            return p
    return None


def summarise(kernels, steps, floor_bytes_per_s):
    """Per kernel name: launches per step, time and DRAM bytes per step, achieved read rate,
    and the share of the step; plus the step's totals against the streaming floor."""
    groups = {}
    for k in kernels:
        g = groups.setdefault(short_name(k["name"]), {"launches": 0, "seconds": 0.0, "read": 0.0, "written": 0.0})
        g["launches"] += 1
        g["seconds"] += k.get("gpu__time_duration.sum", 0.0)
        g["read"] += k.get("dram__bytes_read.sum", 0.0)
        g["written"] += k.get("dram__bytes_write.sum", 0.0)
    total_s = sum(g["seconds"] for g in groups.values()) or 1e-30
    rows = []
    for name, g in sorted(groups.items(), key=lambda kv: -kv[1]["seconds"]):
        rows.append({
            "kernel": name,
            "launches_per_step": g["launches"] / steps,
            "us_per_step": g["seconds"] / steps * 1e6,
            "us_per_launch": g["seconds"] / g["launches"] * 1e6,
            "mib_read_per_step": g["read"] / steps / 2**20,
            "read_tb_per_s": g["read"] / g["seconds"] / 1e12 if g["seconds"] > 0 else 0.0,
            "floor_us_per_step": g["read"] / steps / floor_bytes_per_s * 1e6,
            "share": g["seconds"] / total_s,
        })
    read = sum(g["read"] for g in groups.values()) / steps
    step_s = total_s / steps
    return {
        "steps": steps,
        "kernels_profiled": len(kernels),
        "kernels_per_step": len(kernels) / steps,
        "serial_us_per_step": step_s * 1e6,
        "mib_read_per_step": read / 2**20,
        "floor_us_per_step": read / floor_bytes_per_s * 1e6,
        "floor_fraction": (read / floor_bytes_per_s) / step_s if step_s > 0 else 0.0,
        "floor_tb_per_s": floor_bytes_per_s / 1e12,
        "by_kernel": rows,
    }


def table(summary):
    lines = [
        f"{summary['kernels_profiled']} kernels profiled over {summary['steps']} steps "
        f"({summary['kernels_per_step']:.1f} a step); one at a time they take "
        f"{summary['serial_us_per_step']:.1f} us a step and read {summary['mib_read_per_step']:.1f} MiB, which the "
        f"streaming floor ({summary['floor_tb_per_s']:.2f} TB/s) reads in {summary['floor_us_per_step']:.1f} us "
        f"({100 * summary['floor_fraction']:.0f}% of the floor)",
        f"{'kernel':<44} {'per step':>8} {'us/step':>8} {'us each':>8} {'MiB/step':>9} {'TB/s':>6} {'floor us':>8} {'share':>6}",
    ]
    for r in summary["by_kernel"]:
        lines.append(f"{r['kernel'][:44]:<44} {r['launches_per_step']:>8.1f} {r['us_per_step']:>8.1f} "
                     f"{r['us_per_launch']:>8.2f} {r['mib_read_per_step']:>9.2f} {r['read_tb_per_s']:>6.2f} "
                     f"{r['floor_us_per_step']:>8.1f} {100 * r['share']:>5.1f}%")
    return "\n".join(lines)


def self_test():
    sample = (
        '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","gpu__time_duration.sum",'
        '"dram__bytes_read.sum","dram__bytes_write.sum"\n'
        '"","","","","","","","usecond","Mbyte","Kbyte"\n'
        '"0","1","decoder","h","void gemv_kernel<8>(const bf16*, int)","1","13","10.00","35.00","2"\n'
        '"1","1","decoder","h","layer_norm(float*)","1","13","2.00","1.00","1"\n'
        '"2","1","decoder","h","void gemv_kernel<8>(const bf16*, int)","1","13","1,000.00","35.00","2"\n'
    )
    k = parse_raw_csv("==PROF== Disconnected\n" + sample)
    assert len(k) == 3, k
    assert abs(k[0]["gpu__time_duration.sum"] - 10e-6) < 1e-12, k[0]
    assert abs(k[2]["gpu__time_duration.sum"] - 1e-3) < 1e-12, k[2]
    assert abs(k[0]["dram__bytes_read.sum"] - 35e6) < 1e-3 and abs(k[0]["dram__bytes_write.sum"] - 2e3) < 1e-6
    s = summarise(k, steps=2, floor_bytes_per_s=3.5e12)
    first = s["by_kernel"][0]
    assert first["kernel"] == "void gemv_kernel" and first["launches_per_step"] == 1.0, first
    assert abs(first["us_per_step"] - 505.0) < 1e-6 and abs(s["serial_us_per_step"] - 506.0) < 1e-6, s
    assert abs(s["floor_us_per_step"] - 71e6 / 2 / 3.5e12 * 1e6) < 1e-6, s
    try:
        parse_raw_csv("no header here\n")
        raise AssertionError("a text without a header was accepted")
    except ValueError:
        pass
    table(s)
    assert step_period(["a", "b", "c", "a", "b", "c", "a"]) == 3
    assert step_period(["a", "a", "a", "a"]) == 1
    assert step_period(["a", "b", "c", "d"]) is None
    print("ok: decoder_profile self-test")
    return 0


def run(cmd, log):
    with open(log, "a") as f:
        f.write("$ " + " ".join(cmd) + "\n")
        f.flush()
        return subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT).returncode


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--decoder", help="the decoder example's binary")
    ap.add_argument("--out", help="the output folder")
    ap.add_argument("--ncu", default="ncu")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--steps", type=int, default=64, help="decode steps the decoder runs per generation")
    # The run first checks correctness at batch 32 (teacher-forced steps through the graph
    # cache): skipping 3,000 replayed kernels lands in the asked batch's own steps.
    ap.add_argument("--skip", type=int, default=3000, help="graph-cache kernels left unprofiled first")
    ap.add_argument("--count", type=int, default=240, help="graph-cache kernels profiled (whole steps)")
    ap.add_argument("--nvtx-include", default="cudakit@graph cache: hit/",
                    help="ncu's NVTX filter: the graph cache's replays (cudakit's push/pop range); '' profiles all")
    ap.add_argument("--kernels-per-step", type=int, default=0,
                    help="kernels in one step (default: the period of the profiled launch sequence)")
    ap.add_argument("--self-test", action="store_true", help="check the parser and the summary, no GPU")
    a = ap.parse_args()
    if a.self_test:
        return self_test()
    if not a.decoder or not a.out:
        ap.error("--decoder and --out are needed")
    os.makedirs(a.out, exist_ok=True)
    log = os.path.join(a.out, "profile.log")
    data = os.path.join(a.out, "data")
    if not os.path.exists(os.path.join(data, "weights.safetensors")):
        if run([a.decoder, "write-inputs", data], log) != 0:
            print(f"decoder_profile: FAILED: decoder write-inputs (see {log})")
            return 1
    report = os.path.join(a.out, "decoder")
    nvtx = ["--nvtx", "--nvtx-include", a.nvtx_include] if a.nvtx_include else []
    rc = run([a.ncu, *nvtx, "--launch-skip", str(a.skip), "--launch-count", str(a.count), "--metrics",
              ",".join(METRICS), "-f", "-o", report, a.decoder, "run", "--weights", os.path.join(data, "weights.safetensors"), "--inputs",
              os.path.join(data, "inputs.safetensors"), "--json", os.path.join(a.out, "run.json"), "--check",
              os.path.join(a.out, "check.safetensors"), "--batches", str(a.batch), "--steps", str(a.steps),
              "--rounds", "1", "--sessions", "1"], log)
    if not os.path.exists(report + ".ncu-rep"):
        print(f"decoder_profile: FAILED: ncu wrote no report (exit {rc}; see {log})")
        return 1
    imported = subprocess.run([a.ncu, "--import", report + ".ncu-rep", "--csv", "--page", "raw", "--print-units",
                               "base", "--metrics", ",".join(METRICS)], capture_output=True, text=True)
    with open(os.path.join(a.out, "raw.csv"), "w") as f:
        f.write(imported.stdout)
    try:
        kernels = parse_raw_csv(imported.stdout)
    except ValueError as e:
        print(f"decoder_profile: FAILED: {e} (ncu --import exit {imported.returncode}: {imported.stderr.strip()[:300]})")
        return 1
    if not kernels:
        print(f"decoder_profile: FAILED: no kernel matched (NVTX filter {a.nvtx_include!r}, skip {a.skip}; see {log})")
        return 1
    floor = DEFAULT_FLOOR_BYTES_PER_S
    try:
        with open(os.path.join(a.out, "run.json")) as f:
            measured = json.load(f)["streaming_floor"]
        floor = measured["bytes"] / (measured["us"] * 1e-6)
    except (OSError, ValueError, KeyError, TypeError, ZeroDivisionError):
        pass
    per_step = a.kernels_per_step or step_period([k["name"] for k in kernels])
    if not per_step:
        print("decoder_profile: no repeating step in the profiled kernels (pass --kernels-per-step); "
              "the table counts the whole window as one step")
        per_step = len(kernels)
    summary = summarise(kernels, len(kernels) / per_step, floor)
    summary["decoder_exit"] = rc
    text = table(summary)
    with open(os.path.join(a.out, "profile.json"), "w") as f:
        json.dump(summary, f, indent=1)
    with open(os.path.join(a.out, "profile.txt"), "w") as f:
        f.write(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

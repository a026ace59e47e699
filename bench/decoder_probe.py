#!/usr/bin/env python3
"""The decoder's own settings side by side, cudakit only, in one run.

Runs `decoder run` once per setting (the environment switches CUDAKIT_DECODER_GEMV,
CUDAKIT_DECODER_EARLY_TRIGGER and CUDAKIT_DECODER_PDL) on the same weights and inputs, and
prints each arm's tokens per second and step time per batch size, with each step's weight
bandwidth as a fraction of the streaming floor the run measured. It answers which setting
is fastest before the comparison beside PyTorch (bench/decoder_compare.py), which takes
longer; its figures are cudakit's alone, never a comparison.

    python3 bench/decoder_probe.py --decoder build/device-bundle/examples/decoder \\
        --out $OUT/probe [--batches 1,8,32] [--steps 127] [--rounds 2] \\
        [--settings gemv,gemv-late,lt,lt-late]

Writes OUT/probe.json and OUT/probe.txt (the table, also printed). Exit 0 when every
setting ran and its own checks held, 1 otherwise, 2 on bad arguments.
"""
import argparse
import json
import os
import subprocess
import sys

# Each setting: the environment it runs under.
SETTINGS = {
    "gemv": {"CUDAKIT_DECODER_GEMV": "1", "CUDAKIT_DECODER_EARLY_TRIGGER": "1"},
    "gemv-late": {"CUDAKIT_DECODER_GEMV": "1", "CUDAKIT_DECODER_EARLY_TRIGGER": "0"},
    "gemv-no-pdl": {"CUDAKIT_DECODER_GEMV": "1", "CUDAKIT_DECODER_PDL": "0"},
    # A single row of x staged in shared memory, as several are (not held in registers).
    "gemv-staged-row": {"CUDAKIT_DECODER_GEMV": "1", "CUDAKIT_DECODER_STAGED_ROW": "1"},
    "gemv-fused": {"CUDAKIT_DECODER_GEMV": "1", "CUDAKIT_DECODER_FUSED_ATTENTION": "1"},
    "gemv-fused256": {"CUDAKIT_DECODER_GEMV": "1", "CUDAKIT_DECODER_FUSED_ATTENTION": "256"},
    # A GEMV block's column groups capped at 1, 2 or 4 at every batch (Kernels::gemv_groups).
    "gemv-g1": {"CUDAKIT_DECODER_GEMV": "1", "CUDAKIT_DECODER_GEMV_GROUPS": "1"},
    "gemv-g2": {"CUDAKIT_DECODER_GEMV": "1", "CUDAKIT_DECODER_GEMV_GROUPS": "2"},
    "gemv-g4": {"CUDAKIT_DECODER_GEMV": "1", "CUDAKIT_DECODER_GEMV_GROUPS": "4"},
    "lt": {"CUDAKIT_DECODER_GEMV": "0", "CUDAKIT_DECODER_EARLY_TRIGGER": "1"},
    "lt-late": {"CUDAKIT_DECODER_GEMV": "0", "CUDAKIT_DECODER_EARLY_TRIGGER": "0"},
}
# Every switch some setting sets: a run unsets the ones its setting leaves out.
SWITCHES = {name for switches in SETTINGS.values() for name in switches}


def rows_of(setting, result):
    """One row per (arm, batch) of a decoder run's JSON."""
    floor = result.get("streaming_floor") or {}
    out = []
    for arm in result.get("arms", []):
        step = arm.get("step_us_p50") or 0.0
        row = {"setting": setting, "arm": arm["arm"], "batch": arm["batch"], "tokens_per_s": arm["tokens_per_s"],
               "step_us_p50": step, "step_us_p99": arm.get("step_us_p99")}
        if floor.get("us") and step:
            row["floor_fraction"] = floor["us"] / step
        out.append(row)
    return out


def table(rows, floor, chain=None):
    lines = []
    if floor:
        lines.append(f"streaming floor: {floor['bytes'] / 2**20:.0f} MiB in {floor['us']:.1f} us "
                     f"({floor['bytes'] / floor['us'] / 1e6:.2f} TB/s)")
    if chain:
        lines.append(f"kernel-chain floor: the same reads in {chain['kernels']} dependent kernels, {chain['us']:.1f} us")
    lines.append(f"{'setting':<12} {'arm':<12} {'batch':>5} {'tokens/s':>10} {'step p50 us':>12} {'p99 us':>8} "
                 f"{'of floor':>8}")
    for r in sorted(rows, key=lambda r: (r["batch"], r["arm"], r["setting"])):
        frac = f"{100 * r['floor_fraction']:.0f}%" if "floor_fraction" in r else "-"
        p99 = f"{r['step_us_p99']:.1f}" if r.get("step_us_p99") else "-"
        lines.append(f"{r['setting']:<12} {r['arm']:<12} {r['batch']:>5} {r['tokens_per_s']:>10.0f} "
                     f"{r['step_us_p50']:>12.1f} {p99:>8} {frac:>8}")
    return "\n".join(lines)


def self_test():
    result = {"streaming_floor": {"bytes": 2**20 * 224, "us": 70.0},
              "arms": [{"arm": "graph_cache", "batch": 1, "tokens_per_s": 5000.0, "step_us_p50": 200.0,
                        "step_us_p99": 210.0}]}
    rows = rows_of("gemv", result)
    assert len(rows) == 1 and abs(rows[0]["floor_fraction"] - 0.35) < 1e-12, rows
    text = table(rows, result["streaming_floor"])
    assert "gemv" in text and "35%" in text and "3.36 TB/s" in text, text
    assert rows_of("lt", {"arms": []}) == []
    print("ok: decoder_probe self-test")
    return 0


def run_setting(a, data, setting, log):
    """One `decoder run` under `setting`'s switches (the others unset): its exit status
    ("timeout" when it ran out of time) and its JSON, None when it wrote none."""
    env = {k: v for k, v in os.environ.items() if k not in SWITCHES}
    env.update(SETTINGS[setting])
    out_json = os.path.join(a.out, f"{setting}.json")
    cmd = [a.decoder, "run", "--weights", os.path.join(data, "weights.safetensors"), "--inputs",
           os.path.join(data, "inputs.safetensors"), "--json", out_json, "--check",
           os.path.join(a.out, f"{setting}.check.safetensors"), "--batches", a.batches, "--steps", str(a.steps),
           "--rounds", str(a.rounds), "--sessions", str(a.sessions)]
    log.write(f"$ {setting}: {' '.join(cmd)}\n")
    log.flush()
    try:
        rc = subprocess.run(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, timeout=a.timeout).returncode
    except subprocess.TimeoutExpired:
        rc = "timeout"
    try:
        with open(out_json) as f:
            return rc, json.load(f)
    except (OSError, ValueError):
        return rc, None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--decoder", help="the decoder example's binary")
    ap.add_argument("--out", help="the output folder")
    ap.add_argument("--batches", default="1,8,32")
    ap.add_argument("--steps", type=int, default=127)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--sessions", type=int, default=2)
    ap.add_argument("--settings", default="gemv,gemv-late,lt,lt-late",
                    help="comma-separated, of: " + ", ".join(SETTINGS))
    ap.add_argument("--timeout", type=int, default=240, help="seconds for each setting's run")
    ap.add_argument("--self-test", action="store_true", help="check the table, no GPU")
    a = ap.parse_args()
    if a.self_test:
        return self_test()
    if not a.decoder or not a.out:
        ap.error("--decoder and --out are needed")
    settings = [s for s in a.settings.split(",") if s]
    unknown = [s for s in settings if s not in SETTINGS]
    if unknown:
        ap.error(f"unknown settings {unknown}; known: {', '.join(SETTINGS)}")
    os.makedirs(a.out, exist_ok=True)
    data = os.path.join(a.out, "data")
    rows, floor, chain, failed = [], None, None, []
    with open(os.path.join(a.out, "probe.log"), "a") as log:
        if subprocess.run([a.decoder, "write-inputs", data], stdout=log, stderr=subprocess.STDOUT).returncode != 0:
            print("decoder_probe: FAILED: decoder write-inputs")
            return 1
        for setting in settings:
            rc, result = run_setting(a, data, setting, log)
            if rc != 0:
                failed.append(f"{setting} (exit {rc})")
            if result is not None:
                floor = floor or result.get("streaming_floor")
                chain = chain or result.get("kernel_chain_floor")
                rows += rows_of(setting, result)
    text = table(rows, floor, chain)
    if failed:
        text += "\nFAILED: " + ", ".join(failed) + " (probe.log)"
    with open(os.path.join(a.out, "probe.json"), "w") as f:
        json.dump({"settings": {s: SETTINGS[s] for s in settings}, "streaming_floor": floor,
                   "kernel_chain_floor": chain, "rows": rows,
                   "failed": failed}, f, indent=1)
    with open(os.path.join(a.out, "probe.txt"), "w") as f:
        f.write(text + "\n")
    print(text)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

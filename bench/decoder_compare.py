#!/usr/bin/env python3
"""The decoder workload on cudakit and on PyTorch in one run: writes the weights and
inputs once (examples/decoder), runs `decoder run` (cudakit's arms and its correctness
check) and bench/decoder_torch.py (PyTorch's arms, and the comparison with cudakit's
hidden states and tokens), then merges both into one JSON, an SVG chart and a text table,
with each goal's ratio.

  python3 bench/decoder_compare.py --decoder build/examples/decoder/decoder --out DIR \
      [--python python3] [--batches 1,8,32] [--steps 255] [--rounds 3] [--sessions 4]
  python3 bench/decoder_compare.py --markdown bench/results/<version>/decoder.json

Writes DIR/decoder.json, DIR/decoder.svg, DIR/decoder.txt (and each side's own JSON and
log). --markdown prints the README's table from a merged JSON.

Exit codes: 0 both sides ran and every correctness check passed (a missed speed goal is
reported, not counted; --strict-goals counts it); 1 a side failed or a check failed;
2 no GPU.
"""
import argparse
import datetime
import json
import os
import subprocess
import sys
import time

ARMS = [  # (side, arm, label)
    ("cudakit", "stream", "cudakit, one stream"),
    ("cudakit", "graph_cache", "cudakit, graph cache"),
    ("cudakit", "graph_loop", "cudakit, device-side loop"),
    ("cudakit", "sessions", "cudakit, sessions"),
    ("pytorch", "eager", "PyTorch eager"),
    ("pytorch", "cuda_graph", "PyTorch CUDA graph"),
    ("pytorch", "compiled_graph", "torch.compile in graph"),
    ("pytorch", "compiled_graph_max_autotune", "max-autotune in graph"),
    ("pytorch", "streams", "PyTorch streams"),
]
# PyTorch's single-session arms: the best of them at a batch size is what cudakit's
# goals are stated against.
PYTORCH_SINGLE = ["eager", "cuda_graph", "compiled_graph", "compiled_graph_max_autotune"]
COLOURS = ["#9ecae1", "#3182bd", "#2171b5", "#08519c", "#fdae6b", "#e6550d", "#d94801", "#8c2d04", "#a63603"]
# The goals: batch 1 through the graph cache at least this many tokens/s, and the graph
# cache this many times the best PyTorch arm per batch size.
BATCH1_TOKENS_PER_S = 4900
BEST_RATIO = {1: 2.0, 8: 1.5, 32: 1.5}


def log(*parts):
    print("decoder_compare:", *parts, flush=True)


def run_logged(command, log_path, timeout):
    """Runs `command`, its output to the console and to log_path; returns the exit code."""
    log("$", " ".join(command))
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    start = time.time()
    with open(log_path, "w") as out:
        try:
            p = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True)
        except OSError as e:
            log(f"cannot start {command[0]}: {e}")
            return 127
        try:
            for line in p.stdout:
                out.write(line)
                print("  " + line, end="", flush=True)
                if time.time() - start > timeout:
                    raise subprocess.TimeoutExpired(command, timeout)
            return p.wait(timeout=max(1, timeout - (time.time() - start)))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            log(f"{command[0]} ran past its {timeout} s and was stopped")
            return 124


def arm(results, side, name, batch):
    for a in results[side]["arms"]:
        if a["arm"] == name and a["batch"] == batch and "tokens_per_s" in a:
            return a
    return None


def best_pytorch(results, batch, names=PYTORCH_SINGLE):
    """The fastest of PyTorch's arms `names` at `batch` (arms that failed are left out)."""
    arms = [a for a in (arm(results, "pytorch", n, batch) for n in names) if a]
    return max(arms, key=lambda a: a["tokens_per_s"]) if arms else None


def ratio(a, b):
    return a["tokens_per_s"] / b["tokens_per_s"] if a and b and b["tokens_per_s"] > 0 else None


def goals(results, batches):
    """Each goal of the workload, stated against PyTorch's best arm: the value, its target,
    and whether it is met."""
    out = []

    def add(name, value, target, batch=None, against=None):
        out.append({"goal": name, "batch": batch, "value": value, "target": target, "against": against,
                    "met": value is not None and value >= target})

    def graph_arm(b):
        """The graph cache's faster arm: one step per launch, or the device-side loop."""
        arms = [a for a in (arm(results, "cudakit", n, b) for n in ("graph_cache", "graph_loop")) if a]
        return max(arms, key=lambda a: a["tokens_per_s"]) if arms else None

    if 1 in batches:
        g = graph_arm(1)
        add("cudakit through the graph cache, tokens/s (absolute)", g["tokens_per_s"] if g else None,
            BATCH1_TOKENS_PER_S, 1, g["arm"] if g else None)
    for b in batches:
        best = best_pytorch(results, b)
        add("cudakit graph cache / PyTorch's best arm (tokens/s)",
            ratio(arm(results, "cudakit", "graph_cache", b), best), BEST_RATIO.get(b, 1.5), b,
            best["arm"] if best else None)
        add("cudakit device-side loop / PyTorch's best arm (tokens/s)",
            ratio(arm(results, "cudakit", "graph_loop", b), best), BEST_RATIO.get(b, 1.5), b,
            best["arm"] if best else None)
    for b in batches:
        best = best_pytorch(results, b, PYTORCH_SINGLE + ["streams"])
        add("cudakit sessions / PyTorch's best arm, streams included (tokens/s)",
            ratio(arm(results, "cudakit", "sessions", b), best), 1.0, b, best["arm"] if best else None)
    return out


def bandwidth_lines(results, batches):
    """Each step's weight bandwidth against the streaming floor cudakit's run measured."""
    c = results["cudakit"]
    floor = c.get("streaming_floor")
    if not floor:
        return []
    lines = [f"  streaming floor: {floor['bytes'] / 2**20:.0f} MiB in {floor['us']:.1f} us "
             f"({floor['bytes'] / floor['us'] / 1e6:.2f} TB/s)"]
    chain = c.get("kernel_chain_floor")
    if chain:
        lines.append(f"  kernel-chain floor: the same reads in {chain['kernels']} dependent kernels, {chain['us']:.1f} us")
    for b in batches:
        for name in ("graph_cache", "graph_loop"):
            a = arm(results, "cudakit", name, b)
            if a and a.get("step_us_p50"):
                lines.append(f"  batch {b} {name}: step p50 {a['step_us_p50']:.1f} us = "
                             f"{floor['us'] / a['step_us_p50'] * 100:.0f}% of the floor's bandwidth")
    return lines


def checks(results, batches):
    """Correctness: every check must pass."""
    out = []
    c = results["pytorch"].get("check")
    out.append({"check": "hidden states within 1e-2 relative L2 of PyTorch's, and greedy tokens agree with the fp32 "
                         "reference at least as often as PyTorch's (ties within one bf16 step set aside)",
                "passed": bool(c and c["passed"])})
    for b in batches:
        g = arm(results, "cudakit", "graph_cache", b) or {}
        s = arm(results, "cudakit", "sessions", b) or {}
        e = arm(results, "cudakit", "stream", b) or {}
        out.append({"check": f"batch {b}: no heap allocation per step in the graph cache's hit path",
                    "passed": g.get("heap_allocations_per_step") == 0, "value": g.get("heap_allocations_per_step")})
        out.append({"check": f"batch {b}: every session's tokens equal its run alone",
                    "passed": s.get("identical_to_single_session") is True})
        out.append({"check": f"batch {b}: the graph cache's tokens equal the stream's",
                    "passed": e.get("graph_matches_stream_tokens") is True})
        lp = arm(results, "cudakit", "graph_loop", b)
        if lp:
            out.append({"check": f"batch {b}: the device-side loop's tokens equal one step per launch",
                        "passed": lp.get("tokens_equal_graph_cache") is True})
        stats = g.get("graph_cache", {})
        out.append({"check": f"batch {b}: the graph cache captured once and replayed every later step",
                    "passed": stats.get("captures") == 1 and stats.get("recaptures") == 0
                    and stats.get("updates") == 0 and stats.get("eager_runs") == 0,
                    "value": stats})
    return out


def table(merged):
    lines = []
    r = merged["results"]
    c = r["pytorch"].get("check", {})
    lines.append(f"decoder: {merged['device']}, cudakit {merged['cudakit_version']}, PyTorch {r['pytorch']['torch']}; "
                 f"prompt {r['cudakit']['prompt_length']}, {r['cudakit']['generated_tokens']} generated tokens, "
                 f"{r['cudakit']['rounds']} rounds (medians)")
    lines.append(f"cudakit: programmatic dependent launch {r['cudakit'].get('programmatic_dependent_launch')}, "
                 f"early triggers {r['cudakit'].get('early_trigger')}, "
                 f"small-batch GEMV {r['cudakit'].get('small_batch_gemv')} "
                 f"(CUDAKIT_DECODER_PDL, CUDAKIT_DECODER_EARLY_TRIGGER, CUDAKIT_DECODER_GEMV)")
    lines.append("")
    lines.append(f"{'batch':>5}  {'arm':<24} {'tokens/s':>10} {'step p50 us':>12} {'step p99 us':>12} "
                 f"{'first step ms':>14}")
    for b in merged["batches"]:
        for side, name, label in ARMS:
            a = arm(r, side, name, b)
            if a:
                lines.append(f"{b:>5}  {label:<24} {a['tokens_per_s']:>10.0f} {a['step_us_p50']:>12.1f} "
                             f"{a['step_us_p99']:>12.1f} {a['time_to_first_step_ms']:>14.2f}")
        lines.append("")
    for b in merged["batches"]:
        for a in r["pytorch"]["arms"]:
            if a["batch"] == b and "error" in a:
                lines.append(f"{b:>5}  PyTorch {a['arm']} failed: {a['error'][:160]}")
    lines.append("goals (against PyTorch's best arm):")
    for g in merged["goals"]:
        unit = "" if g["goal"].endswith("(absolute)") else "x"
        v = "n/a" if g["value"] is None else (f"{g['value']:.0f}" if not unit else f"{g['value']:.3f}x")
        against = (f", arm: {g['against']}" if unit == "" else f", best PyTorch arm: {g['against']}") \
            if g.get("against") else ""
        lines.append(f"  {'met ' if g['met'] else 'MISS'}  batch {g['batch']}: {g['goal']}: {v} "
                     f"(target {g['target']}{unit}{against})")
    bw = bandwidth_lines(r, merged["batches"])
    if bw:
        lines.append("weight bandwidth (each step reads every weight once):")
        lines.extend(bw)
    lines.append("checks:")
    for k in merged["checks"]:
        lines.append(f"  {'pass' if k['passed'] else 'FAIL'}  {k['check']}")
    if c:
        lines.append(f"  hidden relative L2: max {c['hidden_rel_l2_max']:.2e}, after 32 steps "
                     f"{c['hidden_rel_l2_after_32_steps']:.2e} (bound {c['hidden_rel_l2_bound']}); greedy tokens "
                     f"agree at {100 * c['token_agreement']:.2f}% of {c['token_positions']} positions"
                     + (f" ({100 * c['token_agreement_within_bf16_resolution']:.2f}% counting ties within one bf16 "
                        "step of PyTorch's largest logit)" if 'token_agreement_within_bf16_resolution' in c else ""))
    if "token_agreement" in c.get("same_rounding", {}):
        o = c["same_rounding"]
        lines.append(f"  against PyTorch with cudakit's rounding points: hidden relative L2 max "
                     f"{o['hidden_rel_l2_max']:.2e}; greedy tokens agree at {100 * o['token_agreement']:.2f}%")
    for name, b in c.get("between_pytorch_computations", {}).items():
        if isinstance(b, dict):
            lines.append(f"  PyTorch {name.replace('_', ' ')}: hidden relative L2 max {b['hidden_rel_l2_max']:.2e}; "
                         f"greedy tokens agree at {100 * b['token_agreement']:.2f}%")
    if "cudakit_token_agreement_decided" in c.get("fp32_reference", {}):
        f = c["fp32_reference"]
        lines.append(f"  criterion, against the fp32 reference over {f['positions'] - f['ties_set_aside']} decided "
                     f"positions ({f['ties_set_aside']} ties within one bf16 step set aside): cudakit "
                     f"{100 * f['cudakit_token_agreement_decided']:.2f}%, PyTorch "
                     f"{100 * f['pytorch_token_agreement_decided']:.2f}%")
    if "cudakit_token_agreement" in c.get("fp32_reference", {}):
        f = c["fp32_reference"]
        lines.append(f"  against the same function in fp32: cudakit's tokens agree at "
                     f"{100 * f['cudakit_token_agreement']:.2f}%, PyTorch's at {100 * f['pytorch_token_agreement']:.2f}%; "
                     f"hidden relative L2 max {f['cudakit_hidden_rel_l2_max']:.2e} and "
                     f"{f['pytorch_hidden_rel_l2_max']:.2e}")
    for b in merged["batches"]:
        g = arm(r, "cudakit", "graph_cache", b)
        if g:
            lines.append(f"  graph cache at batch {b}: {json.dumps(g.get('graph_cache'))}")
    return "\n".join(lines) + "\n"


def svg(merged):
    """One panel per batch size: tokens/s of each arm, with its value."""
    r = merged["results"]
    batches = merged["batches"]
    panel_w, panel_h, top, left, bottom = 300, 260, 50, 60, 40
    width = left + panel_w * len(batches) + 20
    height = top + panel_h + bottom + 20 * ((len(ARMS) + 2) // 3)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" '
           f'font-size="11">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{left}" y="20" font-size="14">Decoder tokens/s, {merged["device"]} '
           f'(prompt {r["cudakit"]["prompt_length"]}, {r["cudakit"]["generated_tokens"]} generated tokens)</text>']
    for p, b in enumerate(batches):
        values = [(arm(r, side, name, b) or {}).get("tokens_per_s", 0) for side, name, _ in ARMS]
        peak = max(values) or 1
        x0 = left + p * panel_w
        out.append(f'<text x="{x0 + panel_w / 2 - 20}" y="{top - 10}" font-size="12">batch {b}</text>')
        out.append(f'<line x1="{x0}" y1="{top + panel_h}" x2="{x0 + panel_w - 20}" y2="{top + panel_h}" stroke="black"/>')
        bar = (panel_w - 40) / len(ARMS)
        for i, v in enumerate(values):
            h = panel_h * v / peak
            x = x0 + 10 + i * bar
            out.append(f'<rect x="{x:.1f}" y="{top + panel_h - h:.1f}" width="{bar - 4:.1f}" height="{h:.1f}" '
                       f'fill="{COLOURS[i]}"/>')
            out.append(f'<text x="{x + (bar - 4) / 2:.1f}" y="{top + panel_h - h - 3:.1f}" text-anchor="middle" '
                       f'font-size="9">{v:.0f}</text>')
    legend_y = top + panel_h + bottom
    for i, (_, _, label) in enumerate(ARMS):
        x = left + (i % 3) * 250
        y = legend_y + (i // 3) * 20
        out.append(f'<rect x="{x}" y="{y - 10}" width="12" height="12" fill="{COLOURS[i]}"/>')
        out.append(f'<text x="{x + 18}" y="{y}">{label}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def markdown(merged):
    """The README's table: tokens/s per arm and batch size, and the goal ratios."""
    r = merged["results"]
    head = "| batch | " + " | ".join(label for _, _, label in ARMS) + " | graph cache / best PyTorch |"
    lines = [head, "|" + " --- |" * (len(ARMS) + 2)]
    for b in merged["batches"]:
        cells = [f"{(arm(r, side, name, b) or {}).get('tokens_per_s', 0):.0f}" for side, name, _ in ARMS]
        g = next((g for g in merged["goals"] if g["batch"] == b and g["goal"].startswith("cudakit graph cache / "
                                                                                           "PyTorch's best")), None)
        ratio_text = "n/a" if not g or g["value"] is None else f"{g['value']:.2f}x"
        lines.append(f"| {b} | " + " | ".join(cells) + f" | {ratio_text} |")
    lines.append("")
    lines.append("Tokens per second (decode steps after the first, medians of "
                 f"{r['cudakit']['rounds']} rounds; prompt {r['cudakit']['prompt_length']}, "
                 f"{r['cudakit']['generated_tokens']} generated tokens; sessions and streams: "
                 f"{r['cudakit']['sessions']} at once, all their tokens).")
    return "\n".join(lines) + "\n"


def cudakit_version(decoder):
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    try:
        with open(os.path.join(root, "CMakeLists.txt")) as f:
            for line in f:
                if line.startswith("project(cudakit VERSION"):
                    return line.split()[2]
    except OSError:
        pass
    return "unknown"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--decoder", help="the decoder program (build/examples/decoder/decoder)")
    p.add_argument("--out", help="the folder for every file of the run")
    p.add_argument("--python", default=sys.executable, help="the Python with torch and safetensors")
    p.add_argument("--batches", default="1,8,32")
    p.add_argument("--steps", type=int, default=255, help="decode steps after the prompt")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--sessions", type=int, default=4)
    p.add_argument("--timeout", type=int, default=420, help="seconds for cudakit's side")
    p.add_argument("--torch-timeout", type=int, default=900, help="seconds for PyTorch's side (torch.compile arms)")
    p.add_argument("--autotune-batches", default="1", help="batch sizes of PyTorch's max-autotune arm")
    p.add_argument("--torch-compile", default="on", choices=["on", "off"], help="PyTorch's torch.compile arms")
    p.add_argument("--strict-goals", action="store_true", help="a missed goal fails the run")
    p.add_argument("--markdown", metavar="JSON", help="print the README table of a merged JSON and exit")
    args = p.parse_args()

    if args.markdown:
        with open(args.markdown) as f:
            sys.stdout.write(markdown(json.load(f)))
        return 0
    if not args.decoder or not args.out:
        p.error("--decoder and --out are required (or --markdown)")
    os.makedirs(args.out, exist_ok=True)
    batches = [int(b) for b in args.batches.split(",")]
    here = os.path.dirname(os.path.abspath(__file__))
    weights = os.path.join(args.out, "weights.safetensors")
    inputs = os.path.join(args.out, "inputs.safetensors")
    check = os.path.join(args.out, "cudakit_check.safetensors")
    sides = {"cudakit": os.path.join(args.out, "cudakit.json"), "pytorch": os.path.join(args.out, "pytorch.json")}
    for path in list(sides.values()) + [check]:
        if os.path.exists(path):
            os.remove(path)

    started = time.time()
    rc = run_logged([args.decoder, "write-inputs", args.out], os.path.join(args.out, "write-inputs.log"), 120)
    if rc != 0:
        log(f"writing the weights and inputs failed (exit {rc})")
        return 2 if rc == 2 else 1
    common = ["--batches", args.batches, "--steps", str(args.steps), "--rounds", str(args.rounds)]
    rc = run_logged([args.decoder, "run", "--weights", weights, "--inputs", inputs, "--json", sides["cudakit"],
                     "--check", check, "--sessions", str(args.sessions)] + common,
                    os.path.join(args.out, "cudakit.log"), args.timeout)
    if rc == 2:
        log("no GPU")
        return 2
    cudakit_rc = rc
    if not os.path.exists(check):
        log(f"cudakit's side failed before its check (exit {rc})")
        return 1
    rc = run_logged([args.python, os.path.join(here, "decoder_torch.py"), "--weights", weights, "--inputs", inputs,
                     "--check", check, "--json", sides["pytorch"], "--streams", str(args.sessions),
                     "--compile", args.torch_compile, "--autotune-batches", args.autotune_batches] + common,
                    os.path.join(args.out, "pytorch.log"), args.torch_timeout)
    torch_rc = rc
    missing = [side for side, path in sides.items() if not os.path.exists(path)]
    if missing:
        log(f"no results from {', '.join(missing)} (cudakit exit {cudakit_rc}, PyTorch exit {torch_rc})")
        return 1

    results = {side: json.load(open(path)) for side, path in sides.items()}
    merged = {
        "schema": "cudakit-decoder-compare/1",
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "device": results["cudakit"]["device"],
        "cudakit_version": cudakit_version(args.decoder),
        "batches": batches,
        "seconds": round(time.time() - started, 1),
        "method": ("Both sides: the prompts of a batch at once (causal attention), then greedy decode steps, each "
                   "ending with its tokens on the host; tokens/s = batch x later steps / their time, median of the "
                   "rounds; step latency percentiles over every later step; time to the first step from the "
                   "prompts' upload, capture included in the first round. Weights and inputs: one safetensors file "
                   "each, written by examples/decoder, loaded by both."),
        "results": results,
    }
    merged["goals"] = goals(results, batches)
    merged["checks"] = checks(results, batches)
    with open(os.path.join(args.out, "decoder.json"), "w") as f:
        json.dump(merged, f, indent=2)
    with open(os.path.join(args.out, "decoder.svg"), "w") as f:
        f.write(svg(merged))
    text = table(merged)
    with open(os.path.join(args.out, "decoder.txt"), "w") as f:
        f.write(text)
    print(text, end="", flush=True)
    failed = [k for k in merged["checks"] if not k["passed"]]
    missed = [g for g in merged["goals"] if not g["met"]]
    if cudakit_rc != 0 or torch_rc != 0:
        log(f"a side reported a failure (cudakit exit {cudakit_rc}, PyTorch exit {torch_rc})")
        return 1
    if failed:
        return 1
    if missed and args.strict_goals:
        return 1
    log(f"done in {time.time() - started:.0f} s: {len(failed)} checks failed, {len(missed)} goals missed")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Medians and ratios from a `gpu-vs-clpeak` output directory.

Per round (OUT/rNN/): clpeak's text output (clpeak.txt) and hostbench's JSON (hb.json). For each
metric — global-memory read bandwidth and f32 compute — each tool's figure is its best vector
width in that round (clpeak prints float, float2, ... float16; hostbench's record is its best
width, the sweep is in extra.width_sweep). Prints Markdown: median over rounds per tool, the
ratio hostbench / clpeak of the medians (target >= 1.0), each round's ratio, and the widths that
won. Units: GB/s = 1e9 B/s (clpeak's "GBPS"), GFLOP/s = 1e9 FLOP/s. Usage: summarize-gpu.py OUT_DIR
"""
import os
import re
import statistics as st
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import load_json, load_rounds, print_notes, text  # noqa: E402

TARGET = 1.0
SECTIONS = {"bw": "Global memory bandwidth", "sp": "Single-precision compute"}


def clpeak_best(path):
    """{metric: (value, width label)} from clpeak's text output: the best width per section."""
    t = text(path) or ""
    res, section = {}, None
    for line in t.splitlines():
        for key, title in SECTIONS.items():
            if line.strip().startswith(title):
                section = key
        m = re.match(r"\s*(float\d*)\s*:\s*([0-9.]+)", line)
        if section and m:
            v = float(m.group(2))
            if section not in res or v > res[section][0]:
                res[section] = (v, m.group(1))
    return res


def hb_values(path):
    """{metric: (value in G-units, vector width)} from hostbench's JSON."""
    doc = load_json(path) or {}
    res = {}
    for r in doc.get("records", []):
        p, x = r.get("params", {}), r.get("extra", {})
        if r.get("benchmark") == "gpu.bandwidth" and p.get("kind") == "read":
            res["bw"] = (r["value"] / 1e9, f"uint{x.get('vector_width', '')}")
        elif r.get("benchmark") == "gpu.flops" and p.get("dtype") == "f32":
            res["sp"] = (r["value"] / 1e9, f"width {x.get('vector_width', '?')}")
    return res


out, rounds, meta = load_rounds("summarize-gpu.py")
rows = {"bw": [], "sp": []}
for rd in rounds:
    c, h = clpeak_best(os.path.join(rd, "clpeak.txt")), hb_values(os.path.join(rd, "hb.json"))
    for k in rows:
        if k in c and k in h:
            rows[k].append((h[k], c[k]))

print("| metric (best vector width) | hostbench (median) | clpeak (median) | ratio | per round | widths won (hostbench / clpeak) |")
print("|---|---|---|---|---|---|")
notes = []
labels = {"bw": ("global memory read", "GB/s"), "sp": ("f32 compute", "GFLOP/s")}
for k, pairs in rows.items():
    name, unit = labels[k]
    if not pairs:
        print(f"| {name} | n/a | n/a | n/a | | |")
        continue
    hb = st.median(p[0][0] for p in pairs)
    cp = st.median(p[1][0] for p in pairs)
    ratios = [p[0][0] / p[1][0] for p in pairs]
    won_h = sorted({p[0][1] for p in pairs})
    won_c = sorted({p[1][1] for p in pairs})
    ratio = hb / cp
    mark = "" if ratio >= TARGET else " (below target)"
    print(
        f"| {name} | {hb:.2f} {unit} | {cp:.2f} {unit} | **{ratio:.3f}**{mark} | "
        f"{', '.join(f'{x:.2f}' for x in ratios)} | {', '.join(won_h)} / {', '.join(won_c)} |"
    )
notes.append(f"{len(rounds)} rounds; ratio = median(hostbench) / median(clpeak)")
for line in meta.splitlines():
    if line.startswith(("clpeak:", "device", "rounds=")):
        notes.append(line)
print_notes(notes, out)

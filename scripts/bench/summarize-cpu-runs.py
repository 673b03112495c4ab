#!/usr/bin/env python3
"""Median over several `cpu-vs-likwid` runs (same parameters), one Markdown row per case.

A shared machine disturbs a different row in each run; the per-row median over runs, with each
run's ratio shown beside it, is the honest summary. Usage: summarize-cpu-runs.py RUN.json...
"""
import json
import statistics as st
import sys

runs = [json.load(open(f)) for f in sys.argv[1:]]
print("| dtype | ISA | threads | hostbench | % of peak, clock under load | % of peak, scalar-chain clock | likwid-bench | ratio | ratio per run |")
print("|---|---|---|---|---|---|---|---|---|")
for i, first in enumerate(runs[0]["records"]):
    rows = [run["records"][i] for run in runs]
    assert all(r["params"] == first["params"] for r in rows), "runs differ in parameters"
    p = first["params"]
    hb = st.median(r["value"] for r in rows) / 1e9
    eff = st.median(r["efficiency"] for r in rows)
    # The efficiency the same record would show at the scalar-chain clock (before issue 13);
    # runs made before extra.clock_scalar_hz existed show the same figure in both columns.
    before = st.median(
        r["efficiency"] * r["extra"]["clock_hz"] / r["extra"].get("clock_scalar_hz", r["extra"]["clock_hz"])
        for r in rows
    )
    lk = st.median(r["reference"]["value"] for r in rows) / 1e9
    ratios = [r["reference"]["ratio"] for r in rows]
    print(
        f"| {p['dtype']} | {p['isa']} | {p['threads']} | {hb:.1f} GFLOP/s | {100 * eff:.1f} % | {100 * before:.1f} % "
        f"| {lk:.1f} GFLOP/s | **{st.median(ratios):.3f}** | {', '.join(f'{x:.3f}' for x in ratios)} |"
    )

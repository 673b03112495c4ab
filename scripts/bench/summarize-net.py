#!/usr/bin/env python3
"""Summarize scripts/bench/net-vs-reference: per case, medians over rounds of hostbench's figure
and of the reference tool's (iperf3 or sockperf) taken beside it, and their ratio."""

import glob
import os
import re
import statistics

from benchlib import load_json, load_rounds, print_notes


def key(r):
    p = r["params"]
    return (r["benchmark"], p["proto"], p.get("direction", "pingpong"), p["block_bytes"], p["streams"])


def main():
    out, rounds, meta = load_rounds("summarize-net.py")
    cases = {}
    for d in rounds:
        for f in sorted(glob.glob(os.path.join(d, "*.json"))):
            doc = load_json(f)
            for r in (doc or {}).get("records", []):
                c = cases.setdefault(key(r), {"ours": [], "ref": [], "loss": [], "ref_loss": [], "tool": None})
                if not r.get("reference"):
                    continue
                c["ours"].append(r["value"])
                c["ref"].append(r["reference"]["value"])
                c["tool"] = r["reference"]["tool"] + " " + r["reference"]["version"]
                if "lost_fraction" in r.get("extra", {}):
                    c["loss"].append(r["extra"]["lost_fraction"] * 100)
                m = re.search(r"lost ([0-9.]+) %", r.get("extra", {}).get("reference_note", ""))
                if m:
                    c["ref_loss"].append(float(m.group(1)))
    print(meta.strip())
    print()
    print("| case | hostbench (median) | reference (median) | ratio of medians | per-round ratios | target |")
    print("|---|---|---|---|---|---|")
    notes = []
    for k, c in sorted(cases.items()):
        if not c["ours"]:
            continue
        bench, proto, direction, block, streams = k
        mo, mr = statistics.median(c["ours"]), statistics.median(c["ref"])
        # hostbench / reference either way: for latency (p50 RTT) <= 1.05 meets the target.
        ratio = mo / mr
        per = [o / r for o, r in zip(c["ours"], c["ref"])]
        if bench == "net.latency":
            fmt = lambda v: f"{v * 1e6:.2f} µs"
            case = f"{proto.upper()} ping-pong {block} B, p50 RTT"
            target = "<= 1.05"
        else:
            fmt = lambda v: f"{v / 1e9:.2f} Gbit/s"
            case = f"{proto.upper()} {block // 1024} KiB x {streams} stream(s), {direction}"
            target = ">= 1.0"
        if c["loss"]:
            case += f" (loss: ours {statistics.median(c['loss']):.3f} %, iperf3 {statistics.median(c['ref_loss']) if c['ref_loss'] else float('nan'):.3f} %)"
        print(f"| {case} | {fmt(mo)} | {fmt(mr)} ({c['tool']}) | {ratio:.3f} | {min(per):.2f}–{max(per):.2f} | {target} |")
    notes.append(f"{len(rounds)} rounds; each figure pair is one hostbench sample and one reference run of the same case, taken one after the other")
    print_notes(notes, out)


if __name__ == "__main__":
    main()

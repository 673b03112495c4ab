#!/usr/bin/env python3
"""Tables from a `net-load-rr-vs-reference` output directory.

Reads every round (OUT/rNN/):
- hb-ul-WHERE.json: hostbench's net.latency records under load (params.load_bps), each with
  sockperf ul's p50 as its reference (reference.value) and sockperf's p99 in
  extra.reference_note ("sockperf's p99 X µs"); hostbench's p50 is the value (timed from each
  message's due time), its p99 extra.p99_s, and the same two timed from the actual send (what
  sockperf times) extra.p50_uncorrected_s / p99_uncorrected_s;
- hb-tx-WHERE.json: net.transactions records (params mode, pairs, outstanding);
- rr-WHERE.tsv: rr.c's lines `mode pairs outstanding request response seconds transactions
  transactions_per_s p50_us p90_us p99_us max_us` (three runs per case).

Prints Markdown: per place and load, medians over rounds of both tools' p50 and p99 and the ratios
hostbench / sockperf (the issue's band: within 10 %); per place and transaction case, medians of
both rates and hostbench / rr.c. Usage: summarize-net-load-rr.py OUT_DIR
"""
import os
import re
import statistics as st
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import load_json, load_rounds, print_notes, text  # noqa: E402


def med(xs):
    xs = [x for x in xs if x is not None]
    return st.median(xs) if xs else None


def us(v):
    return "n/a" if v is None else f"{v * 1e6:.1f} µs"


def ratio(a, b):
    return "n/a" if a is None or not b else f"{a / b:.3f}"


def rate(v):
    return "n/a" if v is None else f"{v / 1e3:.1f} k/s"


def load_label(v):
    if isinstance(v, str):
        return v
    return f"{v / 1e9:g} Gbit/s" if v >= 1e9 else f"{v / 1e6:g} Mbit/s"


def main():
    out, rounds, meta = load_rounds("summarize-net-load-rr.py")
    print(meta.strip())
    notes = []
    wheres = sorted({f.split("-")[-1].split(".")[0] for r in rounds for f in os.listdir(r)
                     if f.startswith("hb-ul-") and f.endswith(".json")})
    for where in wheres:
        ul = {}
        for r in rounds:
            doc = load_json(os.path.join(r, f"hb-ul-{where}.json")) or {}
            for rec in doc.get("records", []):
                if rec.get("benchmark") != "net.latency" or "load_bps" not in rec["params"]:
                    continue
                e = rec["extra"]
                ref = rec.get("reference") or {}
                m = re.search(r"sockperf's p99 ([0-9.]+) µs", e.get("reference_note", ""))
                row = ul.setdefault(rec["params"]["load_bps"], [])
                row.append({
                    "p50": rec["value"], "p99": e.get("p99_s"),
                    "u50": e.get("p50_uncorrected_s"), "u99": e.get("p99_uncorrected_s"),
                    "s50": ref.get("value"), "s99": float(m.group(1)) * 1e-6 if m else None,
                })
            for s in doc.get("skipped", []):
                notes.append(f"{os.path.basename(r)} {where}: skipped {s['params']}: {s['reason']}")
        print(f"\n### Latency under load, {where} (UDP, medians over {len(rounds)} rounds)\n")
        print("| load | hostbench p50 (due / sent) | sockperf p50 | p50 ratio (due / sent) "
              "| hostbench p99 (due / sent) | sockperf p99 | p99 ratio (due / sent) |")
        print("|---|---|---|---|---|---|---|")
        for load in sorted(ul, key=lambda v: v if isinstance(v, (int, float)) else 0):
            rows = ul[load]
            g = {k: med([x[k] for x in rows]) for k in rows[0]}
            print(f"| {load_label(load)} | {us(g['p50'])} / {us(g['u50'])} | {us(g['s50'])} "
                  f"| {ratio(g['p50'], g['s50'])} / {ratio(g['u50'], g['s50'])} "
                  f"| {us(g['p99'])} / {us(g['u99'])} | {us(g['s99'])} "
                  f"| {ratio(g['p99'], g['s99'])} / {ratio(g['u99'], g['s99'])} |")

        hb = {}
        for r in rounds:
            doc = load_json(os.path.join(r, f"hb-tx-{where}.json")) or {}
            for rec in doc.get("records", []):
                if rec.get("benchmark") != "net.transactions":
                    continue
                p = rec["params"]
                hb.setdefault((p["mode"], p["pairs"], p["outstanding"]), []).append(rec["value"])
        ref = {}
        for r in rounds:
            for line in (text(os.path.join(r, f"rr-{where}.tsv")) or "").splitlines():
                f = line.split("\t")
                if line.startswith("#") or len(f) < 12:
                    continue
                key = (f[0], int(f[1]), int(f[2]))
                ref.setdefault(key, []).append(float(f[7]))
        print(f"\n### Transactions, {where} (TCP, 1-byte request and response; medians)\n")
        print("| case | hostbench | rr.c | hostbench / rr.c |")
        print("|---|---|---|---|")
        for key in sorted(set(hb) | set(ref)):
            mode, pairs, o = key
            name = ("TCP_CRR" if mode == "crr" else "TCP_RR") + f", {pairs} pair(s)"
            if mode == "rr":
                name += f", {o} in flight"
            a, b = med(hb.get(key, [])), med(ref.get(key, []))
            print(f"| {name} | {rate(a)} | {rate(b)} | {ratio(a, b)} |")
    print_notes(notes, out)


if __name__ == "__main__":
    main()

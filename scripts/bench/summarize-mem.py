#!/usr/bin/env python3
"""Table of medians and ratios from a `mem-vs-reference` output directory.

Reads the raw outputs of every round (OUT/rNN/: hostbench JSON, likwid-bench and STREAM text,
chase.c text), takes each tool's value per round, and prints Markdown: the median over rounds per
tool, the ratio of the medians (hostbench / reference for bandwidth; for latency also the
difference in per cent), the ratio in each round, and the ratio of the best values. Missing or
failed runs show as "n/a" with the reason underneath. Usage: summarize-mem.py OUT_DIR
"""
import json
import os
import re
import statistics as st
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import load_json, load_rounds, print_notes, text  # noqa: E402

GB = 1e9



def hb_bandwidth(rd, tag, store=None):
    """(median B/s, best B/s, extra) of the hostbench bandwidth record in hb-TAG.json."""
    doc = load_json(os.path.join(rd, f"hb-{tag}.json"))
    for r in (doc or {}).get("records", []):
        p = r.get("params", {})
        if r.get("benchmark") != "mem.bandwidth" or r.get("value") is None:
            continue
        if store is not None and p.get("store") != store:
            continue
        return r["value"], r.get("stats", {}).get("max", r["value"]), r.get("extra", {}), p
    return None


def hb_latency(rd, pages):
    """(median s/load, best s/load, record) of the hostbench pointer chase in hb-lat-PAGES.json."""
    doc = load_json(os.path.join(rd, f"hb-lat-{pages}.json"))
    for r in (doc or {}).get("records", []):
        p = r.get("params", {})
        if r.get("benchmark") != "mem.latency" or r.get("value") is None:
            continue
        if p.get("pattern", "chase") != "chase" or p.get("chains", 1) not in (1, "1"):
            continue
        return r["value"], r.get("stats", {}).get("min", r["value"]), r
    return None


def likwid(rd, tag):
    t = text(os.path.join(rd, f"lk-{tag}.txt"))
    m = t and re.search(r"^MByte/s:\s+([0-9.]+)", t, re.M)
    if not m:
        return None
    size = re.search(r"^Size \(Byte\):\s+(\d+)", t, re.M)
    return float(m.group(1)) * 1e6, int(size.group(1)) if size else None


def stream(rd, kernel):
    t = text(os.path.join(rd, "stream.txt"))
    m = t and re.search(rf"^{kernel}:\s+([0-9.]+)", t, re.M)
    if not m:
        return None
    return float(m.group(1)) * 1e6, "Solution Validates" in t


def chase(rd, pages):
    t = text(os.path.join(rd, f"chase-{pages}.txt"))
    m = t and re.search(r"ns_per_load median ([0-9.]+) min ([0-9.]+)", t)
    if not m:
        return None
    h = re.search(r"huge_fraction (-?[0-9.]+)", t)
    return float(m.group(1)) * 1e-9, float(m.group(2)) * 1e-9, float(h.group(1)) if h else None


def main():
    out, rounds, meta = load_rounds("summarize-mem.py")
    kv = dict(re.findall(r"(\w+)=(\S*)", meta))
    isa = kv.get("LK_ISA", "avx")
    threads = kv.get("THREADS", "?")
    lat_pages = kv.get("LAT_PAGES", "4k").split(",")
    notes = [line[len("note: "):] for line in meta.splitlines() if line.startswith("note: ")]

    # Per-round values: name -> list of (median, best) per round (None where missing).
    series = {}

    def put(name, per_round):
        series[name] = per_round

    for store in ("temporal", "nontemporal"):
        put(f"hb triad {store}", [(x[0], x[1]) if (x := hb_bandwidth(rd, "triad", store)) else None for rd in rounds])
        put(f"hb copy {store}", [(x[0], x[1]) if (x := hb_bandwidth(rd, "copy", store)) else None for rd in rounds])
    put("hb read dram", [(x[0], x[1]) if (x := hb_bandwidth(rd, "read")) else None for rd in rounds])
    put("hb read l2", [(x[0], x[1]) if (x := hb_bandwidth(rd, "read-l2")) else None for rd in rounds])
    for k in (f"stream_mem_{isa}", f"stream_{isa}", f"triad_mem_{isa}", f"copy_mem_{isa}", f"copy_{isa}",
              f"load_{isa}-dram", f"load_{isa}-l2"):
        put(f"likwid {k}", [(x[0], x[0]) if (x := likwid(rd, k)) else None for rd in rounds])
    for k in ("Copy", "Triad"):
        vals = [stream(rd, k) for rd in rounds]
        if any(v and not v[1] for v in vals):
            notes.append(f"STREAM {k}: a run did not print 'Solution Validates'")
        put(f"STREAM {k}", [(v[0], v[0]) if v else None for v in vals])
    for p in lat_pages:
        put(f"hb latency {p}", [(x[0], x[1]) if (x := hb_latency(rd, p)) else None for rd in rounds])
        cv = [chase(rd, p) for rd in rounds]
        put(f"chase {p}", [(c[0], c[1]) if c else None for c in cv])
        hf = [c[2] for c in cv if c and c[2] is not None]
        if hf:
            notes.append(f"chase.c {p}: huge-page fraction {min(hf):.3f}..{max(hf):.3f}")
        silent = [os.path.basename(rd) for rd in rounds
                  if load_json(os.path.join(rd, f"hb-lat-{p}.json")) is not None and not hb_latency(rd, p)]
        if silent:
            notes.append(f"hostbench --latency --pages {p} wrote its JSON but no mem.latency chase record "
                         f"(rounds {', '.join(silent)}): is the latency section wired into `hostbench mem`?")
        lat_recs = [x[2] for rd in rounds if (x := hb_latency(rd, p))]
        hbf = [r.get("extra", {}).get("huge_fraction") for r in lat_recs]
        hbf = [h for h in hbf if isinstance(h, (int, float))]
        if hbf:
            notes.append(f"hostbench latency {p}: huge-page fraction {min(hbf):.3f}..{max(hbf):.3f}")

    # Facts about the hostbench runs worth stating beside the table.
    for tag, store in (("triad", "temporal"), ("copy", "temporal"), ("triad", "nontemporal"), ("read", None)):
        x = next((x for rd in rounds if (x := hb_bandwidth(rd, tag, store))), None)
        if x:
            _, _, extra, p = x
            notes.append(
                f"hostbench {tag}{' ' + store if store else ''}: isa {p.get('isa', '?')}, pages {extra.get('pages', '?')}"
                f" (huge fraction {extra.get('huge_fraction', '?')}), working set {p.get('working_set_bytes', '?')} B,"
                f" threads {p.get('threads', '?')}"
            )
    sizes = {k: likwid(rounds[0], k) for k in (f"stream_mem_{isa}", f"copy_mem_{isa}", f"load_{isa}-dram")}
    for k, v in sizes.items():
        if v and v[1]:
            notes.append(f"likwid {k}: Size (Byte) {v[1]} (total over all streams)")

    def med(name):
        vals = [v[0] for v in series.get(name, []) if v]
        return st.median(vals) if vals else None

    def best(name, latency=False):
        vals = [v[1] for v in series.get(name, []) if v]
        return (min(vals) if latency else max(vals)) if vals else None

    def fmt_bw(x):
        return f"{x / GB:.2f} GB/s" if x is not None else "n/a"

    def fmt_ns(x):
        return f"{x * 1e9:.1f} ns" if x is not None else "n/a"

    def per_round(a, b):
        rs = []
        for x, y in zip(series.get(a, []), series.get(b, [])):
            rs.append(f"{x[0] / y[0]:.3f}" if x and y else "–")
        return ", ".join(rs)

    def ratio(a, b):
        return f"**{a / b:.3f}**" if a is not None and b is not None else "n/a"

    # PARTS holds spaces, so the key=value scan above sees only its first word: read it whole.
    m = re.search(r"^PARTS=(.*?) HB_REPEAT=", meta, re.M)
    parts = m.group(1).split() if m else []

    def part_of(name):
        if "latency" in name or name.startswith("chase"):
            return "lat"
        if name.endswith("l2"):
            return "l2"
        if "read" in name or "load" in name:
            return "read"
        if "copy" in name.lower():
            return "copy"
        return "triad"

    n = len(rounds)
    print(f"Rounds: {n} ({out}). Bandwidth in GB/s = 1e9 B/s, bytes counted the STREAM way "
          "(copy 16 B/element, triad 24 B/element, read 8 B/element), as STREAM and likwid-bench count them.")
    print()
    print("| case | hostbench (median of rounds) | reference | reference (median) | ratio of medians "
          "| ratio per round | hostbench best / reference best |")
    print("|---|---|---|---|---|---|---|")
    rows = [
        (f"triad, {threads} threads, non-temporal", "hb triad nontemporal", f"likwid-bench stream_mem_{isa}", f"likwid stream_mem_{isa}"),
        (f"triad, {threads} threads, temporal", "hb triad temporal", f"likwid-bench stream_{isa}", f"likwid stream_{isa}"),
        (f"triad, {threads} threads, non-temporal", "hb triad nontemporal", f"likwid-bench triad_mem_{isa} (4-stream, 32 B/elem; information)", f"likwid triad_mem_{isa}"),
        (f"triad, {threads} threads, temporal", "hb triad temporal", "STREAM Triad best rate", "STREAM Triad"),
        (f"triad, {threads} threads, non-temporal", "hb triad nontemporal", "STREAM Triad best rate", "STREAM Triad"),
        (f"copy, {threads} threads, non-temporal", "hb copy nontemporal", f"likwid-bench copy_mem_{isa}", f"likwid copy_mem_{isa}"),
        (f"copy, {threads} threads, temporal", "hb copy temporal", f"likwid-bench copy_{isa}", f"likwid copy_{isa}"),
        (f"copy, {threads} threads, temporal", "hb copy temporal", "STREAM Copy best rate", "STREAM Copy"),
        (f"copy, {threads} threads, non-temporal", "hb copy nontemporal", "STREAM Copy best rate", "STREAM Copy"),
        ("read, 1 thread, DRAM", "hb read dram", f"likwid-bench load_{isa}", f"likwid load_{isa}-dram"),
        ("read, 1 thread, L2 (information)", "hb read l2", f"likwid-bench load_{isa}", f"likwid load_{isa}-l2"),
    ]
    for label, a, ref_label, b in rows:
        ma, mb = med(a), med(b)
        if (ma is None and mb is None) or (ma is None and parts and part_of(a) not in parts):
            continue
        ba, bb = best(a), best(b)
        best_ratio = f"{ba / bb:.3f}" if ba and bb else "n/a"
        print(f"| {label} | {fmt_bw(ma)} | {ref_label} | {fmt_bw(mb)} | {ratio(ma, mb)} | {per_round(a, b)} "
              f"| {best_ratio} |")

    lat_rows = [p for p in lat_pages if med(f"hb latency {p}") is not None or med(f"chase {p}") is not None]
    if lat_rows:
        print()
        print("| latency (1 thread, pointer chase) | hostbench (median) | chase.c (median) | ratio | difference "
              "| ratio per round | hostbench best | chase.c best |")
        print("|---|---|---|---|---|---|---|---|")
        for p in lat_rows:
            a, b = f"hb latency {p}", f"chase {p}"
            ma, mb = med(a), med(b)
            diff = f"{100 * (ma - mb) / mb:+.1f} %" if ma is not None and mb is not None else "n/a"
            print(f"| {p} pages | {fmt_ns(ma)} | {fmt_ns(mb)} | {ratio(ma, mb)} | {diff} | {per_round(a, b)} "
                  f"| {fmt_ns(best(a, True))} | {fmt_ns(best(b, True))} |")

    print()
    print("All runs (median / min / max over rounds, n = rounds with a value):")
    print()
    print("| run | median | min | max | n |")
    print("|---|---|---|---|---|")
    for name, vals in series.items():
        v = [x[0] for x in vals if x]
        missing = [os.path.basename(rd) for rd, x in zip(rounds, vals) if not x]
        if not v:
            continue
        f = fmt_ns if name.startswith(("hb latency", "chase")) else fmt_bw
        extra = f" (missing in {', '.join(missing)})" if missing else ""
        print(f"| {name} | {f(st.median(v))} | {f(min(v))} | {f(max(v))} | {len(v)}{extra} |")
    empty = [name for name, vals in series.items()
             if not any(vals) and (not parts or part_of(name) in parts
                                   or (name.startswith("STREAM") and ("triad" in parts or "copy" in parts)))]
    print_notes(notes, out, empty)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Tables of medians and ratios from a `mem-c2c-loaded-vs-reference` output directory.

Reads every round's raw outputs (OUT/hb-c2c-RR.json and OUT/c-c2c-RR.tsv from `hostbench mem --c2c`
and scripts/reference/c2c.c; OUT/hb-ll-RR.json and OUT/c-ll-RR.tsv from `hostbench mem
--loaded-latency` and scripts/reference/loaded_latency.c) and prints Markdown: for core-to-core
latency, per CPU pair and mode, the median over rounds of hostbench's value and of c2c.c's, the
ratio hostbench / C and the ratio in each round; for loaded latency, per delay, the latency and the
bandwidth of both with their ratios. Then the host, the exact commands, and notes (missing runs,
failed checks, mismatched setups). Usage: summarize-mem-advanced.py OUT_DIR
"""
import glob
import os
import re
import statistics as st
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import load_json, print_notes, text  # noqa: E402

NUM = r"[0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?"


def as_int(x):
    """A param that may arrive as a JSON number or a string."""
    try:
        return int(str(x))
    except (TypeError, ValueError):
        return None


def rounds_of(out):
    """Round ids (the RR of every <name>-RR.json/.tsv/.log) in order."""
    ids = set()
    for f in glob.glob(os.path.join(out, "*-[0-9][0-9].*")):
        m = re.search(r"-([0-9]{2})\.(json|tsv|log)$", f)
        if m:
            ids.add(m.group(1))
    return sorted(ids)


def hb_records(out, tag, rr, benchmark):
    doc = load_json(os.path.join(out, f"hb-{tag}-{rr}.json"))
    if doc is None:
        return None
    return [r for r in doc.get("records", []) if r.get("benchmark") == benchmark and r.get("value") is not None]


def hb_c2c(out, rr):
    """{(cpu_a, cpu_b, mode): ns} of one round's hostbench run, or None."""
    recs = hb_records(out, "c2c", rr, "mem.c2c")
    if recs is None:
        return None
    vals = {}
    for r in recs:
        p = r.get("params", {})
        a, b, mode = as_int(p.get("cpu_a")), as_int(p.get("cpu_b")), str(p.get("mode"))
        if a is not None and b is not None:
            vals[(a, b, mode)] = float(r["value"]) * 1e9
    return vals


def c_c2c(out, rr):
    """{(cpu_a, cpu_b): {"round_trip": ns, "one_way": ns}} of one round's c2c.c run, or None.

    hostbench's round_trip is the two-line request/reply exchange, so it is compared with c2c.c's
    two_line_ns column when the run printed one (its single-line CAS round trip is two hand-offs,
    the same figure as 2 x one_way)."""
    t = text(os.path.join(out, f"c-c2c-{rr}.tsv"))
    if t is None:
        return None
    vals = {}
    for m in re.finditer(rf"^(\d+)\t(\d+)\t({NUM})\t({NUM})(?:\t({NUM}))?\s*$", t, re.M):
        a, b = int(m.group(1)), int(m.group(2))
        two_line = m.group(5)
        vals[(min(a, b), max(a, b))] = {
            "round_trip": float(two_line) if two_line is not None else float(m.group(3)),
            "one_way": float(m.group(4)),
        }
    return vals


def hb_ll(out, rr, traffic, threads):
    """({delay: (latency ns, bandwidth B/s)}, [record params]) of one round's hostbench run, or None."""
    recs = hb_records(out, "ll", rr, "mem.loaded_latency")
    if recs is None:
        return None
    vals, params = {}, []
    for r in recs:
        p = r.get("params", {})
        if str(p.get("traffic", "read")) != traffic:
            continue
        if threads is not None and as_int(p.get("threads")) not in (None, threads):
            continue
        d = as_int(p.get("delay"))
        bw = r.get("extra", {}).get("bandwidth")
        if d is None or d in vals:
            continue
        vals[d] = (float(r["value"]) * 1e9, float(bw) if isinstance(bw, (int, float)) else None)
        params.append(p)
    return vals, params


def c_ll(out, rr):
    """({delay: (latency ns, bandwidth B/s)}, info dict, [problem lines]) of one round's run, or None."""
    t = text(os.path.join(out, f"c-ll-{rr}.tsv"))
    if t is None:
        return None
    vals = {}
    for m in re.finditer(rf"^(\d+)\t({NUM})\t({NUM})\s*$", t, re.M):
        vals[int(m.group(1))] = (float(m.group(2)), float(m.group(3)) * 1e6)
    info = {}
    m = re.search(r"^# loaded_latency: (.*)$", t, re.M)
    if m:
        w = m.group(1).split()
        info = dict(zip(w[0::2], w[1::2]))
    problems = [line.strip() for line in t.splitlines() if re.search(r"warning|failed|error|expected", line, re.I)]
    return vals, info, problems


def med(xs):
    xs = [x for x in xs if x is not None]
    return st.median(xs) if xs else None


def fmt(x, unit, digits=1):
    return f"{x:.{digits}f} {unit}" if x is not None else "n/a"


def ratio(a, b):
    return f"**{a / b:.3f}**" if a is not None and b else "n/a"


def per_round(pairs):
    return ", ".join(f"{a / b:.3f}" if a is not None and b else "–" for a, b in pairs)


def commands(out):
    """The distinct commands of the run, with the round number written RR."""
    t = text(os.path.join(out, "commands.log")) or ""
    seen, cmds = set(), []
    for line in t.splitlines():
        if line.startswith("# round"):
            continue
        line = re.sub(r"^\[[0-9:]+\] ", "", line)
        line = re.sub(r"^\+ ", "", line)
        if "FAILED" in line:
            continue
        line = re.sub(r"-[0-9]{2}\.(json|tsv|log)\b", r"-RR.\1", line)
        if line and line not in seen:
            seen.add(line)
            cmds.append(line)
    return cmds


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: summarize-mem-advanced.py OUT_DIR")
    out = sys.argv[1]
    rounds = rounds_of(out)
    if not rounds:
        sys.exit(f"no round files (hb-c2c-01.json, c-ll-01.tsv, ...) in {out}")
    meta = text(os.path.join(out, "meta.txt")) or ""
    notes, empty = [], []

    host = re.search(r"^host: (.*)$", meta, re.M)
    print(f"Host: {host.group(1) if host else 'unknown (no meta.txt)'}")
    allowed = re.search(r"^allowed CPUs: (.*)$", meta, re.M)
    if allowed:
        print(f"Allowed CPUs: {allowed.group(1)}")
    print(f"Rounds: {len(rounds)} ({out}); every figure is the median over rounds of each run's own median.")

    # ---- core-to-core ---------------------------------------------------------------------------
    hb = {rr: hb_c2c(out, rr) for rr in rounds}
    cc = {rr: c_c2c(out, rr) for rr in rounds}
    if any(v is not None for v in hb.values()) or any(v is not None for v in cc.values()):
        keys = set()
        for v in hb.values():
            keys |= {(min(a, b), max(a, b), m) for a, b, m in (v or {})}
        for v in cc.values():
            keys |= {(a, b, m) for a, b in (v or {}) for m in ("one_way", "round_trip")}
        print()
        print("Core-to-core latency (hostbench: one_way = one shared line, alternate compare-and-swap "
              "increments, time per increment; round_trip = two lines, time per request/reply exchange. "
              "c2c.c: one_way = half its single-line CAS ping-pong round trip; round_trip = its two-line "
              "exchange (two_line_ns), written independently)")
        print()
        print("| cpu_a | cpu_b | mode | hostbench (median) | c2c.c (median) | hostbench / c2c.c | per round | n |")
        print("|---|---|---|---|---|---|---|---|")
        for a, b, mode in sorted(keys, key=lambda k: (k[0], k[1], k[2] != "one_way", k[2])):
            hv, cv = [], []
            for rr in rounds:
                h = hb[rr] or {}
                hv.append(h.get((a, b, mode), h.get((b, a, mode))))
                cv.append(((cc[rr] or {}).get((a, b)) or {}).get(mode))
            mh, mc = med(hv), med(cv)
            n = sum(1 for x, y in zip(hv, cv) if x is not None and y is not None)
            print(f"| {a} | {b} | {mode} | {fmt(mh, 'ns')} | {fmt(mc, 'ns')} | {ratio(mh, mc)} "
                  f"| {per_round(zip(hv, cv))} | {n} |")
        for name, d in (("hostbench mem --c2c", hb), ("c2c.c", cc)):
            miss = [rr for rr, v in d.items() if not v]
            if len(miss) == len(rounds):
                empty.append(name)
            elif miss:
                notes.append(f"{name}: no value in round(s) {', '.join(miss)}")

    # ---- loaded latency -------------------------------------------------------------------------
    cl = {rr: c_ll(out, rr) for rr in rounds}
    info = next((v[1] for v in cl.values() if v and v[1]), {})
    traffic = info.get("traffic", "read")
    c_threads = as_int(info.get("threads"))
    hl = {rr: hb_ll(out, rr, traffic, c_threads) for rr in rounds}
    if any(v is not None for v in hl.values()) or any(v is not None for v in cl.values()):
        delays = set()
        for v in list(hl.values()) + list(cl.values()):
            delays |= set((v or ({},))[0])
        print()
        print(f"Loaded latency, traffic {traffic} (latency in ns per chase load; bandwidth in MB/s = 1e6 B/s, "
              "all traffic during the chase including the chase's 64 B per load)")
        print()
        print("| delay | latency hostbench | latency C | ratio | per round | bandwidth hostbench | bandwidth C "
              "| ratio | per round | n |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for d in sorted(delays):
            hlat = [((hl[rr] or ({},))[0].get(d) or (None, None))[0] for rr in rounds]
            hbw = [((hl[rr] or ({},))[0].get(d) or (None, None))[1] for rr in rounds]
            clat = [((cl[rr] or ({},))[0].get(d) or (None, None))[0] for rr in rounds]
            cbw = [((cl[rr] or ({},))[0].get(d) or (None, None))[1] for rr in rounds]
            mhl, mcl, mhb, mcb = med(hlat), med(clat), med(hbw), med(cbw)
            n = sum(1 for x, y in zip(hlat, clat) if x is not None and y is not None)
            print(f"| {d} | {fmt(mhl, 'ns')} | {fmt(mcl, 'ns')} | {ratio(mhl, mcl)} | {per_round(zip(hlat, clat))} "
                  f"| {fmt(mhb and mhb / 1e6, 'MB/s', 0)} | {fmt(mcb and mcb / 1e6, 'MB/s', 0)} | {ratio(mhb, mcb)} "
                  f"| {per_round(zip(hbw, cbw))} | {n} |")
        # Setups side by side: a ratio means little when the two did not chase the same thing.
        hp = next((v[1][0] for v in hl.values() if v and v[1]), None)
        if hp:
            hb_thr, hb_ws = as_int(hp.get("threads")), as_int(hp.get("working_set_bytes"))
            notes.append(f"hostbench loaded latency: threads {hb_thr}, working set {hb_ws} B")
            c_ws = as_int(info.get("chase_bytes"))
            if c_threads is not None and hb_thr is not None and hb_thr != c_threads:
                notes.append(f"MISMATCH: hostbench ran {hb_thr} threads, loaded_latency.c {c_threads}")
            if c_ws is not None and hb_ws is not None and hb_ws != c_ws:
                notes.append(f"MISMATCH: hostbench chased {hb_ws} B, loaded_latency.c {c_ws} B "
                             "(C_LL_ARGS=--chase-bytes N or HB_LL_ARGS)")
        if info:
            notes.append("loaded_latency.c: " + " ".join(f"{k} {v}" for k, v in info.items()))
        for rr, v in cl.items():
            for p in (v[2] if v else []):
                notes.append(f"loaded_latency.c round {rr}: {p}")
        for name, d in (("hostbench mem --loaded-latency", hl), ("loaded_latency.c", cl)):
            miss = [rr for rr, v in d.items() if not v or not v[0]]
            if len(miss) == len(rounds):
                empty.append(name)
            elif miss:
                notes.append(f"{name}: no value in round(s) {', '.join(miss)}")
        silent = [rr for rr in rounds if hl[rr] is not None and not hl[rr][0]]
        if silent:
            notes.append(f"hostbench wrote hb-ll JSON without a mem.loaded_latency record for traffic {traffic}"
                         f"{f' and {c_threads} threads' if c_threads else ''} (rounds {', '.join(silent)})")

    for rr in rounds:
        t = text(os.path.join(out, f"c-c2c-{rr}.tsv")) or ""
        for line in t.splitlines():
            if line.startswith("c2c:") or line.startswith("# warning"):
                notes.append(f"c2c.c round {rr}: {line}")

    cmds = commands(out)
    if cmds:
        print()
        print("Commands (RR = round number):")
        print()
        print("```")
        for c in cmds:
            print(c)
        print("```")
    print_notes(notes, out, empty)


if __name__ == "__main__":
    main()

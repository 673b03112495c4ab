#!/usr/bin/env python3
"""Tables of medians and ratios from a `disk-vs-fio` output directory.

Reads the raw outputs of every round (OUT/rNN/: hostbench JSON hb-CASE.json, fio JSON
fio-CASE.json, block-device counters *.dev) and prints Markdown:

- throughput (sequential cases, B/s) or IOPS (random cases): median over rounds per tool, the
  ratio hostbench / fio of the medians (target >= 0.97) and the ratio in each round;
- p50 and p99 latency: hostbench's completion latency against fio's `lat` (submission to
  completion), ratio hostbench / fio (target within 10 %), with fio's `clat` beside it;
- every run (median / min / max over rounds), and the device counters around each run, to see
  whether the I/O reached the block device (page-cache effects).

Missing or failed runs show as "n/a". Usage: summarize-disk.py OUT_DIR
"""
import json
import os
import re
import statistics as st
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import load_json, load_rounds, print_notes, text  # noqa: E402

RATE_TARGET = 0.97
LAT_TOLERANCE = 0.10
SECTOR = 512

# tag -> (hostbench op, fio rw, block bytes, iodepth); the same table as disk-vs-fio.
CASES = {
    "read-1m-qd8": ("read", "read", 1 << 20, 8),
    "write-1m-qd8": ("write", "write", 1 << 20, 8),
    "randread-4k-qd1": ("randread", "randread", 4096, 1),
    "randread-4k-qd32": ("randread", "randread", 4096, 32),
    "randwrite-4k-qd32": ("randwrite", "randwrite", 4096, 32),
}
LABELS = {
    "read-1m-qd8": "seq read 1 MiB QD 8",
    "write-1m-qd8": "seq write 1 MiB QD 8",
    "randread-4k-qd1": "rand read 4 KiB QD 1",
    "randread-4k-qd32": "rand read 4 KiB QD 32",
    "randwrite-4k-qd32": "rand write 4 KiB QD 32",
}




def is_seq(tag):
    return not CASES[tag][0].startswith("rand")


def hb_run(rd, tag):
    """hostbench's disk records of one run as a dict, or None (with the reason in 'why')."""
    doc = load_json(os.path.join(rd, f"hb-{tag}.json"))
    if doc is None:
        return None
    op, _, bs, qd = CASES[tag]
    res = {"warnings": set(), "mismatch": []}
    for r in doc.get("records", []):
        b = r.get("benchmark")
        if b not in ("disk.throughput", "disk.iops", "disk.latency") or r.get("value") is None:
            continue
        p = r.get("params", {})
        if p.get("op") != op:
            continue
        res["params"] = p
        res["extra"] = r.get("extra", {})
        res["warnings"].update(r.get("warnings") or [])
        if b == "disk.throughput":
            res["bw"] = r["value"]
        elif b == "disk.iops":
            res["iops"] = r["value"]
        else:
            s = r.get("stats", {})
            lat = r.get("extra", {}).get("completion_latency") or {}
            res["p50"] = lat.get("p50", s.get("p50", r["value"]))
            res["p99"] = lat.get("p99", s.get("p99"))
            res["p999"] = lat.get("p999", s.get("p999"))
            res["mean"] = lat.get("mean")
            res["min"] = lat.get("min")
            res["max"] = lat.get("max")
            res["count"] = lat.get("count")
    if "params" not in res:
        return None
    p = res["params"]
    want = {"block_bytes": bs, "iodepth": qd, "threads": 1, "engine": "io_uring"}
    for k, v in want.items():
        if k in p and str(p[k]) != str(v):
            res["mismatch"].append(f"{k}={p[k]} (wanted {v})")
    if "direct" in p and str(p["direct"]).lower() not in ("true", "on", "1", "yes"):
        res["mismatch"].append(f"direct={p['direct']} (wanted on)")
    return res


def fio_run(rd, tag):
    doc = load_json(os.path.join(rd, f"fio-{tag}.json"))
    jobs = (doc or {}).get("jobs") or []
    if not jobs:
        return None
    j = jobs[0]
    _, rw, bs, qd = CASES[tag]
    d = j.get("read" if "read" in rw else "write", {})
    if not d or not d.get("total_ios"):
        return None
    lat, clat = d.get("lat_ns", {}), d.get("clat_ns", {})
    lp, cp = lat.get("percentile", {}), clat.get("percentile", {})
    ns = 1e-9

    def pct(tab, k):
        v = tab.get(k)
        return v * ns if v is not None else None

    opts = j.get("job options", {})
    res = {
        "bw": d.get("bw_bytes"),
        "iops": d.get("iops"),
        "p50": pct(lp, "50.000000"),
        "p99": pct(lp, "99.000000"),
        "p999": pct(lp, "99.900000"),
        "mean": lat.get("mean", 0) * ns if lat else None,
        "min": lat.get("min", 0) * ns if lat else None,
        "max": lat.get("max", 0) * ns if lat else None,
        "clat_p50": pct(cp, "50.000000"),
        "clat_p99": pct(cp, "99.000000"),
        "clat_mean": clat.get("mean", 0) * ns if clat else None,
        "slat_mean": d.get("slat_ns", {}).get("mean", 0) * ns,
        "io_bytes": d.get("io_bytes"),
        "count": d.get("total_ios"),
        "runtime_s": d.get("runtime", 0) / 1e3,
        "usr_cpu": j.get("usr_cpu"),
        "sys_cpu": j.get("sys_cpu"),
        "error": j.get("error", 0),
        "depth": j.get("iodepth_level", {}),
        "util": [(u.get("name"), u.get("util")) for u in (doc.get("disk_util") or [])],
        "version": doc.get("fio version"),
        "mismatch": [],
    }
    for k, v in (("bs", bs), ("iodepth", qd), ("rw", rw), ("ioengine", "io_uring"), ("direct", 1)):
        if k in opts and str(opts[k]) not in (str(v), {1048576: "1M", 4096: "4k"}.get(v, str(v))):
            res["mismatch"].append(f"{k}={opts[k]} (wanted {v})")
    return res


def dev_delta(path):
    """(read bytes, write bytes, mean read latency s, mean write latency s) on the block device
    between the two lines of a .dev file; the latencies are the kernel's per-request times
    (read/write ticks over completed requests, /sys/block/X/stat), i.e. what the device took,
    without any tool's own overhead."""
    t = text(path)
    if not t:
        return None
    lines = [ln.split() for ln in t.splitlines() if ln.strip()]
    if len(lines) != 2:
        return None
    a, b = ([int(x) for x in ln] for ln in lines)
    d = [y - x for x, y in zip(a, b)]
    rlat = d[3] / 1e3 / d[0] if d[0] else None
    wlat = d[7] / 1e3 / d[4] if d[4] else None
    return d[2] * SECTOR, d[6] * SECTOR, rlat, wlat


def med(vals):
    v = [x for x in vals if x is not None]
    return st.median(v) if v else None


def fmt_rate(x, seq):
    if x is None:
        return "n/a"
    return f"{x / 1e6:.1f} MB/s" if seq else f"{x / 1e3:.2f} k IO/s"


def fmt_us(x):
    if x is None:
        return "n/a"
    return f"{x * 1e6:.1f} µs" if x < 1e-2 else f"{x * 1e3:.2f} ms"


def ratio(a, b):
    return a / b if a is not None and b else None


def fmt_ratio(r, bold=True):
    if r is None:
        return "n/a"
    return f"**{r:.3f}**" if bold else f"{r:.3f}"


def main():
    out, rounds, meta = load_rounds("summarize-disk.py")
    m = re.search(r"^CASES=(.*)$", meta, re.M)
    tags = [c for c in (m.group(1).split() if m else CASES) if c in CASES]
    kv = dict(re.findall(r"(\w+)=(\S*)", meta))
    notes = [ln[len("note: "):] for ln in meta.splitlines() if ln.startswith("note: ")]

    hb = {t: [hb_run(rd, t) for rd in rounds] for t in tags}
    fio = {t: [fio_run(rd, t) for rd in rounds] for t in tags}
    names = [os.path.basename(rd) for rd in rounds]

    def rate_key(t):
        return "bw" if is_seq(t) else "iops"

    def series(runs, key):
        return [r.get(key) if r else None for r in runs]

    def per_round(t, key):
        a, b = series(hb[t], key), series(fio[t], key)
        return ", ".join(f"{x / y:.3f}" if x is not None and y else "–" for x, y in zip(a, b))

    n = len(rounds)
    desc = []
    for k in ("SIZE", "RUNTIME", "RAMP", "HB_REPEAT", "FIO_LAYOUT", "PAGES"):
        if k in kv:
            desc.append(f"{k}={kv[k]}")
    fs = re.search(r"^filesystem: (.*)$", meta, re.M)
    devl = re.search(r"^device: (.*)$", meta, re.M)
    print(f"Rounds: {n} ({out}); {' '.join(desc)}. 1 thread, io_uring, O_DIRECT, both tools in the same directory"
          f"{' (' + fs.group(1).split(';')[0] + ')' if fs else ''}. MB/s = 1e6 B/s.")
    if devl:
        print(f"Device: {devl.group(1)}")
    bufl = re.search(r"^buffers: (.*)$", meta, re.M)
    if bufl:
        print(f"I/O buffers: {bufl.group(1)}")
    print()
    print(f"| case | metric | hostbench (median) | fio (median) | hostbench / fio | per round | ≥ {RATE_TARGET} |")
    print("|---|---|---|---|---|---|---|")
    for t in tags:
        k, seq = rate_key(t), is_seq(t)
        a, b = med(series(hb[t], k)), med(series(fio[t], k))
        r = ratio(a, b)
        ok = "n/a" if r is None else ("yes" if r >= RATE_TARGET else "**no**")
        print(f"| {LABELS[t]} | {'throughput' if seq else 'IOPS'} | {fmt_rate(a, seq)} | {fmt_rate(b, seq)} "
              f"| {fmt_ratio(r)} | {per_round(t, k)} | {ok} |")

    print()
    print("Latency: hostbench times each I/O from just before the submit call to the reaping of its completion; "
          "fio's `lat` (submission + completion) is the same span and is the basis of the ratio. "
          "fio's `clat` starts after the submit call returned (it leaves out `slat`), shown for information.")
    print()
    print("| case | hostbench p50 | fio lat p50 | ratio p50 | fio clat p50 | hostbench p99 | fio lat p99 | ratio p99 "
          f"| fio clat p99 | within {LAT_TOLERANCE:.0%} |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for t in tags:
        h50, f50 = med(series(hb[t], "p50")), med(series(fio[t], "p50"))
        h99, f99 = med(series(hb[t], "p99")), med(series(fio[t], "p99"))
        c50, c99 = med(series(fio[t], "clat_p50")), med(series(fio[t], "clat_p99"))
        r50, r99 = ratio(h50, f50), ratio(h99, f99)
        if r50 is None or r99 is None:
            ok = "n/a"
        else:
            ok = "yes" if abs(r50 - 1) <= LAT_TOLERANCE and abs(r99 - 1) <= LAT_TOLERANCE else "**no**"
        print(f"| {LABELS[t]} | {fmt_us(h50)} | {fmt_us(f50)} | {fmt_ratio(r50)} | {fmt_us(c50)} "
              f"| {fmt_us(h99)} | {fmt_us(f99)} | {fmt_ratio(r99)} | {fmt_us(c99)} | {ok} |")

    print()
    print("Ratios per round, p50 / p99 (hostbench / fio lat): " + "; ".join(
        f"{LABELS[t]}: {per_round(t, 'p50')} / {per_round(t, 'p99')}" for t in tags))

    print()
    print("All runs (median / min / max over rounds; mean latency and fio's mean slat for information; "
          "depth = IOPS x mean latency (Little's law), the queue depth the tool actually kept):")
    print()
    print("| run | rate median | min | max | p50 median | p99 median | mean lat | depth | fio slat mean | n |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for t in tags:
        seq, k = is_seq(t), rate_key(t)
        for tool, runs in (("hostbench", hb[t]), ("fio", fio[t])):
            v = [x for x in series(runs, k) if x is not None]
            missing = [nm for nm, r in zip(names, runs) if not r]
            if not v:
                continue
            slat = med(series(runs, "slat_mean")) if tool == "fio" else None
            extra = f" (missing in {', '.join(missing)})" if missing else ""
            depth = med([r["iops"] * r["mean"] for r in runs if r and r.get("iops") and r.get("mean")])
            print(f"| {tool} {t} | {fmt_rate(st.median(v), seq)} | {fmt_rate(min(v), seq)} | {fmt_rate(max(v), seq)} "
                  f"| {fmt_us(med(series(runs, 'p50')))} | {fmt_us(med(series(runs, 'p99')))} "
                  f"| {fmt_us(med(series(runs, 'mean')))} | {f'{depth:.1f}' if depth is not None else 'n/a'} "
                  f"| {fmt_us(slat) if tool == 'fio' else '–'} | {len(v)}{extra} |")

    # Device counters: did the I/O reach the disk? For fio the run is only the measured I/O (plus
    # its invalidate); hostbench's run also holds its own file layout (SIZE written, and read
    # back with --verify) and the scratch removal.
    rows = []
    for t in tags:
        for tool, runs, pre in (("hostbench", hb[t], "hb"), ("fio", fio[t], "fio")):
            d = [dev_delta(os.path.join(rd, f"{pre}-{t}.log.dev")) for rd in rounds]
            if not any(d):
                continue
            tool_bytes = []
            for r in runs:
                if r and r.get("count") is not None:
                    tool_bytes.append(r["count"] * CASES[t][2])
                elif r and r.get("io_bytes") is not None:
                    tool_bytes.append(r["io_bytes"])
            rb = med([x[0] for x in d if x])
            wb = med([x[1] for x in d if x])
            tb = med(tool_bytes)
            reads = "read" in CASES[t][0]
            direction = rb if reads else wb
            dlat = med([x[2 if reads else 3] for x in d if x])
            # hostbench's write counters also hold its layout's large buffered writes.
            dlat_note = " (incl. layout)" if tool == "hostbench" and not reads else ""
            rows.append((f"{tool} {t}", rb, wb, tb, ratio(direction, tb), dlat, dlat_note))
    if rows:
        print()
        print("Block-device counters around each run (median over rounds; hostbench's run includes laying out its "
              f"own {kv.get('SIZE', '?')} file): device bytes in the case's direction / bytes the tool moved, "
              "about 1 when every I/O reached the device (O_DIRECT), well below 1 when a cache answered. "
              "Device latency: the kernel's mean time per request in the case's direction (ticks / "
              "completed requests), the device's share of each tool's latency, without the tool's own overhead.")
        print()
        print("| run | device read | device written | tool I/O | device / tool | device mean latency |")
        print("|---|---|---|---|---|---|")
        for name, rb, wb, tb, r, dlat, dlat_note in rows:
            mb = lambda x: f"{x / 1e6:.0f} MB" if x is not None else "n/a"
            lat = f"{fmt_us(dlat)}{dlat_note}" if dlat is not None else "n/a"
            print(f"| {name} | {mb(rb)} | {mb(wb)} | {mb(tb)} | {fmt_ratio(r, False)} | {lat} |")

    # Facts worth stating beside the tables.
    for t in tags:
        for r in hb[t]:
            if r and r["mismatch"]:
                notes.append(f"hostbench {t}: parameters differ from the case: {', '.join(r['mismatch'])}")
                break
        for r in fio[t]:
            if r and r["mismatch"]:
                notes.append(f"fio {t}: options differ from the case: {', '.join(r['mismatch'])}")
                break
        errs = [nm for nm, r in zip(names, fio[t]) if r and r["error"]]
        if errs:
            notes.append(f"fio {t}: job error in {', '.join(errs)}")
        depth = [r["depth"] for r in fio[t] if r]
        qd = CASES[t][3]
        key = str(qd) if qd < 64 else ">=64"
        if depth and qd > 1:
            lo = min(float(dd.get(key, 0)) for dd in depth)
            if lo < 95:
                notes.append(f"fio {t}: only {lo:.1f} % of the time at depth {qd} (iodepth_level)")
        cpu = [(r["usr_cpu"], r["sys_cpu"]) for r in fio[t] if r and r["usr_cpu"] is not None]
        util = [u for r in fio[t] if r for u in r["util"]]
        bits = []
        if cpu:
            bits.append(f"CPU usr {med([c[0] for c in cpu]):.1f} % sys {med([c[1] for c in cpu]):.1f} %")
        if util:
            bits.append("device util " + ", ".join(
                f"{nm} {med([u for n2, u in util if n2 == nm]):.0f} %" for nm in dict(util)))
        if bits:
            notes.append(f"fio {t}: " + "; ".join(bits) + " (medians)")
    # Round-to-round spread of each tool: a ratio is worth little when either tool alone moves more.
    for t in tags:
        k = rate_key(t)
        for tool, runs in (("hostbench", hb[t]), ("fio", fio[t])):
            v = [x for x in series(runs, k) if x]
            if len(v) >= 2 and max(v) / min(v) > 1.1:
                notes.append(f"{tool} {t}: rounds spread {max(v) / min(v):.2f}x (max / min); "
                             "the machine is noisy at this level, a ratio needs more rounds to mean much")
    first = next((r for t in tags for r in hb[t] if r), None)
    if first:
        ex = first.get("extra", {})
        facts = [f"{k} {json.dumps(ex[k])}" for k in ("cache_mode", "fs_type", "device") if k in ex]
        if facts:
            notes.append("hostbench: " + "; ".join(facts))
    warns = sorted({w for t in tags for r in hb[t] if r for w in r["warnings"]})
    for w in warns:
        notes.append(f"hostbench warning: {w}")
    ver = next((r["version"] for t in tags for r in fio[t] if r and r.get("version")), None)
    if ver:
        notes.append(f"{ver}; latency percentiles: fio's are bucket midpoints of its log-linear histogram "
                     "(≤ 0.78 % error), hostbench's come from an HDR histogram (≤ 0.1 %) clamped to min/max")
    tools_line = re.search(r"^TOOLS=(.*)$", meta, re.M)
    tools = tools_line.group(1).split() if tools_line else ["hostbench", "fio"]
    empty = [f"{tool} {t}" for t in tags for tool, runs in (("hostbench", hb[t]), ("fio", fio[t]))
             if tool in tools and not any(runs)]
    print_notes(notes, out, empty)


if __name__ == "__main__":
    main()

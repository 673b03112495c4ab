#!/usr/bin/env python3
"""Tables from a `udp-search-vs-iperf3` output directory.

Reads every round (OUT/rNN/): hostbench's JSON hb-S-B.json (the UDP net.throughput record of the
capacity search: value = receiver goodput at the found rate, extra.offered_bps, extra.lost_fraction,
extra.search_curve) and iperf3's search by hand, iperf3-S-B/trials.tsv (one line per trial, written
by the harness). The found point of a search is its passing trial offered the most (the last one
to pass: the search only moves its lower bound up). Prints Markdown:

- per config, medians over rounds of the found goodput and offered rate of each tool, the ratio
  hostbench / iperf3 of the goodput medians (target >= 1.0) and its per-round range, loss at the
  found point and trials used;
- every round;
- both tools' search curves in the last round.

Missing or failed searches show as "n/a". Usage: summarize-udp-search.py OUT_DIR
"""
import csv
import glob
import os
import re
import statistics as st
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import load_json, load_rounds, print_notes  # noqa: E402


def rate(v):
    if v is None:
        return "n/a"
    return f"{v / 1e9:.3f} Gbit/s" if v >= 1e9 else f"{v / 1e6:.1f} Mbit/s"


def pct(v):
    return "n/a" if v is None else f"{v:.3f} %"


def med(xs):
    xs = [x for x in xs if x is not None]
    return st.median(xs) if xs else None


def hb_search(rd, s, b):
    """hostbench's search in round rd, or None."""
    doc = load_json(os.path.join(rd, f"hb-{s}-{b}.json"))
    for r in (doc or {}).get("records", []):
        p = r.get("params", {})
        if (r.get("benchmark") == "net.throughput" and p.get("proto") == "udp"
                and p.get("streams") == s and p.get("block_bytes") == b):
            if p.get("rate") != "search":
                return {"why": f"record is not a search (rate {p.get('rate', p.get('rate_bps'))})"}
            x = r.get("extra", {})
            curve = x.get("search_curve") or []
            m = re.search(r"(\d+) ms trials", x.get("note", ""))
            lost = x.get("lost_fraction")
            return {
                "goodput": r.get("value"),
                "offered": x.get("offered_bps"),
                "loss_pct": None if lost is None else lost * 100,
                "trials": len(curve) or x.get("search_trials"),
                "max_loss_pct": p.get("max_loss", float("nan")) * 100,
                "trial_ms": int(m.group(1)) if m else None,
                "curve": [(t.get("offered_bps"), t.get("delivered_bps"), t.get("lost_fraction", 0) * 100,
                           t.get("passed")) for t in curve],
                "warnings": r.get("warnings", []),
            }
    return None


def ip_search(rd, s, b, by_sent=False):
    """iperf3's search by hand in round rd, or None."""
    path = os.path.join(rd, f"iperf3-{s}-{b}", "trials.tsv")
    try:
        with open(path) as f:
            rows = list(csv.DictReader(f, delimiter="\t"))
    except OSError:
        return None
    if not rows:
        return {"why": "the unpaced probe gave no result"}
    curve = [(float(t["offered_bps"]), float(t["delivered_bps"]),
              float(t["lost_percent_of_sent"] if by_sent else t["lost_percent"]),
              t["passed"] == "1", float(t["sent_bps"]), float(t["lost_percent_of_sent"])) for t in rows]
    passed = [t for t in curve if t[3]]
    res = {"trials": len(curve), "curve": curve, "goodput": None, "offered": None, "loss_pct": None}
    if passed:
        best = max(passed, key=lambda t: t[0])
        res.update(goodput=best[1], offered=best[0], loss_pct=best[2], sent=best[4], loss_sent=best[5])
    else:
        res["why"] = "no offered rate passed"
    return res


def configs(rounds):
    found = set()
    for rd in rounds:
        for n in os.listdir(rd):
            m = re.fullmatch(r"(?:hb-(\d+)-(\d+)\.json|iperf3-(\d+)-(\d+))", n)
            if m:
                g = [int(x) for x in m.groups() if x is not None]
                found.add((g[0], g[1]))
    return sorted(found)


def main():
    out, rounds, meta = load_rounds("summarize-udp-search.py")
    m = re.search(r"MAX_LOSS=([0-9.]+)%", meta)
    max_loss = m.group(1) if m else "?"
    m = re.search(r'TOOLS="([^"]*)"', meta)
    tools = m.group(1).split() if m else ["hostbench", "iperf3"]
    by_sent = "IPERF3_LOSS=sent" in meta
    m = re.search(r"iperf3 -t (\d+)", meta)
    ip_trial_ms = int(m.group(1)) * 1000 if m else None
    print(meta.strip())
    print()
    print(f"UDP capacity at <= {max_loss} % loss (RFC 2544 throughput), medians over rounds; "
          "goodput is what the receiver counted at the found offered rate.")
    print()
    print("| streams x block | hostbench goodput (offered) | iperf3 goodput (offered) | ratio of goodput medians "
          "| per-round ratios | ratio of offered | loss at found point: hostbench / iperf3 "
          "| trials: hostbench / iperf3 | target |")
    print("|---|---|---|---|---|---|---|---|---|")
    notes, empty, per_round, trial_ms, warnings = [], [], [], set(), set()
    for s, b in configs(rounds):
        hbs, ips = [], []
        for rd in rounds:
            h, i = hb_search(rd, s, b), ip_search(rd, s, b, by_sent)
            hbs.append(h), ips.append(i)
            per_round.append((os.path.basename(rd), s, b, h, i))
            if h and h.get("trial_ms"):
                trial_ms.add(h["trial_ms"])
            for w in (h or {}).get("warnings", []):
                warnings.add(f"hostbench {s} x {b} B: {w}")
            for tool, x in (("hostbench", h), ("iperf3", i)):
                if tool not in tools:
                    continue
                what = f"{os.path.basename(rd)} {tool} {s} x {b} B"
                if x is None:
                    log = f"hb-{s}-{b}.log" if tool == "hostbench" else f"iperf3-{s}-{b}/"
                    notes.append(f"{what}: no search result (see {log} and commands.log)")
                elif x.get("why"):
                    notes.append(f"{what}: {x['why']}")
                elif tool == "iperf3" and x["sent"] < 0.98 * x["offered"]:
                    notes.append(f"{what}: at the found point iperf3's client sent {rate(x['sent'])}, short of "
                                 f"the {rate(x['offered'])} offered (its sender could not keep that rate up)")
        g = lambda xs, k: [x.get(k) if x else None for x in xs]  # noqa: E731
        hg, ig = med(g(hbs, "goodput")), med(g(ips, "goodput"))
        ho, io = med(g(hbs, "offered")), med(g(ips, "offered"))
        ratios = [h["goodput"] / i["goodput"] for h, i in zip(hbs, ips)
                  if h and i and h.get("goodput") and i.get("goodput")]
        for tool, v in (("hostbench", hg), ("iperf3", ig)):
            if v is None:
                empty.append(f"{tool} {s} x {b} B")
        ratio = f"{hg / ig:.3f}" if hg and ig else "n/a"
        oratio = f"{ho / io:.3f}" if ho and io else "n/a"
        spread = f"{min(ratios):.2f}–{max(ratios):.2f}" if ratios else "n/a"
        ht, it = med(g(hbs, "trials")), med(g(ips, "trials"))
        trials = f"{'n/a' if ht is None else f'{ht:g}'} / {'n/a' if it is None else f'{it:g}'}"
        print(f"| {s} x {b} B | {rate(hg)} ({rate(ho)}) | {rate(ig)} ({rate(io)}) | {ratio} | {spread} | {oratio} "
              f"| {pct(med(g(hbs, 'loss_pct')))} / {pct(med(g(ips, 'loss_pct')))} | {trials} | >= 1.0 |")

    print()
    print("Every round (goodput at the found rate, offered rate, loss there, trials used):")
    print()
    print("| round | streams x block | hostbench goodput | offered | loss | trials | iperf3 goodput | offered "
          "| loss | trials | ratio |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for rn, s, b, h, i in per_round:
        h, i = h or {}, i or {}
        ratio = f"{h['goodput'] / i['goodput']:.3f}" if h.get("goodput") and i.get("goodput") else "n/a"
        print(f"| {rn} | {s} x {b} B | {rate(h.get('goodput'))} | {rate(h.get('offered'))} | {pct(h.get('loss_pct'))} "
              f"| {h.get('trials', 'n/a')} | {rate(i.get('goodput'))} | {rate(i.get('offered'))} "
              f"| {pct(i.get('loss_pct'))} | {i.get('trials', 'n/a')} | {ratio} |")

    # The last round in which each tool searched each config.
    curves = {}
    for rn, s, b, h, i in per_round:
        for tool, x in (("hostbench", h), ("iperf3", i)):
            if x and x.get("curve"):
                curves[(s, b, tool)] = (rn, x["curve"])
    if curves:
        print()
        print("Search curves, the last round of each (offered -> delivered, loss; + passed, - failed; "
              "the first trial is the unpaced probe):")
        print()
        for (s, b, tool), (rn, curve) in sorted(curves.items()):
            steps = "; ".join(f"{rate(t[0])} -> {rate(t[1])}, {t[2]:.3f} % {'+' if t[3] else '-'}" for t in curve)
            print(f"- {tool} {s} x {b} B ({rn}): {steps}")
    ls = [i.get("loss_sent") for _, _, _, _, i in per_round if i and i.get("loss_sent") is not None]
    if by_sent:
        notes.append("iperf3 trials passed or failed by loss against the datagrams its client sent "
                     "(IPERF3_LOSS=sent, hostbench's definition); the iperf3 loss column is that figure")
    elif ls:
        notes.append(f"iperf3 at its found points, loss counted against the datagrams the client sent (hostbench's "
                     f"definition; it includes those still queued when the server stopped counting): median "
                     f"{st.median(ls):.3f} %, max {max(ls):.3f} %")

    if trial_ms and ip_trial_ms:
        if trial_ms == {ip_trial_ms}:
            notes.append(f"trial length: {ip_trial_ms} ms for both tools (iperf3 -t {ip_trial_ms // 1000}: "
                         "iperf3 3.12 takes whole seconds only)")
        else:
            notes.append(f"trial lengths differ: hostbench {', '.join(f'{t} ms' for t in sorted(trial_ms))}, "
                         f"iperf3 {ip_trial_ms} ms (whole seconds only): shorter trials see fewer bursts and "
                         "may pass a higher rate")
    notes.append("iperf3: -b is per stream (the harness passes the total / streams); its loss (IPERF3_LOSS=server, the "
                 "default) is the lost_percent its server reports (sequence gaps over the highest sequence seen, "
                 "not the datagrams still queued when it stops reading); its goodput "
                 "end.sum_received.bits_per_second; the unpaced probe is -b 0")
    notes.append("hostbench: value = receiver goodput at the found rate (median of --repeat searches), offered = "
                 "extra.offered_bps, loss = extra.lost_fraction (lost / sent datagrams)")
    bufs = set()
    for rd in rounds:
        for f in sorted(glob.glob(os.path.join(rd, "iperf3-*", "t00.json")))[:1]:
            start = (load_json(f) or {}).get("start", {})
            if "rcvbuf_actual" in start:
                bufs.add(f"{start['rcvbuf_actual']} / {start.get('sndbuf_actual')}")
    if bufs:
        notes.append(f"iperf3 client socket buffers, rcvbuf_actual / sndbuf_actual (getsockopt: twice what "
                     f"was granted, capped by net.core.rmem_max / wmem_max): {', '.join(sorted(bufs))} B")
    notes.extend(sorted(warnings))
    print_notes(notes, out, empty)


if __name__ == "__main__":
    main()

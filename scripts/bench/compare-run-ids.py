#!/usr/bin/env python3
"""Compare two run.json files by what they measured, not by the figures: the list of
(benchmark, params) of every record and every skip, in order. Used to show that a refactor left a
profile's cases exactly as they were. Prints the differences; exits 1 when there are any.

Usage: compare-run-ids.py BEFORE/run.json AFTER/run.json
"""
import json
import sys


def ids(path):
    doc = json.load(open(path))
    recs = [("record", r["benchmark"], json.dumps(r["params"], sort_keys=True)) for r in doc["records"]]
    skips = [("skip", s.get("benchmark"), json.dumps(s.get("params"), sort_keys=True)) for s in doc.get("skipped", [])]
    return recs + skips


before, after = ids(sys.argv[1]), ids(sys.argv[2])
only_before = [x for x in before if x not in after]
only_after = [x for x in after if x not in before]
for x in only_before:
    print("only before:", *x)
for x in only_after:
    print("only after: ", *x)
same_order = before == after
print(f"{len(before)} before, {len(after)} after; identical ids and params: {not only_before and not only_after}; same order: {same_order}")
sys.exit(0 if same_order else 1)

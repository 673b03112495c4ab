"""Helpers shared by the side-by-side summarizers (summarize-{mem,disk,net,gpu}.py)."""

import glob
import json
import os
import re
import sys


def text(path):
    """A file's contents, or None when it cannot be read."""
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def load_json(path):
    """A JSON document, or None. Text before the first `{` is skipped: fio may put warnings ahead
    of the document in its --output file."""
    t = text(path)
    if not t:
        return None
    i = t.find("{")
    if i < 0:
        return None
    try:
        return json.loads(t[i:])
    except ValueError:
        return None


def load_rounds(script):
    """OUT_DIR from argv, its rNN round directories and its meta.txt; exits with usage otherwise."""
    if len(sys.argv) != 2:
        sys.exit(f"usage: {script} OUT_DIR")
    out = sys.argv[1]
    rounds = sorted(glob.glob(os.path.join(out, "r[0-9][0-9]")))
    if not rounds:
        sys.exit(f"no rounds (r01, r02, ...) in {out}")
    return out, rounds, text(os.path.join(out, "meta.txt")) or ""


def print_notes(notes, out, empty=()):
    """The closing lines: the series that got no value in any round (a tool failed or was not run),
    every note, then where the exact commands of the run are."""
    if empty:
        print()
        print("No value in any round (failed or not run; see commands.log and the rNN/ files): "
              + ", ".join(empty))
    if notes:
        print()
        for s in notes:
            print(f"- {s}")
    cmds = os.path.join(out, "commands.log")
    if os.path.exists(cmds):
        print(f"- commands: {cmds}")

"""Helpers shared by the side-by-side summarizers (summarize-mem.py, summarize-disk.py)."""

import os


def print_notes(notes, out):
    """The closing bullet list: every note, then where the exact commands of the run are."""
    if notes:
        print()
        for s in notes:
            print(f"- {s}")
    cmds = os.path.join(out, "commands.log")
    if os.path.exists(cmds):
        print(f"- commands: {cmds}")

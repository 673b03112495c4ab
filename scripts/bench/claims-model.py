#!/usr/bin/env python3
"""A model of the f64 LU's trailing-update claims at many threads: not a measurement.

The idle time at a step's barrier when the columns are claimed in fixed widths (the rule before
issue 33's guided claims: a quarter of a thread's share, 96 to 288 columns) against guided
claims (1/(2*threads) of the columns still unclaimed, 48 to 288). Each thread runs the update
at RATE +/- 10 %; the panel team (TEAM threads, as the solver sizes it) joins each step late by
the time of a panel of m rows at PANEL_S_PER_ROW seconds per row. Usage: claims-model.py
[N [THREADS]]; defaults are the 16-vCPU device's n and thread count.
"""
import math
import random
import sys

N = int(sys.argv[1]) if len(sys.argv) > 1 else 13568
THREADS = int(sys.argv[2]) if len(sys.argv) > 2 else 16
NB, MR, CHUNK = 256, 24, 288  # panel width, AVX-512 tile width, packed buffer width
RATE = 40e9  # f64 FLOP/s per thread: 16 threads at about 650 GFLOP/s
TEAM = min(max(THREADS // 4, 1), 4)  # the panel team, as `Workers::new` sizes it
PANEL_S_PER_ROW = 2e-6  # a 256-column panel, per row, on a team of four (a guess)


def up(x, unit):
    return math.ceil(x / unit) * unit


def fixed(m):
    w = min(max(up(m // (4 * THREADS), MR), 4 * MR), CHUNK)
    return [min(w, m - a) for a in range(0, m, w)]


def guided(m):
    out, a = [], 0
    while a < m:
        w = min(max(up(math.ceil((m - a) / (2 * THREADS)), MR), 48), CHUNK, m - a)
        out.append(w)
        a += w
    return out


def step(widths, m, late):
    """Wall time of one step's update and the threads' idle time in it."""
    speed = [RATE * random.uniform(0.9, 1.1) for _ in range(THREADS)]
    t = [late if i < TEAM else 0.0 for i in range(THREADS)]
    for w in widths:  # the next claim goes to the first thread free
        i = min(range(THREADS), key=t.__getitem__)
        t[i] += 2 * m * w * NB / speed[i]
    end = max(t)
    return end, sum(end - x for x in t)


for name, rule in (("fixed", fixed), ("guided", guided)):
    random.seed(1)
    wall = idle = 0.0
    for p in range(N // NB):
        m = N - (p + 2) * NB
        if m <= 0:
            break
        e, i = step(rule(m), m, PANEL_S_PER_ROW * m)
        wall, idle = wall + e, idle + i
    print(f"{name}: update {wall:.3f} s, idle share {idle / (THREADS * wall):.3f}")

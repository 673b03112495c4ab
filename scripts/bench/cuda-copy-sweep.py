#!/usr/bin/env python3
"""Copy-kernel launch shapes on an NVIDIA GPU, beside cudaMemcpyAsync (device to device).

The kernel is hostbench's `bw_copy_u32` layout (crates/hostbench-gpu/src/ptx.rs): a grid-stride
loop that loads VECTORS 16-byte vectors per thread per turn before storing any, then the rest
one at a time. This varies what hostbench fixes: vectors per turn, the load and store cache
hints, the block size and the number of waves of resident blocks (2048 threads per SM), and
prints each shape's median bandwidth (read + write, 5 rounds) and its ratio to the driver's copy.
Needs CuPy; every variant's destination is compared with its source.

    scripts/bench/cuda-copy-sweep.py                       # the grid BENCHMARKS.md quotes
    scripts/bench/cuda-copy-sweep.py --waves 16,64,128 --vectors 4 --hints default
"""
import argparse
import itertools
import os
import tempfile

import cupy as cp
import numpy as np

HINTS = {
    "default": ("ld.global", "st.global"),
    "nc": ("ld.global.nc", "st.global"),
    "cs": ("ld.global.cs", "st.global.cs"),
    "nc-cs": ("ld.global.nc", "st.global.cs"),
    "lu-cs": ("ld.global.lu", "st.global.cs"),
}


def copy_ptx(u, ld, st):
    def v(k):
        return "{%%r%d, %%r%d, %%r%d, %%r%d}" % tuple(8 + 4 * k + i for i in range(4))

    lines = [
        ".version 6.0\n.target sm_50\n.address_size 64\n",
        ".visible .entry k(.param .u64 src, .param .u64 dst, .param .u64 n)\n{",
        "\t.reg .pred %%p;\n\t.reg .b32 %%r<%d>;\n\t.reg .b64 %%rd<16>;" % (8 + 4 * u),
        "\tld.param.u64 %rd0, [src];\n\tld.param.u64 %rd1, [dst];\n\tld.param.u64 %rd2, [n];",
        "\tcvta.to.global.u64 %rd0, %rd0;\n\tcvta.to.global.u64 %rd1, %rd1;",
        "\tmov.u32 %r0, %ctaid.x;\n\tmov.u32 %r1, %ntid.x;\n\tmov.u32 %r2, %tid.x;",
        "\tmov.u32 %r3, %nctaid.x;\n\tmul.wide.u32 %rd3, %r0, %r1;\n\tcvt.u64.u32 %rd4, %r2;",
        "\tadd.s64 %rd3, %rd3, %rd4;\n\tmul.wide.u32 %rd4, %r1, %r3;",
        "\tshr.u64 %%rd8, %%rd2, 2;\n\tmul.lo.u64 %%rd9, %%rd4, %d;" % (u - 1),
        "\tshl.b64 %%rd11, %%rd4, 4;\n\tmul.lo.u64 %%rd13, %%rd4, %d;" % u,
        "\tadd.s64 %rd10, %rd3, %rd9;\n\tsetp.ge.u64 %p, %rd10, %rd8;\n\t@%p bra REST;\nMAIN:",
        "\tshl.b64 %rd5, %rd3, 4;\n\tadd.s64 %rd5, %rd0, %rd5;",
        "\tshl.b64 %rd7, %rd3, 4;\n\tadd.s64 %rd7, %rd1, %rd7;",
    ]
    for k in range(u):
        lines.append("\tmad.lo.u64 %%rd12, %%rd11, %d, %%rd5;" % k)
        lines.append("\t%s.v4.u32 %s, [%%rd12];" % (ld, v(k)))
    for k in range(u):
        lines.append("\tmad.lo.u64 %%rd12, %%rd11, %d, %%rd7;" % k)
        lines.append("\t%s.v4.u32 [%%rd12], %s;" % (st, v(k)))
    lines += [
        "\tadd.s64 %rd3, %rd3, %rd13;\n\tadd.s64 %rd10, %rd3, %rd9;",
        "\tsetp.lt.u64 %p, %rd10, %rd8;\n\t@%p bra MAIN;",
        "REST:\n\tsetp.ge.u64 %p, %rd3, %rd8;\n\t@%p bra DONE;\nONE:",
        "\tshl.b64 %%rd5, %%rd3, 4;\n\tadd.s64 %%rd12, %%rd0, %%rd5;\n\t%s.v4.u32 %s, [%%rd12];"
        % (ld, v(0)),
        "\tadd.s64 %%rd12, %%rd1, %%rd5;\n\t%s.v4.u32 [%%rd12], %s;" % (st, v(0)),
        "\tadd.s64 %rd3, %rd3, %rd4;\n\tsetp.lt.u64 %p, %rd3, %rd8;\n\t@%p bra ONE;",
        "DONE:\n\tret;\n}\n",
    ]
    return "\n".join(lines)


def median_bandwidth(fn, nbytes):
    """Median of 5 rounds of ~3 GB batches, read + write counted, after 3 warm-up calls."""
    for _ in range(3):
        fn()
    cp.cuda.Device().synchronize()
    reps = max(5, int(3e9 // nbytes))
    rounds = []
    for _ in range(5):
        start, end = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        for _ in range(reps):
            fn()
        end.record()
        end.synchronize()
        rounds.append(2 * nbytes * reps / (cp.cuda.get_elapsed_time(start, end) / 1e3))
    return sorted(rounds)[2]


def main():
    ints = lambda s: [int(x) for x in s.split(",")]
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=ints, default=[256 << 20, 1 << 30], help="bytes")
    ap.add_argument("--vectors", type=ints, default=[2, 4, 8])
    ap.add_argument("--hints", default=",".join(HINTS))
    ap.add_argument("--blocks", type=ints, default=[256])
    ap.add_argument("--waves", type=ints, default=[1, 4, 8, 16, 32, 64, 128])
    a = ap.parse_args()
    sms = cp.cuda.Device(0).attributes["MultiProcessorCount"]
    tmp = tempfile.mkdtemp()
    for size in a.sizes:
        src = cp.arange(size // 4, dtype=cp.uint32)
        dst = cp.zeros_like(src)
        ref = median_bandwidth(
            lambda: cp.cuda.runtime.memcpyAsync(dst.data.ptr, src.data.ptr, size, 3, 0), size
        )
        print(f"{size >> 20} MiB: cudaMemcpyAsync device to device {ref / 1e12:.3f} TB/s")
        rows = []
        for u, hint, block, waves in itertools.product(
            a.vectors, a.hints.split(","), a.blocks, a.waves
        ):
            path = os.path.join(tmp, f"copy-{u}-{hint}.ptx")
            with open(path, "w") as f:
                f.write(copy_ptx(u, *HINTS[hint]))
            kernel = cp.RawModule(path=path).get_function("k")
            grid = sms * (2048 // block) * waves
            dst.fill(0)
            bw = median_bandwidth(
                lambda: kernel((grid,), (block,), (src, dst, np.uint64(size // 4))), size
            )
            assert bool((dst == src).all()), f"variant {u} {hint} {block} {waves} copied wrong"
            rows.append((bw, u, hint, block, waves))
        for bw, u, hint, block, waves in sorted(rows, reverse=True):
            print(
                f"  {bw / 1e12:.3f} TB/s  {bw / ref:.3f} x memcpy  vectors={u} hints={hint} "
                f"block={block} waves={waves}"
            )
        del src, dst


if __name__ == "__main__":
    main()

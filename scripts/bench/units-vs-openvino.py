#!/usr/bin/env python3
"""The CPU's low-precision units beside what a framework's GEMM reaches on them, in one session.

hostbench measures each unit's own rate (`hostbench cpu --isa amx,...`: the instruction back to
back on resident registers or tiles). No reference tool measures AMX, so the comparison point is
the best low-precision matrix multiply a reader can run here: OpenVINO's CPU plugin (oneDNN's
brgemm kernels, AMX where the CPU has it) on a square MatMul, bf16 through the precision hint and
int8 through FakeQuantize on both inputs (the low-precision transformations turn that into an
int8 GEMM; the script prints the precision the plugin ran, so a silent f32 fallback shows).

Rounds alternate hostbench and OpenVINO; the table gives medians and the per-round spread.
Usage: units-vs-openvino.py HOSTBENCH ROUNDS N [THREADS...]
    e.g. units-vs-openvino.py target/release/hostbench 5 4096 1 2
Needs `pip install openvino numpy` (a virtual environment is fine).
"""
import json
import statistics as st
import subprocess
import sys
import time

import numpy as np
import openvino as ov
from openvino import opset13 as ops


def gemm_model(n, int8):
    """A = parameter [n, n], B = constant [n, n], C = A @ B (with FakeQuantize for int8)."""
    rng = np.random.default_rng(1)
    a = ops.parameter([n, n], ov.Type.f32, name="a")
    w = ops.constant(rng.uniform(-1, 1, (n, n)).astype(np.float32))
    if int8:
        lo, hi = ops.constant(np.float32(-1)), ops.constant(np.float32(1))
        a_in = ops.fake_quantize(a, lo, hi, lo, hi, 256)
        w_in = ops.fake_quantize(w, lo, hi, lo, hi, 255)
    else:
        a_in, w_in = a, w
    return ov.Model([ops.matmul(a_in, w_in, False, False)], [a])


def compiled(n, threads, int8):
    core = ov.Core()
    cfg = {
        "INFERENCE_NUM_THREADS": str(threads),
        "NUM_STREAMS": "1",
        "PERFORMANCE_HINT": "LATENCY",
        "INFERENCE_PRECISION_HINT": "f32" if int8 else "bf16",
    }
    cm = core.compile_model(gemm_model(n, int8), "CPU", cfg)
    precisions = sorted({
        op.get_rt_info()["runtimePrecision"].astype(str)
        for op in cm.get_runtime_model().get_ops()
        if op.get_rt_info()["layerType"].astype(str) in ("MatMul", "FullyConnected")
    })
    return cm, precisions


def gemm_rate(cm, n, seconds=2.0):
    """Best-of-slices GEMM rate (2 n^3 operations per multiply), after a warm-up."""
    req = cm.create_infer_request()
    x = np.random.default_rng(2).uniform(-1, 1, (n, n)).astype(np.float32)
    for _ in range(3):
        req.infer({0: x})
    rates, t_end = [], time.perf_counter() + seconds
    while time.perf_counter() < t_end:
        t = time.perf_counter()
        req.infer({0: x})
        rates.append(2 * n**3 / (time.perf_counter() - t))
    return st.median(rates)


def hostbench(hb, threads):
    """hostbench's unit records, keyed (isa, dtype, threads)."""
    out = subprocess.run(
        [hb, "cpu", "--isa", "amx,avx512-bf16,avx512-vnni", "--dtype", "bf16,i8",
         "--threads", ",".join(map(str, threads)), "--repeat", "5", "--json", "-", "--quiet"],
        check=True, capture_output=True, text=True).stdout
    return {(r["params"]["isa"], r["params"]["dtype"], r["params"]["threads"]): r["value"]
            for r in json.loads(out)["records"]}


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    hb, rounds, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    threads = [int(t) for t in sys.argv[4:]] or [1, 2]
    print(f"OpenVINO {ov.get_version()}, MatMul {n} x {n} x {n}, {rounds} rounds")
    models = {(dt, t): compiled(n, t, dt == "i8") for dt in ("bf16", "i8") for t in threads}
    for (dt, t), (_, prec) in models.items():
        print(f"  {dt} GEMM, {t} thread(s): the plugin ran MatMul in {', '.join(prec)}")
    hb_runs, ov_runs = [], []
    for r in range(rounds):
        hb_runs.append(hostbench(hb, threads))
        ov_runs.append({k: gemm_rate(cm, n) for k, (cm, _) in models.items()})
        print(f"  round {r + 1} done", file=sys.stderr)
    print()
    print("| dtype | threads | hostbench amx (unit peak) | hostbench avx512 dot product | OpenVINO GEMM | GEMM / amx unit | GEMM per round |")
    print("|---|---|---|---|---|---|---|")
    for dt in ("bf16", "i8"):
        dot_isa = "avx512-bf16" if dt == "bf16" else "avx512-vnni"
        for t in threads:
            amx = st.median(run.get(("amx", dt, t), 0) for run in hb_runs)
            dot = st.median(run.get((dot_isa, dt, t), 0) for run in hb_runs)
            gemm = [run[(dt, t)] for run in ov_runs]
            unit = "TFLOP/s" if dt == "bf16" else "TOP/s"
            print(f"| {dt} | {t} | {amx / 1e12:.2f} {unit} | {dot / 1e12:.3f} {unit} | "
                  f"{st.median(gemm) / 1e12:.2f} {unit} | **{st.median(gemm) / amx:.3f}** | "
                  f"{', '.join(f'{g / amx:.3f}' for g in gemm)} |")


if __name__ == "__main__":
    main()

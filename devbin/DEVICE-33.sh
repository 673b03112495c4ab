#!/usr/bin/env bash
# Issue 33 on the 16-vCPU device (Intel Emerald Rapids, AVX-512 + AMX): linpack at the n it
# chooses against the same process's all-thread FMA rate, the best OpenBLAS on the host and
# numpy/SciPy's bundled OpenBLAS at the same n. Run from the repository root with a release
# binary at ./devbin/hostbench; writes JSON and logs to $OUT (default ./out-33). Under 4 minutes.
#
# No `set -e`: a step that fails must not lose the output of the others.
set -x
set -u
HB=${HB:-./devbin/hostbench}
OUT=${OUT:-./out-33}
PY=${PY:-/opt/torch/.venv/bin/python3}
[ -x "$PY" ] || PY=python3
mkdir -p "$OUT"
THREADS=${THREADS:-$(nproc)}

{ date -u; uname -a; nproc; grep -m1 'model name' /proc/cpuinfo; free -g; "$HB" --version; } \
    > "$OUT/host.txt" 2>&1
cat "$OUT/host.txt"

# 1. FMA rate: cpu.flops f64 on the widest ISA at all threads (about 10 s).
timeout 60 "$HB" cpu --dtype f64 --threads "$THREADS" --json "$OUT/cpu-f64.json" \
    > "$OUT/cpu-f64.txt" 2>&1
echo "cpu rc=$?"; cat "$OUT/cpu-f64.txt"

# 2. linpack at the n it chooses (a 3 s solve at the measured FMA rate), OpenBLAS beside it:
#    the system library, a fallback core forced right, wheel-bundled builds (about 1-2 min).
timeout 180 "$HB" linpack --threads "$THREADS" --reference --json "$OUT/linpack.json" \
    > "$OUT/linpack.txt" 2> "$OUT/linpack.err"
echo "linpack rc=$?"; cat "$OUT/linpack.txt" "$OUT/linpack.err"

# 3. The figures, and the n for the SciPy solve.
N=$("$PY" - "$OUT" <<'EOF'
import json, sys
out = sys.argv[1]
def load(name):
    try:
        return json.load(open(f"{out}/{name}"))
    except Exception as e:
        print(f"{name}: {e}", file=sys.stderr)
        return None
cpu, lp = load("cpu-f64.json"), load("linpack.json")
fma = None
if cpu:
    recs = [r for r in cpu["records"] if r["benchmark"] == "cpu.flops" and r["params"].get("dtype") == "f64"]
    if recs:
        fma = max(r["value"] for r in recs)
        print(f"cpu.flops f64 at {recs[0]['params']['threads']} threads: {fma/1e9:.1f} GFLOP/s", file=sys.stderr)
n = 0
if lp:
    r = [r for r in lp["records"] if r["benchmark"] == "cpu.linpack"][0]
    x = r["extra"]
    n = r["params"]["n"]
    print(f"linpack n={n} NB={x.get('nb')} threads={r['params']['threads']}: {r['value']/1e9:.1f} GFLOP/s, "
          f"residual {x.get('residual'):.3g}, panel share {x.get('panel_share', 0):.3f}, "
          f"idle share {x.get('idle_share', 0):.3f}", file=sys.stderr)
    print(f"sizing: {json.dumps(x.get('sizing'))}", file=sys.stderr)
    print(f"of_fma_rate (same process): {x.get('of_fma_rate')}", file=sys.stderr)
    if fma:
        print(f"linpack / cpu.flops run: {r['value']/fma:.3f}", file=sys.stderr)
    print(f"efficiency vs peak: {r.get('efficiency')}", file=sys.stderr)
    ref = r.get("reference") or {}
    print(f"reference: {ref.get('version')}: {ref.get('value', 0)/1e9:.1f} GFLOP/s, "
          f"hostbench/reference = {ref.get('ratio')}", file=sys.stderr)
    print(f"system OpenBLAS corename: {x.get('openblas_corename')}", file=sys.stderr)
    for b in x.get("blas", []):
        g = b.get("flops_per_second")
        print(f"  BLAS tried: {b.get('library')} core={b.get('corename')} "
              f"forced={b.get('forced_coretype')} "
              + (f"{g/1e9:.1f} GFLOP/s" if g else f"error: {b.get('error')}"), file=sys.stderr)
    for w in r.get("warnings", []):
        print(f"  warning: {w}", file=sys.stderr)
print(n)
EOF
)
echo "N=$N"

# 4. numpy/SciPy's bundled OpenBLAS at the same n: scipy.linalg.solve (LU + solve), best of 3.
if [ -n "$N" ] && [ "$N" -gt 0 ]; then
    OMP_NUM_THREADS=$THREADS OPENBLAS_NUM_THREADS=$THREADS timeout 120 "$PY" - "$N" <<'EOF' 2>&1 | tee "$OUT/scipy.txt"
import sys, time
import numpy as np
n = int(sys.argv[1])
try:
    import threadpoolctl
    for i in threadpoolctl.threadpool_info():
        print("BLAS:", {k: i.get(k) for k in ("internal_api", "version", "architecture", "num_threads", "filepath")})
except Exception as e:
    print("threadpoolctl not available:", e)
    try:
        np.show_config()
    except Exception:
        pass
import scipy, scipy.linalg
print("numpy", np.__version__, "scipy", scipy.__version__)
rng = np.random.default_rng(42)
a0 = rng.random((n, n)) - 0.5
b = rng.random(n) - 0.5
flops = 2.0 / 3.0 * n**3 + 2.0 * n**2
best = None
for i in range(3):
    a = np.array(a0, order="F")
    t = time.perf_counter()
    x = scipy.linalg.solve(a, b, overwrite_a=True, check_finite=False)
    dt = time.perf_counter() - t
    r = np.abs(a0 @ x - b).max() / (np.finfo(float).eps * (np.abs(a0).sum(1).max() * np.abs(x).max() + np.abs(b).max()) * n)
    print(f"scipy.linalg.solve n={n}: {dt:.3f} s, {flops/dt/1e9:.1f} GFLOP/s, scaled residual {r:.3g}")
    best = dt if best is None else min(best, dt)
print(f"scipy best: {flops/best/1e9:.1f} GFLOP/s = (2/3 n^3 + 2 n^2) / {best:.3f} s at n={n}")
EOF
    echo "scipy rc=${PIPESTATUS[0]}"
fi
date -u
ls -l "$OUT"

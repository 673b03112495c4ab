//! A hand-made run with every subsystem's benchmark ids and parameters (DESIGN.md's table) and
//! one unknown prefix: the fixture of unit, snapshot and integration tests, so reports are tested
//! on `net.*` and `gpu.*` records before those subsystems exist, and with exact numbers. The
//! memory matrices, the loaded-latency sweep, the network's latency under load and its
//! transactions have their own builders (`c2c`, `numa`, `loaded_latency`, `net_under_load`,
//! `net_idle_latency`, `net_transactions`), kept out of the synthetic run so its snapshots stay
//! as they are.

use hostbench_core::model::{Host, Metric, Peak, Record, Reference, RunResult, Skipped};
use hostbench_core::stats::summarize;
use serde_json::{json, Map, Value};

/// A record with the runner's statistics over `samples`.
pub fn record(bench: &str, metric: Metric, unit: &str, params: Value, samples: &[f64]) -> Record {
    let stats = summarize(samples);
    let params: Map<String, Value> = match params {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    Record {
        benchmark: bench.to_string(),
        params,
        metric,
        unit: unit.to_string(),
        value: stats.median,
        stats,
        samples: samples.to_vec(),
        peak: None,
        efficiency: None,
        reference: None,
        warnings: Vec::new(),
        extra: Map::new(),
        conditions: None,
        diagnosis: Vec::new(),
        efficiency_effective: None,
        incomplete: None,
        trigger: None,
        work: Default::default(),
        subsystem_causes: Vec::new(),
    }
}

fn peak(r: &mut Record, value: f64, basis: &str) {
    r.set_peak(Some(Peak {
        value,
        basis: basis.to_string(),
    }));
}

/// Samples around `v` with a ±1 % spread.
fn around(v: f64) -> [f64; 3] {
    [v * 0.99, v, v * 1.01]
}

const KIB: u64 = 1024;
const MIB: u64 = 1024 * 1024;

pub fn synthetic_run() -> RunResult {
    use Metric::{Latency, Throughput};
    let host = Host {
        hostname: "testhost".into(),
        os: "Debian GNU/Linux 12".into(),
        kernel: "6.1.0".into(),
        virtualization: "kvm".into(),
        ..Host::default()
    };
    let mut run = RunResult::new(host);
    run.started_at = "2025-01-02T03:04:05Z".into();
    run.finished_at = Some("2025-01-02T03:09:05Z".into());
    run.tool.version = "0.1.0".into();
    let rs = &mut run.records;

    let cpu_basis = "2 cores x 3.0 GHz x 16 FLOP/cycle";
    for (threads, v, pk) in [(2, 98e9, 100e9), (1, 49e9, 50e9)] {
        let mut r = record(
            "cpu.flops",
            Throughput,
            "FLOP/s",
            json!({"dtype": "f64", "isa": "avx2-fma", "threads": threads, "scaling": "strong"}),
            &[v - 1e9, v, v + 1e9],
        );
        peak(
            &mut r,
            pk,
            if threads == 2 {
                cpu_basis
            } else {
                "1 core x 3.0 GHz x 16 FLOP/cycle"
            },
        );
        if threads == 2 {
            r.reference = Some(Reference {
                tool: "likwid-bench".into(),
                version: "5.2.2".into(),
                value: 95e9,
                ratio: 98e9 / 95e9,
            });
        }
        rs.push(r);
    }
    rs.push(record(
        "cpu.iops",
        Throughput,
        "OP/s",
        json!({"dtype": "i8", "isa": "avx2-fma", "threads": 1, "scaling": "strong"}),
        &around(3.9e11),
    ));

    for pattern in ["seq", "random"] {
        for block in [1, KIB] {
            for threads in [1, 2] {
                let base = if block == 1 { 0.4e9 } else { 9e9 } * threads as f64;
                let base = if pattern == "random" {
                    base * 0.5
                } else {
                    base
                };
                let mut r = record(
                    "mem.bandwidth",
                    Throughput,
                    "B/s",
                    json!({"kernel": "rw", "pattern": pattern, "block_bytes": block,
                           "working_set_bytes": 64 * MIB, "threads": threads,
                           "store": "temporal", "isa": "avx2", "level": "DRAM"}),
                    &around(base),
                );
                r.warnings
                    .push("no DRAM peak: DIMMs unreadable; give --spec memory.dimm_mts".into());
                rs.push(r);
            }
        }
    }
    for (ws, ns, level) in [
        (16 * KIB, 1.0, "L1"),
        (256 * KIB, 3.5, "L2"),
        (4 * MIB, 12.0, "L3"),
        (64 * MIB, 85.0, "DRAM"),
        (256 * MIB, 95.0, "DRAM"),
    ] {
        rs.push(record(
            "mem.latency",
            Latency,
            "s",
            json!({"pattern": "chase", "working_set_bytes": ws, "threads": 1,
                   "pages": "4k", "chains": 1, "level": level}),
            &around(ns * 1e-9),
        ));
    }

    for (op, block, threads, depth, bps) in [
        ("read", MIB, 1, 1, 1.9e9),
        ("randread", 4 * KIB, 4, 32, 0.8e9),
    ] {
        let params = json!({"op": op, "block_bytes": block, "threads": threads,
                            "iodepth": depth, "engine": "io_uring", "direct": true,
                            "file_bytes": 1024 * MIB});
        let mut r = record(
            "disk.throughput",
            Throughput,
            "B/s",
            params.clone(),
            &around(bps),
        );
        peak(&mut r, 3.938e9, "PCIe 3.0 x4: 4 lanes x 8 GT/s x 128/130");
        rs.push(r);
        let mut l = record(
            "disk.latency",
            Latency,
            "s",
            params,
            &around(80e-6 * threads as f64),
        );
        l.stats.p99 = Some(120e-6);
        rs.push(l);
    }

    for proto in ["tcp", "udp"] {
        for block in [KIB, 32 * KIB] {
            for streams in [1, 2, 4] {
                let gbit = if proto == "tcp" { 9.0 } else { 4.0 }
                    * (block as f64 / 32768.0).sqrt()
                    * streams as f64;
                let mut r = record(
                    "net.throughput",
                    Throughput,
                    "bit/s",
                    json!({"proto": proto, "block_bytes": block, "streams": streams,
                           "direction": "send", "target": "127.0.0.1"}),
                    &around(gbit * 1e9),
                );
                if proto == "tcp" && block == 32 * KIB && streams == 1 {
                    r.reference = Some(Reference {
                        tool: "iperf3".into(),
                        version: "3.12".into(),
                        value: 9.5e9,
                        ratio: 9.0 / 9.5,
                    });
                }
                rs.push(r);
            }
        }
    }
    for (proto, us) in [("tcp", 18.0), ("udp", 15.0)] {
        rs.push(record(
            "net.latency",
            Latency,
            "s",
            json!({"proto": proto, "block_bytes": 1, "streams": 1, "target": "127.0.0.1"}),
            &around(us * 1e-6),
        ));
    }

    let mut g = record(
        "gpu.flops",
        Throughput,
        "FLOP/s",
        json!({"backend": "opencl", "device": "pocl cpu", "dtype": "f32"}),
        &around(2.1e11),
    );
    peak(&mut g, 4.0e11, "8 CUs x 1.5 GHz x 16 lanes x 2");
    rs.push(g);
    for (kind, block, v) in [
        ("h2d", MIB, 6e9),
        ("h2d", 64 * MIB, 11e9),
        ("d2h", MIB, 5e9),
    ] {
        rs.push(record(
            "gpu.transfer",
            Throughput,
            "B/s",
            json!({"backend": "opencl", "device": "pocl cpu", "kind": kind, "block_bytes": block}),
            &around(v),
        ));
    }
    rs.push(record(
        "gpu.launch",
        Latency,
        "s",
        json!({"backend": "opencl", "device": "pocl cpu", "kind": "empty"}),
        &around(7e-6),
    ));
    rs.push(record(
        "fpga.kernels",
        Throughput,
        "OP/s",
        json!({"board": "sim", "threads": 1}),
        &around(1e6),
    ));
    run.skipped.push(Skipped {
        benchmark: "cpu.flops".into(),
        params: match json!({"dtype": "f64", "isa": "avx512", "threads": 1}) {
            Value::Object(m) => m,
            _ => Map::new(),
        },
        kind: "unsupported".into(),
        reason: "avx512 not supported by this CPU".into(),
    });
    run
}

/// A run of `records` on the synthetic host (for tests of one benchmark's charts and tables).
pub fn run_of(records: Vec<Record>) -> RunResult {
    let mut run = synthetic_run();
    run.records = records;
    run.skipped.clear();
    run
}

/// A loaded-latency sweep (`mem.loaded_latency`): per traffic kind a point per delay, the
/// bandwidth falling with the delay and the latency rising towards full load.
pub fn loaded_latency(traffic: &[&str], delays: &[u64], threads: u64) -> Vec<Record> {
    let mut out = Vec::new();
    for t in traffic {
        let peak = if *t == "read" { 20e9 } else { 16e9 };
        for &d in delays {
            let bw = peak / (1.0 + d as f64 / 100.0);
            let lat = 80e-9 + 200e-9 * (bw / peak).powi(6);
            let mut r = record(
                "mem.loaded_latency",
                Metric::Latency,
                "s",
                json!({"traffic": t, "delay": d, "threads": threads,
                       "working_set_bytes": 1024 * MIB}),
                &around(lat),
            );
            r.extra.insert("bandwidth".into(), json!(bw));
            r.extra.insert("traffic_threads".into(), json!(threads - 1));
            r.extra.insert("delay_s".into(), json!(d as f64 * 0.4e-9));
            out.push(r);
        }
    }
    out
}

/// A core-to-core matrix (`mem.c2c`) of CPUs `0..cpus`, every unordered pair once per mode:
/// CPUs 2k and 2k+1 are SMT siblings, four CPUs share a last-level cache, eight a package.
pub fn c2c(cpus: u64, modes: &[&str]) -> Vec<Record> {
    let mut out = Vec::new();
    for mode in modes {
        for a in 0..cpus {
            for b in a + 1..cpus {
                let (relation, ns) = if a / 2 == b / 2 {
                    ("smt", 20.0)
                } else if a / 4 == b / 4 {
                    ("llc", 45.0)
                } else if a / 8 == b / 8 {
                    ("package", 90.0)
                } else {
                    ("socket", 130.0)
                };
                let ns = if *mode == "round_trip" { 2.0 * ns } else { ns };
                let mut r = record(
                    "mem.c2c",
                    Metric::Latency,
                    "s",
                    json!({"cpu_a": a, "cpu_b": b, "mode": mode}),
                    &around(ns * 1e-9),
                );
                r.extra.insert("relation".into(), json!(relation));
                out.push(r);
            }
        }
    }
    out
}

/// A NUMA matrix (`mem.numa`) of `nodes` nodes: bandwidth and latency from every CPU node to
/// every memory node, local faster than remote.
pub fn numa(nodes: u64) -> Vec<Record> {
    let mut out = Vec::new();
    for (metric, m, unit) in [
        ("bandwidth", Metric::Throughput, "B/s"),
        ("latency", Metric::Latency, "s"),
    ] {
        for c in 0..nodes {
            for n in 0..nodes {
                let v = match (m, c == n) {
                    (Metric::Throughput, true) => 20e9,
                    (Metric::Throughput, false) => 12e9,
                    (Metric::Latency, true) => 90e-9,
                    (Metric::Latency, false) => 140e-9,
                };
                out.push(record(
                    "mem.numa",
                    m,
                    unit,
                    json!({"cpu_node": c, "mem_node": n, "metric": metric}),
                    &around(v),
                ));
            }
        }
    }
    out
}

/// The UDP capacity the `net_under_load` records' shares are of (bit/s).
pub const NET_CAPACITY_BPS: f64 = 34.4e9;

/// Round trips under load (`net.latency` with `load_bps`), one record per load in the order
/// given: a load is a share (`"10%"`, of `NET_CAPACITY_BPS`) or a number (bit/s). The round trip
/// stays near 15 µs until the path fills, then jumps; past 85 % of the capacity the load loses
/// 6.7 % of its datagrams.
pub fn net_under_load(proto: &str, block: u64, loads: &[Value]) -> Vec<Record> {
    loads
        .iter()
        .map(|load| {
            let offered = match load {
                Value::String(s) => {
                    s.trim_end_matches('%').parse::<f64>().unwrap_or(0.0) / 100.0 * NET_CAPACITY_BPS
                }
                other => other.as_f64().unwrap_or(0.0),
            };
            let share = offered / NET_CAPACITY_BPS;
            let overloaded = share > 0.85;
            let p50 = if overloaded {
                968e-6
            } else {
                15e-6 * (1.0 + share)
            };
            let mut r = record(
                "net.latency",
                Metric::Latency,
                "s",
                json!({"proto": proto, "block_bytes": block, "streams": 1,
                       "target": "loopback", "load_bps": load}),
                &[p50],
            );
            let lost = if overloaded { 0.067 } else { 0.0 };
            let x = &mut r.extra;
            x.insert("offered_bps".into(), json!(offered));
            x.insert("sent_bps".into(), json!(offered));
            x.insert("delivered_bps".into(), json!(offered * (1.0 - lost)));
            x.insert("load_lost_fraction".into(), json!(lost));
            x.insert("p99_s".into(), json!(p50 * 2.2));
            x.insert("p50_uncorrected_s".into(), json!(p50.min(16e-6)));
            x.insert("p99_uncorrected_s".into(), json!(p50 * 2.0));
            if load.is_string() {
                x.insert("capacity_bps".into(), json!(NET_CAPACITY_BPS));
                x.insert("load_share".into(), json!(share));
            }
            r
        })
        .collect()
}

/// The idle ping-pong (`net.latency` without `load_bps`) of `proto` to the `net_under_load`
/// records' target.
pub fn net_idle_latency(proto: &str, block: u64, seconds: f64) -> Record {
    record(
        "net.latency",
        Metric::Latency,
        "s",
        json!({"proto": proto, "block_bytes": block, "streams": 1, "target": "loopback"}),
        &around(seconds),
    )
}

/// Request/response transactions (`net.transactions`): per case (proto, mode, pairs,
/// outstanding, transactions/s).
pub fn net_transactions(cases: &[(&str, &str, u64, u64, f64)]) -> Vec<Record> {
    cases
        .iter()
        .map(|&(proto, mode, pairs, outstanding, rate)| {
            let mut r = record(
                "net.transactions",
                Metric::Throughput,
                "transactions/s",
                json!({"proto": proto, "mode": mode, "pairs": pairs, "outstanding": outstanding,
                       "block_bytes": 1, "target": "loopback"}),
                &around(rate),
            );
            r.extra.insert(
                "p50_s".into(),
                json!(outstanding as f64 * pairs as f64 / rate),
            );
            r
        })
        .collect()
}

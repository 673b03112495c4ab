//! What reading a record's conditions costs on this host: the time of one sample boundary (the
//! light counters), of one record's start and end (the sysfs telemetry), and of the kernel
//! threads' scan that each of those two takes (it grows with the CPUs: a few threads per CPU),
//! for BENCHMARKS.md.
//! `cargo run --release -p hostbench-core --example conditions_cost`

use std::time::Instant;

use hostbench_core::conditions::{procfs, Probe};

fn main() {
    let probe = Probe::live();
    let n = 2000;
    let t = Instant::now();
    let mut rec = probe.begin();
    let begin = t.elapsed().as_secs_f64();
    let t = Instant::now();
    for _ in 0..n {
        rec.sample_done();
    }
    let per_sample = t.elapsed().as_secs_f64() / n as f64;
    let t = Instant::now();
    let c = rec.finish(None, None);
    let finish = t.elapsed().as_secs_f64();
    println!(
        "{} CPUs: begin {:.1} us, per sample {:.1} us, finish ({} samples) {:.1} us; unavailable: {:?}",
        c.cpus.len(),
        begin * 1e6,
        per_sample * 1e6,
        n,
        finish * 1e6,
        c.unavailable.keys().collect::<Vec<_>>()
    );
    let rounds = 50;
    let t = Instant::now();
    let mut threads = 0;
    for _ in 0..rounds {
        threads = procfs::kernel_threads(std::path::Path::new("/proc")).map_or(0, |k| k.len());
    }
    let scan = t.elapsed().as_secs_f64() / rounds as f64;
    println!(
        "kernel threads: {threads} read in {:.1} us ({:.1} us each)",
        scan * 1e6,
        scan * 1e6 / threads.max(1) as f64
    );
}

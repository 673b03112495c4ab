//! The memory subsystem for `hostbench run`: what each profile measures and how `--scale`
//! shortens it.
//!
//! `standard` (about a minute) is bandwidth of the STREAM kernels, read and write with both store
//! kinds, the cache sweep, the latency curve, a short loaded-latency curve and the core-to-core
//! matrix; `quick` trims each and leaves the last two out; `classic` is the assignment's rw matrix
//! and 1-byte latency; `full` adds every ISA, the classic blocks, memory-level parallelism, both
//! traffic kinds at every delay, every CPU pair and the NUMA matrix.

use std::time::Duration;

use hostbench_core::model::Host;
use hostbench_core::spec::Spec;
use hostbench_core::subsystem::{scaled, PeakLine, Profile, RunContext, Subsystem};
use hostbench_core::{BenchError, Phase, Runner};

use crate::c2c::{C2cConfig, PROFILE_MAX_CPUS};
use crate::latency::{LatPattern, LatencyConfig};
use crate::loaded::{LoadedConfig, Traffic, PROFILE_DELAYS};
use crate::numa::NumaConfig;
use crate::{sizing, BandwidthConfig, Block, Isa, Kernel, MemConfig, Pages, Pattern, SweepConfig};

/// Bandwidth, the cache sweep and latency.
pub struct Mem;

/// The bandwidth sweep of `quick` and `standard`: to 4 × the LLC (STREAM's DRAM rule, the size
/// of the bandwidth cases' arrays), not 8 × as `hostbench mem` and `full` go. A sequential stream
/// through 4 × the cache already finds nothing of it cached, so the points beyond only repeat the
/// DRAM plateau, and they are the sweep's costliest: at a 480 MiB LLC on two CPUs of an Emerald
/// Rapids VM, the 3 and 3.75 GiB points took 6–7 s of a 21 s sweep. On a host with a 32 MiB LLC
/// or less nothing changes (the sweep ends at 256 MiB there either way).
fn run_sweep_sizes(host: &Host) -> Vec<u64> {
    sizing::sweep_sizes_to(&host.cpu.caches, 4, 256 * sizing::MIB)
}

/// What a profile runs on `host`, before `--duration` and `--scale`.
pub fn profile_config(profile: Profile, host: &Host) -> MemConfig {
    let mut cfg = MemConfig::default();
    let mut bw = BandwidthConfig::for_host();
    let mut sweep = SweepConfig::for_host(host);
    let mut lat = LatencyConfig::for_host(host);
    // Loaded latency needs a CPU to chase on and at least one to load memory from.
    let mut loaded =
        (hostbench_core::affinity::allowed_cpus().len() >= 2).then(|| LoadedConfig::for_host(host));
    let mut c2c = Some(C2cConfig::for_host());
    let mut numa = None;
    match profile {
        // The health probe: triad on every CPU, nothing else.
        Profile::Check => {
            bw.kernels = vec![Kernel::Triad];
            bw.threads = vec![*bw.threads.last().unwrap_or(&1)];
            cfg.duration = Duration::from_millis(100);
            cfg.bandwidth = Some(bw);
            return cfg;
        }
        Profile::Quick => {
            bw.kernels = vec![Kernel::Read, Kernel::Copy, Kernel::Triad];
            bw.threads = vec![*bw.threads.last().unwrap_or(&1)];
            cfg.duration = Duration::from_millis(60);
            sweep.threads = vec![1];
            sweep.duration = Duration::from_millis(15);
            sweep.sizes = run_sweep_sizes(host);
            lat.pages = vec![Pages::Huge];
            lat.working_sets = sizing::sweep_sizes(&host.cpu.caches, 256 * sizing::MIB);
            lat.duration = Duration::from_millis(15);
            loaded = None;
            c2c = None;
        }
        Profile::Standard => {
            // About a minute: scale and add move the same streams as copy and triad.
            bw.kernels = vec![Kernel::Read, Kernel::Write, Kernel::Copy, Kernel::Triad];
            if bw.threads.len() > 2 {
                bw.threads = vec![1, *bw.threads.last().unwrap_or(&1)];
            }
            cfg.duration = Duration::from_millis(100);
            sweep.duration = Duration::from_millis(15);
            sweep.sizes = run_sweep_sizes(host);
            // Beyond 8 x LLC the curve is flat DRAM; `hostbench mem` goes on to 1 GiB and more.
            lat.working_sets = sizing::sweep_sizes(&host.cpu.caches, 256 * sizing::MIB);
            lat.duration = Duration::from_millis(20);
            // A short curve: read traffic at five delays, flat out to nearly idle.
            if let Some(l) = &mut loaded {
                l.traffic = vec![Traffic::Read];
                l.delays = PROFILE_DELAYS.to_vec();
                l.duration = Duration::from_millis(25);
            }
            c2c = c2c.map(|c| C2cConfig {
                duration: Duration::from_millis(10),
                ..c.spread(PROFILE_MAX_CPUS)
            });
        }
        Profile::Full => {
            bw.isas = Isa::detected();
            bw.patterns = vec![Pattern::Seq, Pattern::Random];
            let mut classic = BandwidthConfig::classic(bw.threads.clone());
            classic.isas = vec![Isa::best()];
            cfg.classic = Some(classic);
            sweep.kernels = vec![Kernel::Read, Kernel::Write, Kernel::Copy, Kernel::Triad];
            lat.chains = vec![1, 2, 4, 8, 16];
            lat.patterns = vec![LatPattern::Chase, LatPattern::Seq, LatPattern::Random];
            numa = Some(NumaConfig::for_host(host));
        }
        Profile::Classic => {
            let threads = vec![1, 2, 4, 8];
            let mut classic = BandwidthConfig::classic(threads.clone());
            classic.blocks = [1, sizing::KIB, sizing::MIB, 10 * sizing::MIB]
                .map(Block::Bytes)
                .to_vec();
            cfg.bandwidth = None;
            cfg.classic = Some(classic);
            cfg.sweep = None;
            cfg.latency = Some(classic_latency(host, threads));
            return cfg;
        }
    }
    cfg.bandwidth = Some(bw);
    cfg.sweep = Some(sweep);
    cfg.latency = Some(lat);
    // One CPU: no pair to bounce between (`hostbench mem --c2c` says so; a run leaves it out).
    cfg.c2c = c2c.filter(|c| c.cpus.len() >= 2);
    cfg.loaded = loaded;
    cfg.numa = numa;
    cfg
}

/// The classic 1-byte sequential and random access latency, DRAM-sized, on `threads` threads.
pub fn classic_latency(host: &Host, threads: Vec<usize>) -> LatencyConfig {
    let mut l = LatencyConfig::for_host(host);
    l.patterns = vec![LatPattern::Seq, LatPattern::Random];
    l.working_sets = vec![crate::classic_latency_bytes(host)];
    l.pages = vec![Pages::Small];
    l.threads = threads;
    l
}

/// The profile's configuration with the command line's `--duration` and the scale applied. The
/// classic profile keeps its latency sample length (only bandwidth samples take `--duration`).
fn run_config(ctx: &RunContext<'_>) -> MemConfig {
    let mut cfg = profile_config(ctx.profile, ctx.host);
    let classic = ctx.profile == Profile::Classic;
    cfg.duration = ctx.sample_length(cfg.duration);
    cfg.passes = cfg.passes.map(|p| p * ctx.scale);
    if let Some(s) = &mut cfg.sweep {
        s.duration = ctx.sample_length(s.duration);
    }
    if let Some(l) = &mut cfg.latency {
        l.duration = if classic {
            scaled(l.duration, ctx.scale)
        } else {
            ctx.sample_length(l.duration)
        };
    }
    if let Some(l) = &mut cfg.loaded {
        l.duration = ctx.sample_length(l.duration);
    }
    if let Some(c) = &mut cfg.c2c {
        c.duration = ctx.sample_length(c.duration);
    }
    if let Some(n) = &mut cfg.numa {
        n.duration = ctx.sample_length(n.duration);
    }
    cfg.reference = ctx.reference;
    cfg
}

impl Subsystem for Mem {
    fn name(&self) -> &'static str {
        "mem"
    }

    fn summary(&self) -> &'static str {
        "bandwidth (STREAM kernels, rw, cache sweep), pointer-chase, loaded and core-to-core latency against the DIMMs"
    }

    fn estimate(&self, ctx: &RunContext<'_>) -> Phase {
        let cfg = run_config(ctx);
        let bw: usize = cfg
            .bandwidth
            .iter()
            .chain(cfg.classic.iter())
            .map(|b| b.points(ctx.host).len())
            .sum();
        let sweep = cfg.sweep.as_ref().map_or(0, |s| s.points().len());
        let lat = cfg.latency.as_ref().map_or(0, LatencyConfig::case_count);
        let loaded = cfg.loaded.as_ref().map_or(0, LoadedConfig::case_count);
        let c2c = cfg.c2c.as_ref().map_or(0, C2cConfig::case_count);
        let topology = hostbench_core::host::numa_topology();
        let numa = cfg.numa.as_ref().map_or(0, |n| n.case_count(&topology));
        let secs = bw as f64 * cfg.duration.as_secs_f64()
            + sweep as f64 * cfg.sweep.as_ref().map_or(0.0, |s| s.duration.as_secs_f64())
            + lat as f64
                * cfg
                    .latency
                    .as_ref()
                    .map_or(0.0, |l| l.duration.as_secs_f64())
            + loaded as f64
                * cfg
                    .loaded
                    .as_ref()
                    .map_or(0.0, |l| l.duration.as_secs_f64())
            + c2c as f64 * cfg.c2c.as_ref().map_or(0.0, |c| c.duration.as_secs_f64())
            + numa as f64 * cfg.numa.as_ref().map_or(0.0, |n| n.duration.as_secs_f64());
        let cases = bw + sweep + lat + loaded + c2c + numa;
        Phase::new(self.name(), cases, secs / cases.max(1) as f64)
    }

    fn run(&self, runner: &mut Runner, ctx: &RunContext<'_>) -> Result<(), BenchError> {
        crate::run_mem(runner, &run_config(ctx), ctx.host, ctx.spec)
    }

    fn peaks(&self, _host: &Host, spec: &Spec) -> Vec<PeakLine> {
        let (peak, note) = match crate::peak::dram_peak(spec) {
            Some(p) => (Some(p), String::new()),
            None => (None, crate::peak::no_peak_reason()),
        };
        vec![PeakLine {
            subsystem: self.name().into(),
            what: "DRAM bandwidth".into(),
            unit: "B/s".into(),
            peak,
            note,
        }]
    }

    fn reference_tools(&self) -> &'static [hostbench_core::subsystem::ReferenceTool] {
        &[hostbench_core::subsystem::ReferenceTool {
            name: "likwid-bench",
            package: "likwid",
            serves: "mem.bandwidth read/write/copy/triad (load, store, copy, stream kernels; _mem for non-temporal stores)",
            in_run: "the DRAM triad of the fastest store kind",
            also: "scripts/bench/mem-vs-reference for interleaved rounds",
        }]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classic_profile_is_the_assignments_matrix() {
        // rw seq/random x 1 B, 1 KB, 1 MB, 10 MB x 1, 2, 4, 8 threads, plus 1-byte latency.
        let host = hostbench_core::host::inventory();
        let mem = profile_config(Profile::Classic, &host);
        let rw = mem.classic.expect("classic matrix");
        assert_eq!(rw.kernels, [Kernel::Rw]);
        assert_eq!(rw.patterns, [Pattern::Seq, Pattern::Random]);
        let mib = 1 << 20;
        assert_eq!(rw.blocks, [1, 1024, mib, 10 * mib].map(Block::Bytes));
        assert_eq!(rw.threads, [1, 2, 4, 8]);
        assert_eq!(mem.latency.expect("latency").threads, [1, 2, 4, 8]);
        assert!(mem.bandwidth.is_none() && mem.sweep.is_none());
    }
}

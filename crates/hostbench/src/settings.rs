//! Resolve clap arguments into the plain config structs the library crates take.
//!
//! This is the only place that parses user text; every failure is a `BenchError::InvalidInput`
//! naming the flag and the value, which `main` turns into a one-line message and exit code 2.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Duration;

use hostbench_core::isa::{parse_choice, resolve as resolve_isas};
use hostbench_core::model::Invocation;
use hostbench_core::spec::Spec;
use hostbench_core::units::{parse_count, parse_duration, parse_list, parse_positive, parse_size};
use hostbench_core::{BenchError, RunnerConfig};
use hostbench_cpu::{CpuConfig, Dtype, Isa, Scaling};

use crate::cli::{
    CommonArgs, CpuArgs, DirectArg, DiskArgs, GpuArgs, LinpackArgs, MemArgs, ScalingArg,
};

/// Where the JSON result goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JsonTarget {
    Stdout,
    File(PathBuf),
}

/// Options shared by every measuring command, resolved.
#[derive(Debug, Clone)]
pub struct Common {
    pub runner: RunnerConfig,
    pub duration: Option<Duration>,
    pub json: Option<JsonTarget>,
    /// `--openmetrics FILE`, whose directory was checked before measuring.
    pub openmetrics: Option<PathBuf>,
    pub quiet: bool,
    pub spec: Spec,
}

impl Common {
    /// `--duration`, when given, replaces a section's own sample length.
    pub fn apply_duration(&self, sample: &mut Duration) {
        if let Some(d) = self.duration {
            *sample = d;
        }
    }
}

fn flag<T>(name: &str, r: Result<T, BenchError>) -> Result<T, BenchError> {
    r.map_err(|e| BenchError::invalid(format!("--{name}: {e}")))
}

pub fn common(args: &CommonArgs) -> Result<Common, BenchError> {
    let repeat = flag("repeat", parse_positive(&args.repeat, "repetitions"))?;
    let warmup = flag(
        "warmup",
        args.warmup
            .trim()
            .parse::<usize>()
            .map_err(|_| BenchError::invalid(format!("invalid warm-up count '{}'", args.warmup))),
    )?;
    let duration = args
        .duration
        .as_deref()
        .map(|d| flag("duration", parse_duration(d)))
        .transpose()?;
    let budget = args
        .budget
        .as_deref()
        .map(|d| flag("budget", parse_duration(d)))
        .transpose()?;
    let json = match args.json.as_deref() {
        None => None,
        Some("-") => Some(JsonTarget::Stdout),
        Some("") => return Err(BenchError::invalid("--json: empty file name")),
        Some(path) => Some(JsonTarget::File(PathBuf::from(path))),
    };
    let spec = match &args.spec {
        Some(path) => Spec::load(path)?,
        None => Spec::default(),
    };
    // Refuse an unwritable place before minutes of measuring, not after.
    if let Some(path) = &args.openmetrics {
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => std::path::Path::new("."),
        };
        if path.as_os_str().is_empty() || !dir.is_dir() {
            return Err(BenchError::invalid(format!(
                "--openmetrics {}: no such directory",
                path.display()
            )));
        }
    }
    let partial_path = match &json {
        Some(JsonTarget::File(p)) => Some(p.clone()),
        _ => None,
    };
    Ok(Common {
        runner: RunnerConfig {
            repeat,
            warmup,
            budget,
            progress: !args.quiet && std::io::stderr().is_terminal(),
            partial_path,
            invocation: Some(Invocation {
                command_line: std::env::args().collect(),
                ..Invocation::default()
            }),
        },
        duration,
        json,
        openmetrics: args.openmetrics.clone(),
        quiet: args.quiet,
        spec,
    })
}

pub fn threads_list(text: &str) -> Result<Vec<usize>, BenchError> {
    flag(
        "threads",
        parse_list(text, "threads", |s| parse_positive(s, "thread count")),
    )
}

pub fn cpu(args: &CpuArgs, common: &Common) -> Result<CpuConfig, BenchError> {
    let mut cfg = CpuConfig::default();
    if let Some(d) = &args.dtype {
        cfg.dtypes = flag("dtype", parse_list(d, "dtype", Dtype::parse))?;
    }
    cfg.isas = flag("isa", parse_choice(&args.isa, Isa::parse))?;
    if let Some(t) = &args.threads {
        cfg.threads = threads_list(t)?;
    }
    cfg.scaling = match args.scaling {
        ScalingArg::Strong => Scaling::Strong,
        ScalingArg::Weak => Scaling::Weak,
    };
    if let Some(o) = &args.ops {
        cfg.ops = Some(flag("ops", parse_count(o))?);
    }
    common.apply_duration(&mut cfg.duration);
    cfg.reference = reference_scope(args.reference);
    flag("isa", cfg.resolve_isas())?;
    cfg.validate()?;
    Ok(cfg)
}

/// Linpack settings: how the matrix order is chosen and the thread count.
#[derive(Debug, Clone)]
pub struct Linpack {
    pub size: hostbench_cpu::LinpackSize,
    pub threads: usize,
}

pub fn linpack(args: &LinpackArgs) -> Result<Linpack, BenchError> {
    use hostbench_cpu::linpack::Sizing;
    use hostbench_cpu::LinpackSize;
    let n = args
        .n
        .as_deref()
        .map(|n| flag("n", parse_positive(n, "matrix order")))
        .transpose()?;
    let share = args.mem_share.as_deref().map(mem_share).transpose()?;
    let size = match (n, share) {
        (Some(n), _) => LinpackSize::Fixed(n),
        (None, Some(f)) => LinpackSize::Sized(Sizing::MemoryShare(f)),
        (None, None) => LinpackSize::Sized(Sizing::Seconds(
            hostbench_cpu::subsystem::LINPACK_SOLVE_SECONDS,
        )),
    };
    let threads = match &args.threads {
        Some(t) => flag("threads", parse_positive(t, "thread count"))?,
        None => hostbench_core::affinity::allowed_cpus().len().max(1),
    };
    // The upper bound is `run_linpack`'s to enforce, once, for every caller.
    Ok(Linpack { size, threads })
}

fn sizes_list(flag_name: &str, text: &str) -> Result<Vec<u64>, BenchError> {
    flag(
        flag_name,
        parse_list(text, "size", |s| match parse_size(s)? {
            0 => Err(BenchError::invalid(format!(
                "size must be at least 1 byte, got '{s}'"
            ))),
            v => Ok(v),
        }),
    )
}

/// `hostbench mem`: which sections run, and each section's lists.
pub fn mem(args: &MemArgs, common: &Common) -> Result<hostbench_mem::MemConfig, BenchError> {
    use hostbench_mem::{
        BandwidthConfig, Block, Isa as MemIsa, Kernel, Pages, Pattern, Store, SweepConfig,
    };
    let host_caches = hostbench_core::host::inventory();
    let extra_flags = args.delays.is_some() || args.traffic.is_some();
    let want_loaded = args.loaded_latency || extra_flags;
    let want_c2c = args.c2c || args.c2c_cpus.is_some();
    let want_numa = args.numa || args.numa_nodes.is_some();
    let any_section = args.bandwidth
        || args.sweep
        || args.latency
        || args.classic
        || want_loaded
        || want_c2c
        || want_numa;
    // `--size` is the working set of whichever section was named (`--latency --size 1GiB` is
    // one latency point of 1 GiB); with no section named it means the bandwidth arrays, as
    // before. Either way it never adds a section the user did not ask for.
    let bw_flags = args.kernel.is_some()
        || args.pattern.is_some()
        || args.block.is_some()
        || args.store.is_some()
        || (args.size.is_some() && !any_section)
        || args.passes.is_some();
    let sweep_flags = args.sweep_sizes.is_some();
    let lat_flags = args.lat_sizes.is_some() || args.lat_pattern.is_some() || args.chains.is_some();
    let implied = bw_flags || sweep_flags || lat_flags;
    let (want_bw, want_sweep, want_lat) = if any_section || implied {
        (
            args.bandwidth || bw_flags,
            args.sweep || sweep_flags,
            args.latency || lat_flags,
        )
    } else {
        (true, true, true)
    };

    let threads = args.threads.as_deref().map(threads_list).transpose()?;
    if let Some(t) = &threads {
        if let Some(&bad) = t.iter().find(|&&t| t > hostbench_mem::MAX_THREADS) {
            return Err(BenchError::invalid(format!(
                "--threads: at most {} threads, got {bad}",
                hostbench_mem::MAX_THREADS
            )));
        }
    }
    let isas = flag(
        "isa",
        parse_choice(&args.isa, MemIsa::parse).and_then(|c| resolve_isas(&c, &MemIsa::detected())),
    )?;
    let pages = args
        .pages
        .as_deref()
        .map(|p| flag("pages", parse_list(p, "pages", Pages::parse)))
        .transpose()?;

    let mut cfg = hostbench_mem::MemConfig {
        reference: reference_scope(args.reference),
        ..Default::default()
    };
    common.apply_duration(&mut cfg.duration);
    if let Some(p) = pages.as_ref().and_then(|p| p.first()) {
        cfg.pages = *p;
    }
    if let Some(p) = &args.passes {
        cfg.passes = Some(flag("passes", parse_count(p))?);
    }
    let mut bw: Option<BandwidthConfig> = None;
    if want_bw {
        let mut b = BandwidthConfig::for_host();
        if let Some(k) = &args.kernel {
            b.kernels = flag("kernel", parse_list(k, "kernel", Kernel::parse))?;
        }
        if let Some(p) = &args.pattern {
            b.patterns = flag("pattern", parse_list(p, "pattern", Pattern::parse))?;
        }
        if let Some(bl) = &args.block {
            b.blocks = flag(
                "block",
                parse_list(bl, "block", |s| {
                    if s.eq_ignore_ascii_case("whole") {
                        return Ok(Block::Whole);
                    }
                    match parse_size(s)? {
                        0 => Err(BenchError::invalid(format!(
                            "block size must be at least 1 byte, got '{s}'"
                        ))),
                        v => Ok(Block::Bytes(v)),
                    }
                }),
            )?;
        }
        if let Some(st) = &args.store {
            b.stores = flag("store", parse_list(st, "store", Store::parse))?;
        }
        if let Some(s) = &args.size {
            b.size = Some(flag("size", parse_size(s))?);
            if b.size == Some(0) {
                return Err(BenchError::invalid("--size: must be at least 1 byte"));
            }
        }
        if let Some(t) = &threads {
            b.threads = t.clone();
        }
        b.isas = isas.clone();
        bw = Some(b);
    }
    if args.classic {
        let mut c = BandwidthConfig::classic(
            threads
                .clone()
                .unwrap_or_else(hostbench_mem::default_threads),
        );
        c.isas = isas.clone();
        if let Some(s) = &args.size {
            c.size = Some(flag("size", parse_size(s))?);
        }
        cfg.classic = Some(c);
    }
    cfg.bandwidth = bw;
    if want_sweep {
        let mut s = SweepConfig::for_host(&host_caches);
        if let Some(list) = &args.sweep_sizes {
            s.sizes = sizes_list("sweep-sizes", list)?;
        }
        if let Some(t) = &threads {
            s.threads = t.clone();
        }
        s.isa = isas[0];
        cfg.sweep = Some(s);
    }
    if want_lat || args.classic {
        use hostbench_mem::latency::{LatPattern, LatencyConfig};
        let mut l = if args.classic && !want_lat {
            hostbench_mem::subsystem::classic_latency(
                &host_caches,
                threads
                    .clone()
                    .unwrap_or_else(hostbench_mem::default_threads),
            )
        } else {
            LatencyConfig::for_host(&host_caches)
        };
        if let Some(p) = &args.lat_pattern {
            l.patterns = flag(
                "lat-pattern",
                parse_list(p, "latency pattern", LatPattern::parse),
            )?;
        }
        if let Some(list) = &args.lat_sizes {
            l.working_sets = sizes_list("lat-sizes", list)?;
        } else if let (true, Some(size)) = (want_lat, &args.size) {
            l.working_sets = sizes_list("size", size)?;
        }
        if let Some(p) = pages {
            l.pages = p;
        }
        if let Some(c) = &args.chains {
            l.chains = flag(
                "chains",
                parse_list(c, "chains", |s| parse_positive(s, "chain count")),
            )?;
        }
        if want_lat {
            if let Some(t) = &threads {
                l.threads = t.clone();
            }
        }
        common.apply_duration(&mut l.duration);
        l.validate()?;
        cfg.latency = Some(l);
    }
    if want_loaded {
        use hostbench_mem::loaded::{LoadedConfig, Traffic};
        let mut l = LoadedConfig::for_host(&host_caches);
        if let Some(d) = &args.delays {
            if d.trim().is_empty() {
                return Err(BenchError::invalid(
                    "--delays: empty delay list (give at least one, e.g. 0,100,1000)",
                ));
            }
            l.delays = flag("delays", parse_list(d, "delay", parse_delay))?;
        }
        if let Some(t) = &args.traffic {
            l.traffic = flag("traffic", parse_list(t, "traffic", Traffic::parse))?;
        }
        if let Some(t) = &threads {
            l.threads = t.clone();
        }
        if let (Some(size), false) = (&args.size, want_lat) {
            l.working_set = flag("size", parse_size(size))?;
        }
        common.apply_duration(&mut l.duration);
        // A one-CPU host is recorded as skipped by the run, not refused here.
        if let Err(e @ BenchError::InvalidInput(_)) = l.validate(&host_caches) {
            return Err(e);
        }
        cfg.loaded = Some(l);
    }
    if want_c2c {
        use hostbench_mem::c2c::C2cConfig;
        let mut c = C2cConfig::for_host();
        if let Some(list) = &args.c2c_cpus {
            c.cpus = flag("c2c-cpus", hostbench_core::host::parse_cpu_list(list))?;
            if c.cpus.is_empty() {
                return Err(BenchError::invalid("--c2c-cpus: empty CPU list"));
            }
        }
        common.apply_duration(&mut c.duration);
        if let Err(e @ BenchError::InvalidInput(_)) = c.validate() {
            return Err(BenchError::invalid(format!("--c2c-cpus: {e}")));
        }
        cfg.c2c = Some(c);
    }
    if want_numa {
        use hostbench_mem::numa::NumaConfig;
        let mut n = NumaConfig::for_host(&host_caches);
        if let Some(list) = &args.numa_nodes {
            n.nodes = Some(flag(
                "numa-nodes",
                parse_list(list, "NUMA node", |s| {
                    s.trim().parse::<usize>().map_err(|_| {
                        BenchError::invalid(format!("invalid NUMA node '{s}' (expected 0, 1, …)"))
                    })
                }),
            )?);
        }
        common.apply_duration(&mut n.duration);
        flag(
            "numa-nodes",
            n.cells(&hostbench_core::host::numa_topology()),
        )?;
        cfg.numa = Some(n);
    }
    Ok(cfg)
}

/// A loaded-latency delay: a whole number of spin iterations, 0 or more.
fn parse_delay(s: &str) -> Result<u64, BenchError> {
    let v: u64 = s.trim().replace('_', "").parse().map_err(|_| {
        BenchError::invalid(format!(
            "invalid delay '{s}' (expected a whole number of spin iterations, 0 or more)"
        ))
    })?;
    if v > hostbench_mem::loaded::MAX_DELAY {
        return Err(BenchError::invalid(format!(
            "delay {v} is beyond {} spin iterations per line (no load at all)",
            hostbench_mem::loaded::MAX_DELAY
        )));
    }
    Ok(v)
}

/// `hostbench disk`: the cases and how they run.
pub fn disk(args: &DiskArgs, common: &Common) -> Result<hostbench_disk::DiskConfig, BenchError> {
    use hostbench_disk::{cases_from, DirectChoice, DiskConfig, EngineChoice, EngineKind, Op};
    let mut cfg = DiskConfig {
        dir: args.dir.clone(),
        reference: reference_scope(args.reference),
        ..DiskConfig::default()
    };
    let positive_sizes = |name: &str, text: &str| sizes_list(name, text);
    let ops = args
        .op
        .as_deref()
        .map(|o| flag("op", parse_list(o, "op", Op::parse)))
        .transpose()?;
    let blocks = args
        .block
        .as_deref()
        .map(|b| positive_sizes("block", b))
        .transpose()?;
    let threads = args.threads.as_deref().map(threads_list).transpose()?;
    let iodepths = args
        .iodepth
        .as_deref()
        .map(|q| {
            flag(
                "iodepth",
                parse_list(q, "iodepth", |s| parse_positive(s, "queue depth")),
            )
        })
        .transpose()?;
    if args.classic {
        let t = threads
            .clone()
            .unwrap_or_else(|| hostbench_disk::subsystem::CLASSIC_THREADS.to_vec());
        cfg.cases = hostbench_disk::classic_cases(&t);
    } else if ops.is_some() || blocks.is_some() || threads.is_some() || iodepths.is_some() {
        let default_ops = [Op::Read, Op::Write, Op::RandRead, Op::RandWrite];
        cfg.cases = cases_from(
            ops.as_deref().unwrap_or(&default_ops),
            blocks.as_deref(),
            threads.as_deref().unwrap_or(&[1]),
            iodepths.as_deref().unwrap_or(&[1]),
        );
    }
    cfg.engines = match args.engine.trim() {
        "auto" => EngineChoice::Auto,
        list => EngineChoice::List(flag(
            "engine",
            parse_list(list, "engine", EngineKind::parse),
        )?),
    };
    cfg.direct = match args.direct {
        DirectArg::Auto => DirectChoice::Auto,
        DirectArg::On => DirectChoice::On,
        DirectArg::Off => DirectChoice::Off,
    };
    if let Some(s) = &args.size {
        cfg.file_bytes = Some(positive_sizes("size", s)?[0]);
    }
    if let Some(s) = &args.io_size {
        cfg.io_bytes = Some(positive_sizes("io-size", s)?[0]);
    }
    if let Some(r) = &args.ramp {
        cfg.ramp = flag("ramp", parse_duration(r))?;
    }
    cfg.rwmix_read = flag(
        "rwmix",
        args.rwmix
            .trim()
            .parse::<u32>()
            .ok()
            .filter(|&p| p <= 100)
            .ok_or_else(|| {
                BenchError::invalid(format!(
                    "invalid read percentage '{}' (expected 0 to 100)",
                    args.rwmix
                ))
            }),
    )?;
    cfg.sync_writes = args.sync;
    cfg.verify = args.verify;
    cfg.pages = flag("pages", hostbench_core::buffer::Pages::parse(&args.pages))?;
    if let Some(i) = &args.interval {
        cfg.interval = Some(flag("interval", parse_duration(i))?);
    }
    common.apply_duration(&mut cfg.duration);
    cfg.validate()?;
    Ok(cfg)
}

/// `hostbench net server`: the listening address, token and admission limit.
pub fn net_server(
    args: &crate::cli::NetServerArgs,
) -> Result<hostbench_net::ServerConfig, BenchError> {
    let port = port_arg(&args.port)?;
    let ip: std::net::IpAddr = args
        .bind
        .trim()
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse()
        .map_err(|_| {
            BenchError::invalid(format!(
                "--bind '{}': not an IP address (e.g. 0.0.0.0, ::, 192.0.2.1)",
                args.bind
            ))
        })?;
    let mut cfg = hostbench_net::ServerConfig::new(std::net::SocketAddr::new(ip, port));
    cfg.token = args
        .token_file
        .as_deref()
        .map(hostbench_net::Token::from_file)
        .transpose()?;
    cfg.max_sessions = flag(
        "max-sessions",
        parse_positive(&args.max_sessions, "session count"),
    )?;
    cfg.once = args.once;
    cfg.log = !args.quiet;
    cfg.order = hostbench_core::affinity::placement_order();
    Ok(cfg)
}

fn port_arg(text: &str) -> Result<u16, BenchError> {
    text.trim()
        .parse::<u16>()
        .map_err(|_| BenchError::invalid(format!("--port '{text}': expected 0 to 65535")))
}

/// `hostbench net client`: the server's address and token, then the test lists.
pub fn net_client(
    args: &crate::cli::NetClientArgs,
    common: &Common,
) -> Result<hostbench_net::NetConfig, BenchError> {
    let (host, port) = flag(
        "host",
        hostbench_net::split_host_port(&args.host, port_arg(&args.port)?),
    )?;
    let target = hostbench_net::Target::Remote { host, port };
    let reference_port = args
        .reference_port
        .as_deref()
        .map(|p| {
            p.trim()
                .parse::<u16>()
                .ok()
                .filter(|&p| p > 0)
                .ok_or_else(|| {
                    BenchError::invalid(format!("--reference-port '{p}': expected 1 to 65535"))
                })
        })
        .transpose()?;
    let mut cfg = net_tests(&args.test, common, target, reference_port)?;
    cfg.connect_timeout = flag("connect-timeout", parse_duration(&args.connect_timeout))?;
    cfg.token = args
        .token_file
        .as_deref()
        .map(hostbench_net::Token::from_file)
        .transpose()?;
    Ok(cfg)
}

/// `hostbench net loopback`.
pub fn net_loopback(
    args: &crate::cli::NetLoopbackArgs,
    common: &Common,
) -> Result<hostbench_net::NetConfig, BenchError> {
    net_tests(
        &args.test,
        common,
        hostbench_net::Target::Loopback { v6: args.ipv6 },
        None,
    )
}

/// The test lists of a client or loopback run; `reference_port` (a client's remote iperf3 and
/// sockperf servers) turns the reference on for every case.
fn net_tests(
    args: &crate::cli::NetTestArgs,
    common: &Common,
    target: hostbench_net::Target,
    reference_port: Option<u16>,
) -> Result<hostbench_net::NetConfig, BenchError> {
    use hostbench_net::{Direction, NetConfig, Proto, UdpRate};
    let mut cfg = if args.classic {
        NetConfig::classic(target)
    } else {
        NetConfig {
            target,
            ..NetConfig::default()
        }
    };
    if let Some(p) = &args.proto {
        cfg.protos = flag("proto", parse_list(p, "protocol", Proto::parse))?;
        // Under load too (its default is UDP alone, sockperf's default).
        cfg.loaded_protos = cfg.protos.clone();
    }
    if let Some(d) = &args.direction {
        cfg.directions = flag("direction", parse_list(d, "direction", Direction::parse))?;
    }
    if let Some(b) = &args.block {
        let blocks = sizes_list("block", b)?;
        cfg.tcp_blocks = blocks.clone();
        cfg.udp_blocks = Some(blocks);
    }
    let counts = |name: &str, text: &str, what: &str| -> Result<Vec<u32>, BenchError> {
        let v = flag(name, parse_list(text, what, |s| parse_positive(s, what)))?;
        Ok(v.into_iter()
            .map(|x| x.min(u32::MAX as usize) as u32)
            .collect())
    };
    if let Some(s) = &args.streams {
        cfg.streams = counts("streams", s, "stream count")?;
    }
    if let Some(p) = &args.pairs {
        cfg.pairs = counts("pairs", p, "pair count")?;
    }
    if let Some(r) = &args.rate {
        let t = r.trim().trim_end_matches("bit/s").trim_end_matches("bps");
        cfg.udp_rate = if t == "0" {
            UdpRate::Unpaced
        } else if t.eq_ignore_ascii_case("search") {
            UdpRate::Search {
                max_loss: hostbench_net::DEFAULT_MAX_LOSS,
            }
        } else {
            UdpRate::PerStream(flag("rate", parse_count(t))?)
        };
    }
    if let Some(m) = &args.max_loss {
        let max_loss = percent("max-loss", m)?;
        match cfg.udp_rate {
            UdpRate::Search { .. } => cfg.udp_rate = UdpRate::Search { max_loss },
            _ => {
                return Err(BenchError::invalid(format!(
                    "--max-loss {m}: applies to the UDP capacity search (--rate search), not \
                     to a fixed or unpaced rate"
                )))
            }
        }
    }
    if let Some(b) = &args.bytes {
        cfg.bytes = Some(sizes_list("bytes", b)?[0]);
    }
    if let Some(m) = &args.msg_size {
        cfg.msg_sizes = sizes_list("msg-size", m)?;
    }
    if let Some(c) = &args.count {
        cfg.count = Some(flag("count", parse_count(c))? as u64);
    }
    if let Some(b) = &args.sockbuf {
        let v = sizes_list("sockbuf", b)?[0];
        cfg.sockbuf = Some(v.min(u64::from(u32::MAX)) as u32);
    }
    if let Some(l) = &args.load {
        cfg.loads = flag("load", parse_list(l, "load", parse_load))?;
    }
    if let Some(r) = &args.reply_every {
        cfg.reply_every = Some(flag("reply-every", parse_count(r))?.min(u32::MAX as f64) as u32);
    }
    if let Some(m) = &args.tx_mode {
        cfg.tx_modes = flag(
            "tx-mode",
            parse_list(m, "transaction mode", hostbench_net::TxMode::parse),
        )?;
    }
    if let Some(o) = &args.outstanding {
        cfg.outstanding = counts("outstanding", o, "outstanding count")?;
    }
    // A flag that belongs to one section selects it, as --throughput and --latency do; with no
    // section named, every section runs.
    let loaded = args.loaded || args.load.is_some() || args.reply_every.is_some();
    let transactions = args.transactions || args.tx_mode.is_some() || args.outstanding.is_some();
    if args.throughput || args.latency || loaded || transactions {
        cfg.throughput = args.throughput;
        cfg.latency = args.latency;
        cfg.loaded = loaded;
        cfg.transactions = transactions;
    }
    cfg.pin = !args.no_pin;
    cfg.reference = reference_scope(args.reference || reference_port.is_some());
    cfg.reference_port = reference_port;
    common.apply_duration(&mut cfg.duration);
    cfg.validate()?;
    Ok(cfg)
}

/// One `--load` entry: a share of the path's capacity ("50%") or a rate in bit/s ("1G").
fn parse_load(text: &str) -> Result<hostbench_net::Load, BenchError> {
    let t = text.trim();
    if let Some(p) = t.strip_suffix('%') {
        return match p.trim().parse::<f64>() {
            Ok(v) if v.is_finite() => Ok(hostbench_net::Load::Share(v / 100.0)),
            _ => Err(BenchError::invalid(format!(
                "invalid share '{t}' (expected e.g. 50%)"
            ))),
        };
    }
    let rate = t.trim_end_matches("bit/s").trim_end_matches("bps");
    Ok(hostbench_net::Load::Bps(parse_count(rate)?))
}

/// The run profile, as the subsystems know it.
pub fn profile(p: crate::cli::ProfileArg) -> hostbench_core::subsystem::Profile {
    use crate::cli::ProfileArg as A;
    use hostbench_core::subsystem::Profile as P;
    match p {
        A::Quick => P::Quick,
        A::Standard => P::Standard,
        A::Full => P::Full,
        A::Classic => P::Classic,
    }
}

/// `--scale F`: a factor in (0, 100] applied to every workload of `run`.
pub fn scale(text: &str) -> Result<f64, BenchError> {
    match text.trim().parse::<f64>() {
        Ok(f) if f.is_finite() && f > 0.0 && f <= 100.0 => Ok(f),
        _ => Err(BenchError::invalid(format!(
            "--scale: invalid factor '{text}' (expected a number above 0 and at most 100, e.g. 0.1)"
        ))),
    }
}

/// `--price-per-hour USD`: a positive number of US dollars per hour.
pub fn price_per_hour(text: &str) -> Result<f64, BenchError> {
    match text.trim().parse::<f64>() {
        Ok(f) if f.is_finite() && f > 0.0 => Ok(f),
        _ => Err(BenchError::invalid(format!(
            "--price-per-hour: invalid price '{text}' (expected a positive number of USD per hour, e.g. 2.5)"
        ))),
    }
}

/// `--mem-share F`: the share of the available memory linpack's matrix may fill, in (0, 0.9]
/// (above 0.9 the OS and the page cache are squeezed and the solve swaps or is killed).
pub fn mem_share(text: &str) -> Result<f64, BenchError> {
    match text.trim().parse::<f64>() {
        Ok(f) if f.is_finite() && f > 0.0 && f <= 0.9 => Ok(f),
        _ => Err(BenchError::invalid(format!(
            "--mem-share: invalid share '{text}' (expected a number above 0 and at most 0.9, e.g. 0.5)"
        ))),
    }
}

/// A percentage such as `5` or `5%`, as a fraction.
pub fn percent(name: &str, text: &str) -> Result<f64, BenchError> {
    let t = text.trim().trim_end_matches('%').trim();
    match t.parse::<f64>() {
        Ok(p) if p.is_finite() && (0.0..=1000.0).contains(&p) => Ok(p / 100.0),
        _ => Err(BenchError::invalid(format!(
            "--{name}: invalid percentage '{text}' (expected e.g. 5 or 5%)"
        ))),
    }
}

/// An output file of `report`, or `-` for stdout.
pub fn out_target(name: &str, text: &str) -> Result<JsonTarget, BenchError> {
    match text {
        "-" => Ok(JsonTarget::Stdout),
        "" => Err(BenchError::invalid(format!("--{name}: empty file name"))),
        path => Ok(JsonTarget::File(PathBuf::from(path))),
    }
}

/// The history database: `--db`, else `$HOSTBENCH_DB`, else the user's data directory.
pub fn db_path(args: &crate::cli::HistoryDbArgs) -> Result<PathBuf, hostbench_report::ReportError> {
    match &args.db {
        Some(p) if p.as_os_str().is_empty() => {
            Err(hostbench_report::ReportError::bad("--db: empty file name"))
        }
        Some(p) => Ok(p.clone()),
        None => hostbench_report::history::default_path(),
    }
}
/// `hostbench gpu`: backends, devices and the sections with their lists.
pub fn gpu(args: &GpuArgs, common: &Common) -> Result<hostbench_gpu::GpuConfig, BenchError> {
    use hostbench_gpu::{Backend, Direction, Dtype, GpuConfig, HostMemory, MemKernel};
    let mut cfg = GpuConfig {
        backends: flag(
            "backend",
            parse_list(&args.backend, "backend", Backend::parse),
        )?,
        reference: reference_scope(args.reference),
        ..GpuConfig::default()
    };
    if let Some(d) = &args.device {
        cfg.devices = Some(flag(
            "device",
            parse_list(d, "device", |s| {
                s.trim().parse::<usize>().map_err(|_| {
                    BenchError::invalid(format!(
                        "invalid device number '{s}' (expected 0, 1, ... as --list shows)"
                    ))
                })
            }),
        )?);
    }
    let compute_flags = args.dtype.is_some() || args.vector_width.is_some();
    let memory_flags = args.kernel.is_some() || args.block.is_some();
    let transfer_flags =
        args.direction.is_some() || args.host_memory.is_some() || args.transfer_block.is_some();
    let tensor_flags = args.tensor_dtype.is_some();
    let explicit = args.compute || args.memory || args.transfer || args.launch || args.tensor;
    let any = explicit || compute_flags || memory_flags || transfer_flags || tensor_flags;
    let want = |section: bool, flags: bool| !any || section || flags;
    if let Some(c) = cfg.compute.as_mut() {
        if let Some(d) = &args.dtype {
            c.dtypes = flag("dtype", parse_list(d, "dtype", Dtype::parse))?;
            c.explicit = true;
        }
        if let Some(w) = &args.vector_width {
            c.widths = flag(
                "vector-width",
                parse_list(w, "vector width", |s| {
                    s.trim()
                        .parse::<u32>()
                        .ok()
                        .filter(|w| hostbench_gpu::VECTOR_WIDTHS.contains(w))
                        .ok_or_else(|| {
                            BenchError::invalid(format!(
                                "invalid vector width '{s}' (expected 1, 2, 4, 8 or 16)"
                            ))
                        })
                }),
            )?;
        }
    }
    if let Some(m) = cfg.memory.as_mut() {
        if let Some(k) = &args.kernel {
            m.kernels = flag("kernel", parse_list(k, "kernel", MemKernel::parse))?;
        }
        if let Some(b) = &args.block {
            m.blocks = sizes_list("block", b)?;
        }
    }
    if let Some(t) = cfg.transfer.as_mut() {
        if let Some(d) = &args.direction {
            t.directions = flag("direction", parse_list(d, "direction", Direction::parse))?;
        }
        if let Some(h) = &args.host_memory {
            t.host = flag(
                "host-memory",
                parse_list(h, "host memory", HostMemory::parse),
            )?;
        }
        if let Some(b) = &args.transfer_block {
            t.blocks = sizes_list("transfer-block", b)?;
        }
    }
    if let Some(t) = cfg.tensor.as_mut() {
        if let Some(d) = &args.tensor_dtype {
            t.types = flag(
                "tensor-dtype",
                parse_list(d, "tensor precision", hostbench_gpu::TensorType::parse),
            )?;
        }
        t.explicit = args.tensor || tensor_flags;
    }
    if (args.tensor || tensor_flags) && !cfg.backends.contains(&Backend::Cuda) {
        return Err(BenchError::invalid(
            "--tensor: OpenCL has no portable tensor-core instruction; the tensor cases need \
             --backend cuda",
        ));
    }
    if !want(args.tensor, tensor_flags) {
        cfg.tensor = None;
    }
    if !want(args.compute, compute_flags) {
        cfg.compute = None;
    }
    if !want(args.memory, memory_flags) {
        cfg.memory = None;
    }
    if !want(args.transfer, transfer_flags) {
        cfg.transfer = None;
    }
    cfg.launch = want(args.launch, false);
    common.apply_duration(&mut cfg.duration);
    cfg.validate().map_err(|e| match e {
        BenchError::InvalidInput(m) if m.starts_with("block") => {
            BenchError::invalid(format!("--block/--transfer-block: {m}"))
        }
        other => other,
    })?;
    Ok(cfg)
}

/// `--reference` on a measuring command: every case; without it none.
pub fn reference_scope(flag: bool) -> hostbench_core::subsystem::ReferenceScope {
    use hostbench_core::subsystem::ReferenceScope;
    if flag {
        ReferenceScope::All
    } else {
        ReferenceScope::Off
    }
}

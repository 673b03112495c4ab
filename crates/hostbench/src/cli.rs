//! Command-line surface (clap types only; resolved into plain configs in `settings`).
//!
//! Lists and sizes stay strings here on purpose: `settings` parses them with hostbench-core's
//! parsers so every bad value gets the same one-line message and exit code 2.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

mod check;
mod fleet;

pub use check::{CheckArgs, LevelArg, UnknownIs};
pub use fleet::{BusyArg, FleetArgs, FleetCheckArgs, FleetCommand, FleetReportArgs, FleetRunArgs};

#[derive(Debug, Parser)]
#[command(
    name = "hostbench",
    version = hostbench_core::build_info::version_line(),
    about = "Measure CPU, memory, disk, network and GPU against their theoretical limits",
    long_about = None,
    propagate_version = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run every benchmark with sensible defaults; write the results to a directory.
    Run(RunArgs),
    /// Show the host inventory and theoretical peaks.
    Info(InfoArgs),
    /// Is this node fit for service? A verdict per check (figures, hardware counters, inventory)
    /// and one for the node, its reason on the first line; exit 0 pass, 1 fail, 5 unknown.
    Check(Box<CheckArgs>),
    /// CPU throughput per dtype, ISA and thread count (FLOP/s, OP/s).
    Cpu(CpuArgs),
    /// HPL-style dense solve (LU with partial pivoting), GFLOP/s and scaled residual.
    Linpack(LinpackArgs),
    /// Memory bandwidth (STREAM kernels, read, write, classic rw), cache sweep and latency curve.
    Mem(Box<MemArgs>),
    /// Storage throughput, IOPS and latency percentiles in a scratch directory (fio-style).
    Disk(Box<DiskArgs>),
    /// Network TCP/UDP throughput, ping-pong latency, latency under load and transaction rates:
    /// server, client, or loopback.
    Net(Box<NetArgs>),
    /// GPU (any OpenCL or CUDA device): compute, device-memory bandwidth, transfers, launch latency.
    Gpu(Box<GpuArgs>),
    /// Re-render a saved run.json as tables, Markdown, CSV, HTML with charts, or PNG charts.
    Report(ReportArgs),
    /// The runs stored in the history database: list, show, compare, import.
    History(HistoryArgs),
    /// A whole cluster through Slurm: every node measured, the network between node pairs, the
    /// slow node found.
    Fleet(Box<FleetArgs>),
    /// The reference tools hostbench compares with: found or not, version, package, what they serve.
    Peers(PeersArgs),
    /// A shell completion script (bash, zsh, fish, elvish, powershell) on stdout.
    Completions(CompletionsArgs),
    /// The manual page (roff) on stdout, or one page per command written into a directory.
    Man(ManArgs),
    /// The JSON Schema of a document on stdout: the result (`hostbench/result/v1`, default) or
    /// the fleet report (`hostbench/fleet/v1`).
    Schema(SchemaArgs),
    /// Burn-in: every CPU unit, memory patterns (and the disk with --disk-dir) for a set time,
    /// every result checked; exit 0 pass, 1 any wrong result (named on the first line).
    Burn(BurnArgs),
}

#[derive(Debug, Args)]
pub struct BurnArgs {
    /// How long to burn in all (e.g. 60s, 10m).
    #[arg(long, default_value = "60s")]
    pub duration: String,
    /// Which resources, comma-separated: cpu, mem, gpu, disk.
    #[arg(long)]
    pub only: Option<String>,
    /// Share of min(MemAvailable, cgroup limit) the memory patterns cover (0 to 0.9).
    #[arg(long, default_value = "0.5")]
    pub mem_share: String,
    /// Scratch directory for the disk burn (the disk is burned only when this is given).
    #[arg(long)]
    pub disk_dir: Option<PathBuf>,
    /// The GPU burn's backend: cuda or opencl (default: the CUDA devices, else OpenCL's GPUs;
    /// `opencl` also burns OpenCL CPU devices such as PoCL's).
    #[arg(long)]
    pub gpu_backend: Option<String>,
    /// Write the record as JSON to FILE, or `-` for stdout.
    #[arg(long)]
    pub json: Option<String>,
    /// Write burn.json and burn.md (with the timeline table) into DIR.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct SchemaArgs {
    /// Which document: result (run.json and every --json), fleet (fleet.json), check (the
    /// verdict document of `hostbench check --json`) or fleet-check (`fleet check`'s table).
    #[arg(value_enum, default_value = "result")]
    pub document: SchemaDoc,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SchemaDoc {
    Result,
    Fleet,
    Check,
    FleetCheck,
}

#[derive(Debug, Args)]
pub struct PeersArgs {
    /// Print the list as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell, e.g. `hostbench completions bash > /etc/bash_completion.d/hostbench`.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[derive(Debug, Args)]
pub struct ManArgs {
    /// Write hostbench.1 and hostbench-COMMAND.1 for every command into DIR.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

/// The completion script for `shell`, generated from these definitions.
pub fn completions(shell: clap_complete::Shell, out: &mut dyn std::io::Write) {
    use clap::CommandFactory;
    clap_complete::generate(shell, &mut Cli::command(), "hostbench", out);
}

/// Every command under `hostbench SUBSYSTEM` (itself included) that takes `--reference`, as the
/// user types it (e.g. "net loopback"): `peers` says how a reference tool is run from this, so
/// its lines follow the definitions.
pub fn reference_commands(subsystem: &str) -> Vec<String> {
    use clap::CommandFactory;
    fn walk(cmd: &clap::Command, path: String, out: &mut Vec<String>) {
        if cmd.get_arguments().any(|a| a.get_id() == "reference") {
            out.push(path.clone());
        }
        for sub in cmd.get_subcommands() {
            walk(sub, format!("{path} {}", sub.get_name()), out);
        }
    }
    let mut out = Vec::new();
    if let Some(cmd) = Cli::command().find_subcommand(subsystem) {
        walk(cmd, subsystem.to_string(), &mut out);
    }
    out
}

/// The manual pages generated from these definitions: (file name, roff), the main page first.
pub fn man_pages() -> std::io::Result<Vec<(String, Vec<u8>)>> {
    use clap::CommandFactory;
    let cmd = Cli::command();
    let mut pages = Vec::new();
    let mut main = Vec::new();
    clap_mangen::Man::new(cmd.clone()).render(&mut main)?;
    pages.push(("hostbench.1".to_string(), main));
    for sub in cmd.get_subcommands() {
        let name = format!("hostbench-{}", sub.get_name());
        let mut page = Vec::new();
        clap_mangen::Man::new(sub.clone().name(name.clone())).render(&mut page)?;
        pages.push((format!("{name}.1"), page));
    }
    Ok(pages)
}

/// Options every measuring command takes.
#[derive(Debug, Args, Clone)]
pub struct CommonArgs {
    /// Measured repetitions per case.
    #[arg(long, default_value = "3", value_name = "N")]
    pub repeat: String,
    /// Discarded warm-up samples per case.
    #[arg(long, default_value = "1", value_name = "N")]
    pub warmup: String,
    /// Target duration of one sample (e.g. 300ms, 1s).
    #[arg(long, value_name = "D")]
    pub duration: Option<String>,
    /// Stop starting new cases after this much time (e.g. 5m); the rest are recorded as skipped.
    #[arg(long, value_name = "D")]
    pub budget: Option<String>,
    /// Write the results as JSON to FILE (rewritten after every case), or `-` for stdout.
    #[arg(long, value_name = "FILE|-")]
    pub json: Option<String>,
    /// Also write the figures in the Prometheus/OpenMetrics text format to FILE (e.g. for
    /// node_exporter's textfile collector: a `.prom` file in its directory).
    #[arg(long, value_name = "FILE")]
    pub openmetrics: Option<PathBuf>,
    /// TOML file with datasheet values that override detection (clock, pipes, DIMMs, link…).
    #[arg(long, value_name = "FILE")]
    pub spec: Option<PathBuf>,
    /// No tables or progress; errors only.
    #[arg(long, short)]
    pub quiet: bool,
}

#[derive(Debug, Args)]
pub struct InfoArgs {
    /// Print the inventory as JSON.
    #[arg(long)]
    pub json: bool,
    /// TOML spec file overriding detected values.
    #[arg(long, value_name = "FILE")]
    pub spec: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct CpuArgs {
    /// Data types: f64, f32, i64, i32, i16, i8 (aliases dp, sp, hp, qp), f16, bf16. f16 and bf16
    /// run only on their units (avx512-fp16; avx512-bf16, amx); pairs without a kernel are left out.
    #[arg(long, value_name = "LIST")]
    pub dtype: Option<String>,
    /// Instruction sets: scalar, sse2, avx2-fma, avx512, neon; the dot-product and matrix units
    /// avx-vnni, avx512-vnni (i8, i16), avx512-bf16 (bf16), avx512-fp16 (f16), amx (i8, bf16);
    /// `auto` (the widest general ISA plus every unit this CPU has) or `all`.
    #[arg(long, value_name = "LIST", default_value = "auto")]
    pub isa: String,
    /// Thread counts, e.g. 1,2,4,8 (more than the CPU count oversubscribes). Default 1,2,4,…,CPUs.
    #[arg(long, value_name = "LIST")]
    pub threads: Option<String>,
    /// Strong: fixed total work split across threads. Weak: fixed work per thread.
    #[arg(long, value_enum, default_value = "strong")]
    pub scaling: ScalingArg,
    /// Operations per sample (total for strong, per thread for weak), e.g. 1e12. Default: sized
    /// from --duration.
    #[arg(long, value_name = "N")]
    pub ops: Option<String>,
    /// Also run likwid-bench's matching peakflops kernel after each f64/f32 case and record the
    /// ratio (needs the `likwid` package).
    #[arg(long)]
    pub reference: bool,
    #[command(flatten)]
    pub common: CommonArgs,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ScalingArg {
    Strong,
    Weak,
}

#[derive(Debug, Args)]
pub struct LinpackArgs {
    /// Matrix order. Default: the n of a 3 s solve at the all-thread FMA rate measured first,
    /// within half the available memory (MemAvailable, and the cgroup's limit if any).
    #[arg(long, value_name = "N")]
    pub n: Option<String>,
    /// Size n to fill this share of the available memory instead (HPL's rule of thumb; the
    /// expected time is printed before the solve starts), in (0, 0.9].
    #[arg(long, value_name = "F", conflicts_with = "n")]
    pub mem_share: Option<String>,
    /// Threads (default: all CPUs).
    #[arg(long, value_name = "T")]
    pub threads: Option<String>,
    /// Also solve the same system with OpenBLAS's dgetrf + dgetrs (the system library, loaded
    /// at run time), same n and threads, its residual checked, and record its figure and the
    /// ratio.
    #[arg(long)]
    pub reference: bool,
    /// Then HPL-MxP at the same n (`cpu.linpack_mxp`): the LU in bf16 with f32 sums where the
    /// CPU has a bf16 unit (f32 elsewhere), GMRES refinement in f64 to HPL's residual, and its
    /// speed-up over the f64 solve.
    #[arg(long)]
    pub mxp: bool,
    #[command(flatten)]
    pub common: CommonArgs,
}

/// `hostbench mem`. With no section flag it runs bandwidth, the cache sweep and the latency curve;
/// a flag that belongs to one section (e.g. `--kernel`, `--chains`) selects that section.
#[derive(Debug, Args)]
pub struct MemArgs {
    /// Only the bandwidth cases (STREAM kernels, read, write at the DRAM working set).
    #[arg(long)]
    pub bandwidth: bool,
    /// Only the cache-hierarchy sweep (bandwidth against working-set size, 4 KiB to beyond LLC).
    #[arg(long)]
    pub sweep: bool,
    /// Only the latency curve (pointer chase over one random cycle of cache lines).
    #[arg(long)]
    pub latency: bool,
    /// The classic assignment's matrix: rw seq/random at 1 B, 8 B, 1 KiB, 8 KiB, 1 MiB, 8 MiB,
    /// 10 MiB, 80 MiB blocks, plus 1-byte sequential and random access latency.
    #[arg(long)]
    pub classic: bool,
    /// Bandwidth kernels: read, write, copy, scale, add, triad, rw.
    #[arg(long, value_name = "LIST")]
    pub kernel: Option<String>,
    /// Block order: seq, random.
    #[arg(long, value_name = "LIST")]
    pub pattern: Option<String>,
    /// Block sizes, e.g. 1,1KiB,1MiB,10MiB, or `whole` (each thread streams its arrays end to end).
    #[arg(long, value_name = "LIST")]
    pub block: Option<String>,
    /// Store kinds: temporal, nontemporal (streaming stores that skip the write-allocate read).
    #[arg(long, value_name = "LIST")]
    pub store: Option<String>,
    /// Kernel instruction sets: scalar, avx2, avx512, neon, `auto` (widest) or `all`.
    #[arg(long, value_name = "LIST", default_value = "auto")]
    pub isa: String,
    /// Thread counts, e.g. 1,2,4,8. Default 1,2,4,…,CPUs (latency: 1; loaded latency: every
    /// CPU, one of them chasing).
    #[arg(long, value_name = "LIST")]
    pub threads: Option<String>,
    /// Working set of the named section: the bandwidth arrays, all threads (e.g. 1GiB; the
    /// default without a section flag), and/or the one latency point with `--latency` (unless
    /// --lat-sizes). Default: every array at least 4 x the sum of all LLCs, 1 GiB in all.
    #[arg(long, value_name = "SIZE")]
    pub size: Option<String>,
    /// Passes over the working set per bandwidth sample (the classic assignment used 100).
    /// Default: as many as fill --duration.
    #[arg(long, value_name = "N")]
    pub passes: Option<String>,
    /// Page sizes: 4k, huge (transparent huge pages, verified). Bandwidth arrays use the first;
    /// the latency curve runs each. Default: bandwidth huge, latency 4k,huge.
    #[arg(long, value_name = "LIST")]
    pub pages: Option<String>,
    /// Working-set sizes of the cache sweep, e.g. 16KiB,1MiB,64MiB.
    #[arg(long, value_name = "LIST")]
    pub sweep_sizes: Option<String>,
    /// Latency working sets per thread, e.g. 32KiB,1MiB,1GiB. Default 4 KiB to >= 1 GiB.
    #[arg(long, value_name = "LIST")]
    pub lat_sizes: Option<String>,
    /// Latency patterns: chase (one random cycle of cache lines), seq, random (classic 1-byte accesses).
    #[arg(long, value_name = "LIST")]
    pub lat_pattern: Option<String>,
    /// Independent pointer chains per thread, e.g. 1,2,4,8 (memory-level parallelism).
    #[arg(long, value_name = "LIST")]
    pub chains: Option<String>,
    /// Only the loaded-latency curve (Intel MLC's method): one thread chases pointers through
    /// DRAM while the others stream through memory, pausing --delays spin iterations after every
    /// 64-byte line; latency against the bandwidth delivered (mem.loaded_latency).
    #[arg(long)]
    pub loaded_latency: bool,
    /// Loaded-latency injection delays: spin iterations (about a core cycle each) after each
    /// 64-byte line of traffic, e.g. 0,100,1000. Default 0,25,50,…,6400.
    #[arg(long, value_name = "LIST", allow_hyphen_values = true)]
    pub delays: Option<String>,
    /// Loaded-latency traffic: read (loads only) and/or rw (each line read and written back).
    #[arg(long, value_name = "LIST")]
    pub traffic: Option<String>,
    /// Only the core-to-core latency matrix: a cache line bounced between every pair of CPUs,
    /// one way (hand-off) and round trip (mem.c2c).
    #[arg(long)]
    pub c2c: bool,
    /// CPUs of the core-to-core matrix, e.g. 0-3,8 (default: every CPU this process may use).
    #[arg(long, value_name = "LIST")]
    pub c2c_cpus: Option<String>,
    /// Only the NUMA matrix: read bandwidth and pointer-chase latency from each node's CPUs to
    /// each node's memory (bound with mbind), mem.numa.
    #[arg(long)]
    pub numa: bool,
    /// NUMA nodes of the matrix, e.g. 0,1 (default: every node).
    #[arg(long, value_name = "LIST")]
    pub numa_nodes: Option<String>,
    /// Also run likwid-bench's matching kernel (load, store, copy, stream; `_mem` for
    /// non-temporal stores) after each whole-array sequential bandwidth case, same ISA, threads
    /// and working set, and record its figure and the ratio (needs the `likwid` package).
    #[arg(long)]
    pub reference: bool,
    #[command(flatten)]
    pub common: CommonArgs,
}

/// `hostbench disk`. Without `--op/--block/--iodepth` it runs the presets fio users quote:
/// SEQ1M Q8T1 read and write, RND4K Q1T1 and Q32T1 random read, RND4K Q32T1 random write.
#[derive(Debug, Args)]
pub struct DiskArgs {
    /// Existing directory to test in; a fresh `hostbench-*` directory is made inside it and
    /// removed on success, failure and Ctrl-C. Block devices are refused.
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub dir: PathBuf,
    /// Patterns: read, write, randread, randwrite, randrw, rw (sequential mixed).
    #[arg(long, value_name = "LIST")]
    pub op: Option<String>,
    /// Block sizes, e.g. 4k,1MiB (default: 1 MiB sequential, 4 KiB random).
    #[arg(long, value_name = "LIST")]
    pub block: Option<String>,
    /// Thread counts (one file slice each), e.g. 1,2,4,…,128.
    #[arg(long, value_name = "LIST")]
    pub threads: Option<String>,
    /// I/Os in flight per thread (io_uring), e.g. 1,32.
    #[arg(long, value_name = "LIST")]
    pub iodepth: Option<String>,
    /// Engine: auto (io_uring where the kernel allows it, else psync), io_uring, psync, or a list.
    #[arg(long, value_name = "LIST", default_value = "auto")]
    pub engine: String,
    /// O_DIRECT: auto (where supported and aligned), on (or refuse), off (buffered, evicted).
    #[arg(long, value_enum, default_value = "auto")]
    pub direct: DirectArg,
    /// Data file size (the classic 10GB file). Default 1 GiB, at most a tenth of the free space
    /// but never below 256 MiB (refused where there is not that much); a smaller size asked for
    /// here runs, its records marked as possibly of a cache.
    #[arg(long, visible_alias = "file-size", value_name = "SIZE")]
    pub size: Option<String>,
    /// Amount-based samples: bytes transferred per sample over all threads (default: time-based,
    /// --duration per sample, 2 s).
    #[arg(long, value_name = "SIZE")]
    pub io_size: Option<String>,
    /// Untimed I/O before each case's first sample (e.g. 2s).
    #[arg(long, value_name = "D")]
    pub ramp: Option<String>,
    /// Percentage of reads in randrw/rw.
    #[arg(long, value_name = "PCT", default_value = "50")]
    pub rwmix: String,
    /// fdatasync after every write, inside its latency (the classic synchronous writes).
    #[arg(long)]
    pub sync: bool,
    /// Write checksummed blocks (the layout too) and check every block read.
    #[arg(long)]
    pub verify: bool,
    /// I/O buffer pages: huge (transparent huge pages, verified: each buffer is physically
    /// contiguous, so a block reaches the device in few DMA segments) or 4k (like fio's default
    /// malloc'd buffers, scattered as the allocator happens to place them).
    #[arg(long, value_name = "P", default_value = "huge")]
    pub pages: String,
    /// Also keep each sample's throughput per interval (e.g. 100ms) in the record
    /// (`extra.interval_bytes_per_s`), like fio's bandwidth log.
    #[arg(long, value_name = "D")]
    pub interval: Option<String>,
    /// The classic matrix: read/write/randread/randwrite x 1 MiB, 10 MiB, 100 MiB x 1, 2, 4
    /// threads, plus randread/randwrite 1 KiB x 1–128 threads.
    #[arg(long)]
    pub classic: bool,
    /// Also run fio after each case with the same op, block, queue depth, threads, engine,
    /// O_DIRECT and time on the same file, and record its figures and the ratio (needs `fio`).
    #[arg(long)]
    pub reference: bool,
    #[command(flatten)]
    pub common: CommonArgs,
}

#[derive(Debug, Args)]
pub struct NetArgs {
    #[command(subcommand)]
    pub mode: NetMode,
}

#[derive(Debug, Subcommand)]
pub enum NetMode {
    /// Serve tests to `hostbench net client` (one session at a time unless --max-sessions).
    Server(NetServerArgs),
    /// Measure against a running `hostbench net server` at HOST[:PORT].
    Client(NetClientArgs),
    /// Server and client in this process on 127.0.0.1 (or ::1): the single-node case.
    Loopback(NetLoopbackArgs),
}

#[derive(Debug, Args)]
pub struct NetServerArgs {
    /// Address to listen on (`::` takes IPv4 and IPv6 where the host allows dual stack).
    #[arg(long, value_name = "ADDR", default_value = "::")]
    pub bind: String,
    /// TCP port of the control connection and the TCP data streams.
    #[arg(long, value_name = "P", default_value = "5201")]
    pub port: String,
    /// File holding the pre-shared token clients must prove they know (challenge-response; the
    /// token never crosses the wire). Without it any client may run tests.
    #[arg(long, value_name = "F")]
    pub token_file: Option<PathBuf>,
    /// Sessions admitted at once; others are told "busy" (tests running together disturb
    /// each other, so the default is iperf3's one).
    #[arg(long, value_name = "N", default_value = "1")]
    pub max_sessions: String,
    /// Exit after the first session ends.
    #[arg(long)]
    pub once: bool,
    /// Once listening, write the bound address (e.g. 198.51.100.1:40123) to FILE, atomically:
    /// with `--port 0` a script (or the fleet) learns the port the kernel chose.
    #[arg(long, value_name = "FILE")]
    pub ready_file: Option<PathBuf>,
    /// Do not log sessions to stderr.
    #[arg(long, short)]
    pub quiet: bool,
}

#[derive(Debug, Args)]
pub struct NetClientArgs {
    /// The server: a name or address, optionally with :PORT (IPv6 as [::1]:5201).
    pub host: String,
    /// Control port when HOST has none.
    #[arg(long, value_name = "P", default_value = "5201")]
    pub port: String,
    /// File holding the server's token.
    #[arg(long, value_name = "F")]
    pub token_file: Option<PathBuf>,
    /// Run the reference tools against HOST too (implies --reference): `iperf3 -s -p P` and
    /// `sockperf sr -p P+1` (add `--tcp` for TCP ping-pong) must be running there.
    #[arg(long, value_name = "P")]
    pub reference_port: Option<String>,
    /// How long to keep asking a busy server (its sessions taken, or its handshake slots held
    /// by idle connections), with doubling waits, before giving up, e.g. 30s.
    #[arg(long, value_name = "D", default_value = "10s")]
    pub connect_timeout: String,
    #[command(flatten)]
    pub test: NetTestArgs,
}

#[derive(Debug, Args)]
pub struct NetLoopbackArgs {
    /// Use ::1 instead of 127.0.0.1.
    #[arg(long)]
    pub ipv6: bool,
    #[command(flatten)]
    pub test: NetTestArgs,
}

/// What a client (or loopback) measures.
#[derive(Debug, Args)]
pub struct NetTestArgs {
    /// Protocols: tcp, udp.
    #[arg(long, value_name = "LIST")]
    pub proto: Option<String>,
    /// Directions: send (client to server), recv (server to client, iperf3 -R), bidir.
    #[arg(long, value_name = "LIST")]
    pub direction: Option<String>,
    /// Write / datagram sizes, e.g. 1KB,32KB (default: TCP 128 KiB; UDP the largest datagram the
    /// path MTU carries unfragmented, at most 32 KiB). UDP allows at most 65507 bytes.
    #[arg(long, value_name = "LIST")]
    pub block: Option<String>,
    /// Parallel streams per direction, one pinned thread each (default 1, 2, 4, … up to the CPUs, at most 8).
    #[arg(long, value_name = "LIST")]
    pub streams: Option<String>,
    /// UDP rate: `search` (the default: RFC 2544's throughput, the highest offered rate whose
    /// loss stays at or below --max-loss, by binary search), a fixed rate per stream in bit/s
    /// (e.g. 1G, 500M), or 0 for unpaced (flagged).
    #[arg(long, value_name = "RATE")]
    pub rate: Option<String>,
    /// Loss threshold of the UDP capacity search, e.g. 0.1% (the default) or 1%.
    #[arg(long, value_name = "PCT", allow_hyphen_values = true)]
    pub max_loss: Option<String>,
    /// Amount-based throughput: bytes per sample per direction over all streams (e.g. 1GB, 10GB),
    /// instead of --duration.
    #[arg(long, value_name = "SIZE")]
    pub bytes: Option<String>,
    /// Throughput section (selects it; with --latency both run; neither: both run).
    #[arg(long)]
    pub throughput: bool,
    /// Ping-pong latency section.
    #[arg(long)]
    pub latency: bool,
    /// Latency-under-load section: round trips of a paced UDP stream's sampled messages at
    /// each --load (sockperf's under-load mode, timed from each message's due time).
    #[arg(long)]
    pub loaded: bool,
    /// Offered loads of the under-load section (selects it): bit/s (e.g. 100M, 1G) or shares of
    /// the path's capacity, the most it carries within --max-loss (e.g. 10%,50%,90%, the
    /// default; at most 100%).
    #[arg(long, value_name = "LIST", allow_hyphen_values = true)]
    pub load: Option<String>,
    /// Under load, one message in N asks for a reply (default: about 2000 timed round trips a
    /// second, at most 1 in 100 as sockperf).
    #[arg(long, value_name = "N")]
    pub reply_every: Option<String>,
    /// Transactions section: TCP and UDP request/response and TCP connect-request-response
    /// rates (netperf's TCP_RR, UDP_RR, TCP_CRR).
    #[arg(long)]
    pub transactions: bool,
    /// Transaction modes (select the transactions section): rr (request/response on an open
    /// connection), crr (a TCP connection per transaction). Default both.
    #[arg(long, value_name = "LIST")]
    pub tx_mode: Option<String>,
    /// TCP requests in flight per pair (selects the transactions section), e.g. 1,16 (default 1).
    #[arg(long, value_name = "LIST")]
    pub outstanding: Option<String>,
    /// Ping-pong message sizes (default 1 byte).
    #[arg(long, value_name = "LIST")]
    pub msg_size: Option<String>,
    /// Concurrent ping-pong pairs (default 1), e.g. 1,2,4,8.
    #[arg(long, value_name = "LIST")]
    pub pairs: Option<String>,
    /// Count-based ping-pong: round trips per pair per sample (the classic 1M), instead of --duration.
    #[arg(long, value_name = "N")]
    pub count: Option<String>,
    /// SO_SNDBUF/SO_RCVBUF for data sockets (disables TCP autotuning, as iperf3 -w does).
    #[arg(long, value_name = "SIZE")]
    pub sockbuf: Option<String>,
    /// Leave stream threads to the scheduler instead of pinning them.
    #[arg(long)]
    pub no_pin: bool,
    /// Also run iperf3 (throughput) and sockperf (ping-pong) on each case with the same
    /// parameters and record their figures and the ratio (loopback starts both servers; a
    /// client needs --reference-port).
    #[arg(long)]
    pub reference: bool,
    /// The classic matrix: TCP and UDP x 1 KB, 32 KB x 1, 2, 4, 8 streams, plus 1-byte ping-pong.
    #[arg(long)]
    pub classic: bool,
    #[command(flatten)]
    pub common: CommonArgs,
}

/// `hostbench gpu`. With no section flag it runs compute, memory, transfers and launch latency; a
/// flag that belongs to one section (e.g. `--dtype`, `--kernel`) selects that section.
#[derive(Debug, Args)]
pub struct GpuArgs {
    /// List every device of every backend and exit (exit code 3 when there is none).
    #[arg(long)]
    pub list: bool,
    /// Backends: opencl (system ICD loader), cuda (driver API); both loaded at run time.
    #[arg(long, value_name = "LIST", default_value = "opencl,cuda")]
    pub backend: String,
    /// Device numbers within each backend, as `--list` shows them (default: every device).
    #[arg(long, value_name = "LIST")]
    pub device: Option<String>,
    /// Only the compute section (FLOP/s, OP/s per dtype, best vector width).
    #[arg(long)]
    pub compute: bool,
    /// Only the tensor cores (CUDA): f16, bf16, tf32, fp8-e4m3, fp8-e5m2, i8 and f64 inputs on
    /// wgmma (Hopper) or mma.sync, each checked exactly, with the dense peak at the measured SM
    /// clock; with --reference, cuBLASLt's GEMM of the same precision beside each.
    #[arg(long)]
    pub tensor: bool,
    /// Tensor precisions: f16, bf16, tf32, fp8-e4m3, fp8-e5m2, i8, f64 (selects the tensor section).
    #[arg(long, value_name = "LIST")]
    pub tensor_dtype: Option<String>,
    /// Only the device-memory bandwidth section.
    #[arg(long)]
    pub memory: bool,
    /// Only the host<->device transfer section.
    #[arg(long)]
    pub transfer: bool,
    /// Only the kernel launch latency.
    #[arg(long)]
    pub launch: bool,
    /// Compute dtypes: f64, f32, f16, i32, i8 (aliases dp, sp, qp).
    #[arg(long, value_name = "LIST")]
    pub dtype: Option<String>,
    /// Vector widths tried per dtype (1, 2, 4, 8, 16 as clpeak); the best is the record.
    #[arg(long, value_name = "LIST")]
    pub vector_width: Option<String>,
    /// Memory kernels: read, write, copy.
    #[arg(long, value_name = "LIST")]
    pub kernel: Option<String>,
    /// Memory block sizes (the kernel's working size), 1 B to 1 GiB, e.g. 1,1KiB,1MiB,1GiB.
    #[arg(long, value_name = "LIST")]
    pub block: Option<String>,
    /// Transfer directions: h2d, d2h.
    #[arg(long, value_name = "LIST")]
    pub direction: Option<String>,
    /// Host memory of the transfers: pageable, pinned.
    #[arg(long, value_name = "LIST")]
    pub host_memory: Option<String>,
    /// Transfer sizes, e.g. 1KiB,1MiB,64MiB.
    #[arg(long, value_name = "LIST")]
    pub transfer_block: Option<String>,
    /// Also run clpeak on the same OpenCL device (once, its tests for the cases asked) and record
    /// its global bandwidth beside the read kernel at the largest block and its compute beside
    /// f32, f64 and i32, with the ratio (needs the `clpeak` package); on a CUDA device the
    /// driver's copy beside the copy kernel and cuBLASLt's GEMM beside each tensor precision.
    #[arg(long)]
    pub reference: bool,
    #[command(flatten)]
    pub common: CommonArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DirectArg {
    Auto,
    On,
    Off,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// How much to measure: quick (~1 min), standard (default), full, classic (the assignment's matrix).
    #[arg(long, value_enum, default_value = "standard")]
    pub profile: ProfileArg,
    #[arg(long, value_name = "LIST", help = crate::registry::list_help("Only these subsystems"))]
    pub only: Option<String>,
    #[arg(long, value_name = "LIST", help = crate::registry::list_help("Skip these subsystems"))]
    pub skip: Option<String>,
    /// Directory the disk benchmark writes its scratch files in (default: the current one).
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub disk_dir: PathBuf,
    /// Directory that receives `<UTC timestamp>-<host>/` with run.json, records.csv, report.md
    /// and report.html.
    #[arg(long, value_name = "DIR", default_value = "results")]
    pub out: PathBuf,
    /// Write into exactly DIR (no `<UTC timestamp>-<host>/` inside it): the fleet's node runs.
    #[arg(long, value_name = "DIR", hide = true, conflicts_with = "out")]
    pub run_dir: Option<PathBuf>,
    /// Shrink (or grow) every workload proportionally: sample durations and the linpack
    /// matrix's work are multiplied by F (e.g. 0.1 for a tenth of the time).
    #[arg(long, value_name = "F", default_value = "1")]
    pub scale: String,
    /// Size linpack's matrix to this share of the available memory, in (0, 0.9] (default: 0.5
    /// in the full profile; the other profiles size it to a time budget).
    #[arg(long, value_name = "F")]
    pub mem_share: Option<String>,
    /// Also write every chart as a PNG image into DIR.
    #[arg(long, value_name = "DIR")]
    pub png: Option<PathBuf>,
    /// The node's price in USD per hour (e.g. a cloud instance's on-demand rate): the reports
    /// and the JSON add every throughput figure per dollar-hour. Overrides the spec file's
    /// `[cost] price_per_hour`.
    #[arg(long, value_name = "USD")]
    pub price_per_hour: Option<String>,
    #[command(flatten)]
    pub history: HistoryDbArgs,
    /// Do not store this run in the history database.
    #[arg(long)]
    pub no_history: bool,
    /// Run the reference tool (likwid-bench, OpenBLAS, fio, iperf3, sockperf, clpeak) beside every
    /// case it can express. Default: beside one headline case per subsystem, where the tool is
    /// installed (none in the quick profile).
    #[arg(long, conflicts_with = "no_reference")]
    pub reference: bool,
    /// No reference tool at all, not even beside the headline cases.
    #[arg(long)]
    pub no_reference: bool,
    /// Print every table, not the one-screen summary (the tables are always in report.md/html).
    #[arg(long, short)]
    pub verbose: bool,
    #[command(flatten)]
    pub common: CommonArgs,
}

/// Where the history database is.
#[derive(Debug, Args, Clone)]
pub struct HistoryDbArgs {
    /// History database (SQLite). Default: $HOSTBENCH_DB, else hostbench/history.sqlite in the
    /// user's data directory ($XDG_DATA_HOME or ~/.local/share).
    #[arg(long, value_name = "FILE", global = true)]
    pub db: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// A saved result (run.json of a results directory, or any --json output), or a burn record
    /// (burn.json); two to eight results render side by side (overlaid charts, each run's ratio
    /// to the first).
    #[arg(value_name = "FILE.json", required = true, num_args = 1..)]
    pub files: Vec<PathBuf>,
    /// Write the HTML report (self-contained, with charts) to FILE, or `-` for stdout.
    #[arg(long, value_name = "FILE|-")]
    pub html: Option<String>,
    /// Write the Markdown report to FILE, or `-` for stdout.
    #[arg(long, value_name = "FILE|-")]
    pub md: Option<String>,
    /// Write one CSV row per record to FILE, or `-` for stdout.
    #[arg(long, value_name = "FILE|-")]
    pub csv: Option<String>,
    /// Write the figures in the Prometheus text format to FILE, or `-` for stdout: the same
    /// output as a measuring command's --openmetrics (several runs: one exposition, each sample
    /// labelled with its run's host and a `run` label).
    #[arg(long, value_name = "FILE|-")]
    pub openmetrics: Option<String>,
    /// Write every chart as a PNG image into DIR.
    #[arg(long, value_name = "DIR")]
    pub png: Option<PathBuf>,
    /// No terminal table.
    #[arg(long, short)]
    pub quiet: bool,
}

#[derive(Debug, Args)]
pub struct HistoryArgs {
    #[command(subcommand)]
    pub command: HistoryCommand,
    #[command(flatten)]
    pub db: HistoryDbArgs,
}

#[derive(Debug, Subcommand)]
pub enum HistoryCommand {
    /// List the stored runs (id, time, host, profile, records).
    List,
    /// Show one run's tables. RUN: an id from `list`, `latest`, `latest~N`, or the run's
    /// results directory name.
    Show {
        #[arg(value_name = "RUN")]
        run: String,
    },
    /// Compare two runs record by record: improved, regressed or within noise. Exit code 4 when
    /// a regression exceeds --threshold. `fleet:ID` on both sides compares two fleet runs node
    /// by node and their medians (`fleet:latest` for the newest).
    Compare {
        /// The baseline run.
        #[arg(value_name = "RUN_A")]
        a: String,
        /// The run compared with it.
        #[arg(value_name = "RUN_B")]
        b: String,
        /// Regression (in %) that fails the comparison with exit code 4.
        #[arg(long, value_name = "PCT", default_value = "5")]
        threshold: String,
        /// Changes below this (in %) are noise even when statistically significant.
        #[arg(long, value_name = "PCT", default_value = "2")]
        noise: String,
    },
    /// Store a saved run.json (e.g. of an interrupted run, or from another machine).
    Import {
        #[arg(value_name = "FILE.json")]
        file: PathBuf,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ProfileArg {
    Quick,
    Standard,
    Full,
    Classic,
}

impl ProfileArg {
    pub const ALL: [ProfileArg; 4] = [
        ProfileArg::Quick,
        ProfileArg::Standard,
        ProfileArg::Full,
        ProfileArg::Classic,
    ];
}

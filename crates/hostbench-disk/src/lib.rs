//! hostbench-disk: storage throughput, IOPS and completion latency, fio-style, safe by default.
//!
//! A run lays out one data file inside a fresh `hostbench-*` directory under `--dir` (fully
//! written with incompressible data, so no read ever hits a hole, and with O_DIRECT where the
//! cases use it, as fio's write pass does: see `lay_out`), then runs each case —
//! op × block size × threads × queue depth × engine — on pinned threads, each owning one slice of
//! the file. One measurement yields three records: `disk.throughput`, `disk.iops` and
//! `disk.latency` (completion latency from an HDR histogram: p50, p90, p99, p99.9, clamped to the
//! observed min/max). The directory is removed on success, on failure and on Ctrl-C.
//!
//! Cache honesty: O_DIRECT where the filesystem supports it, with the alignment it reports; where
//! it does not, buffered I/O with the file's pages evicted (fdatasync + POSIX_FADV_DONTNEED)
//! before every sample, labelled `buffered-evicted`. tmpfs, overlay and ZFS are labelled, because
//! there even "direct" I/O measures memory or a cache, not the device; so are a loop device
//! without direct I/O and what is stacked on one (the target resolver follows loop, dm and md
//! devices down to the disk, whose limits then apply).
//!
//! The working file is never silently smaller than a cache: by default at least `MIN_FILE_BYTES`
//! (more with a cache in the spec file), refused in one line where the free space cannot hold
//! that; a smaller `--size` asked for explicitly runs with every record marked (`size_file`).

pub mod burn;
pub mod engine;
pub mod reference;
pub use hostbench_core::histogram;
pub mod subsystem;
pub mod target;
pub mod workload;

pub use subsystem::Disk;

use std::cell::RefCell;
use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use hostbench_core::buffer::Pages;
use hostbench_core::model::{Host, Metric, Record};
use hostbench_core::runner::record_from_samples;
use hostbench_core::spec::Spec;
use hostbench_core::units::format_bytes_iec;
use hostbench_core::{parallel, BenchError, Case, Runner, Sample};
use serde_json::json;

pub use engine::EngineKind;
use histogram::LatencyHist;
use target::DirectIo;
pub use workload::Op;

/// One point of the disk parameter space.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CaseSpec {
    pub op: Op,
    pub block: u64,
    pub threads: usize,
    pub iodepth: usize,
}

/// Which engines to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EngineChoice {
    /// io_uring where the kernel allows it, else psync (the record says which ran).
    Auto,
    List(Vec<EngineKind>),
}

/// O_DIRECT or not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DirectChoice {
    /// O_DIRECT where supported and aligned, else buffered with eviction (labelled).
    Auto,
    /// O_DIRECT or refuse.
    On,
    /// Buffered, pages evicted before every sample.
    Off,
}

/// Plain configuration of `hostbench disk`.
#[derive(Debug, Clone)]
pub struct DiskConfig {
    /// Existing directory under which the work directory is created.
    pub dir: PathBuf,
    pub cases: Vec<CaseSpec>,
    pub engines: EngineChoice,
    pub direct: DirectChoice,
    /// Size of the data file, honoured below the floor (`MIN_FILE_BYTES`) with every record
    /// marked; `None`: 1 GiB, at most a tenth of the free space but never below the floor (the
    /// run is refused where the free space cannot hold that; see `size_file`).
    pub file_bytes: Option<u64>,
    /// Amount-based samples: bytes per sample over all threads; `None`: time-based.
    pub io_bytes: Option<u64>,
    /// Length of a time-based sample.
    pub duration: Duration,
    /// Untimed I/O before a case's first sample.
    pub ramp: Duration,
    /// Percentage of reads in mixed ops.
    pub rwmix_read: u32,
    /// fdatasync after every write (the classic synchronous write), inside its latency.
    pub sync_writes: bool,
    pub verify: bool,
    /// Keep per-interval throughput (e.g. every 100 ms) of every sample in the record.
    pub interval: Option<Duration>,
    /// Page size of the I/O buffers: huge (default) so each buffer is physically contiguous and
    /// reaches the device as few DMA segments, or 4k as fio's default malloc'd buffers (whose
    /// contiguity is the allocator's luck); see hostbench-disk's engine for the measurements.
    pub pages: Pages,
    pub seed: u64,
    /// Which cases run fio beside them with the same parameters, on the same file (the
    /// headline: the first case on its first engine).
    pub reference: hostbench_core::subsystem::ReferenceScope,
    /// Where the free space cannot hold a working file at the floor: skip every case with the
    /// reason (`run`, whose other subsystems go on) rather than fail as bad input (`disk`, exit 2).
    pub refusal_skips: bool,
}

/// Most threads and queue depth a case may ask for.
pub const MAX_THREADS: usize = 1024;
pub const MAX_IODEPTH: usize = 4096;
/// Largest block: 1 GiB.
pub const MAX_BLOCK: u64 = 1 << 30;
/// Default data file and the share of free space it may take.
pub const DEFAULT_FILE_BYTES: u64 = 1 << 30;
pub const DEFAULT_FREE_FRACTION: f64 = 0.10;

/// The reference presets fio users quote: SEQ1M Q8T1 read and write, RND4K Q1T1 and Q32T1
/// random read, RND4K Q32T1 random write.
pub fn default_cases() -> Vec<CaseSpec> {
    let c = |op, block, iodepth| CaseSpec {
        op,
        block,
        threads: 1,
        iodepth,
    };
    vec![
        c(Op::Read, 1 << 20, 8),
        c(Op::Write, 1 << 20, 8),
        c(Op::RandRead, 4096, 1),
        c(Op::RandRead, 4096, 32),
        c(Op::RandWrite, 4096, 32),
    ]
}

/// The classic assignment's matrix: read, write, randread, randwrite × 1 MiB, 10 MiB, 100 MiB ×
/// `threads` (1, 2, 4 by default), then randread and randwrite of 1 KiB × 1–128 threads, QD 1.
pub fn classic_cases(threads: &[usize]) -> Vec<CaseSpec> {
    let big = [1 << 20, 10 << 20, 100 << 20];
    let mut v = cases_from(
        &[Op::Read, Op::Write, Op::RandRead, Op::RandWrite],
        Some(&big),
        threads,
        &[1],
    );
    v.extend(cases_from(
        &[Op::RandRead, Op::RandWrite],
        Some(&[1024]),
        &[1, 2, 4, 8, 16, 32, 64, 128],
        &[1],
    ));
    v
}

/// Every combination of the lists; `blocks = None` gives sequential ops 1 MiB and random ops
/// 4 KiB.
pub fn cases_from(
    ops: &[Op],
    blocks: Option<&[u64]>,
    threads: &[usize],
    iodepths: &[usize],
) -> Vec<CaseSpec> {
    let mut v = Vec::new();
    for &op in ops {
        let default_block = if op.random() { 4096 } else { 1 << 20 };
        let bl: Vec<u64> = blocks.map_or(vec![default_block], <[u64]>::to_vec);
        for &block in &bl {
            for &t in threads {
                for &q in iodepths {
                    v.push(CaseSpec {
                        op,
                        block,
                        threads: t,
                        iodepth: q,
                    });
                }
            }
        }
    }
    v
}

impl Default for DiskConfig {
    fn default() -> Self {
        Self {
            dir: PathBuf::from("."),
            cases: default_cases(),
            engines: EngineChoice::Auto,
            direct: DirectChoice::Auto,
            file_bytes: None,
            io_bytes: None,
            duration: Duration::from_secs(2),
            ramp: Duration::ZERO,
            rwmix_read: 50,
            sync_writes: false,
            verify: false,
            interval: None,
            pages: Pages::Huge,
            seed: 0xD15C,
            reference: hostbench_core::subsystem::ReferenceScope::Off,
            refusal_skips: false,
        }
    }
}

impl DiskConfig {
    pub fn validate(&self) -> Result<(), BenchError> {
        if self.cases.is_empty() {
            return Err(BenchError::invalid("no disk cases to run"));
        }
        for c in &self.cases {
            if c.block == 0 || c.block > MAX_BLOCK {
                return Err(BenchError::invalid(format!(
                    "block size must be between 1 B and 1 GiB, got {} B",
                    c.block
                )));
            }
            if c.threads == 0 || c.threads > MAX_THREADS {
                return Err(BenchError::invalid(format!(
                    "threads must be between 1 and {MAX_THREADS}, got {}",
                    c.threads
                )));
            }
            if c.iodepth == 0 || c.iodepth > MAX_IODEPTH {
                return Err(BenchError::invalid(format!(
                    "iodepth must be between 1 and {MAX_IODEPTH}, got {}",
                    c.iodepth
                )));
            }
        }
        if self.rwmix_read > 100 {
            return Err(BenchError::invalid(format!(
                "rwmix must be a read percentage from 0 to 100, got {}",
                self.rwmix_read
            )));
        }
        if self.file_bytes == Some(0) || self.io_bytes == Some(0) {
            return Err(BenchError::invalid("sizes must be at least 1 byte"));
        }
        if let EngineChoice::List(l) = &self.engines {
            if l.is_empty() {
                return Err(BenchError::invalid("empty engine list"));
            }
        }
        Ok(())
    }
}

/// Where and how the cases run, decided once per run.
struct Setup {
    file: PathBuf,
    file_bytes: u64,
    /// How `file_bytes` was chosen (`extra.sizing`), and the note when it is below the floor or
    /// smaller than asked.
    sizing: Sizing,
    dio: DirectIo,
    fs: target::FsInfo,
    device: Option<target::DeviceInfo>,
    /// The overlay's upper directory, where `dir` is on an overlay this namespace can see.
    overlay: Option<target::OverlayUpper>,
    /// How the data file was written.
    layout: Layout,
}

/// Per-thread slice of the file for a case: whole blocks, the same size for every thread.
fn slice_bytes(file_bytes: u64, c: &CaseSpec) -> u64 {
    file_bytes / c.threads as u64 / c.block * c.block
}

fn aligned_for_direct(c: &CaseSpec, dio: &DirectIo) -> Result<usize, String> {
    match dio {
        DirectIo::Supported {
            mem_align,
            offset_align,
            ..
        } => {
            let a = (*offset_align).max(1) as u64;
            if c.block.is_multiple_of(a) {
                Ok((*mem_align).max(4096))
            } else {
                Err(format!(
                    "block size {} B is not a multiple of the O_DIRECT alignment {a} B",
                    c.block
                ))
            }
        }
        DirectIo::Unsupported(why) => Err(why.clone()),
    }
}

/// How the data file was written (`extra.layout` of every record).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layout {
    /// O_DIRECT, sequential, from one reused buffer (an unaligned tail, if any, buffered).
    Direct,
    /// Through the page cache, then flushed and evicted.
    Buffered,
}

impl Layout {
    fn name(self) -> &'static str {
        match self {
            Self::Direct => "direct",
            Self::Buffered => "buffered",
        }
    }
}

/// Bytes per layout write: fio's 1 MiB write pass, and a multiple of every O_DIRECT alignment up
/// to it.
const LAYOUT_CHUNK: usize = 1 << 20;

/// Write the whole data file with incompressible (or checksummed) data, so no read ever hits a
/// hole and no write lands on an unwritten extent, then flush it and drop any of it from the page
/// cache.
///
/// `direct` (the O_DIRECT alignments, `Some` when the cases will use direct I/O) writes it as
/// `fio --rw=write --bs=1M --direct=1` does, the layout fio is compared on: sequentially, with
/// O_DIRECT, from one reused buffer. Written through the page cache instead (1 GiB of dirty pages
/// flushed by write-back), the same file took 4 KiB random writes at QD 32 at 0.4–0.5 × the rate
/// of a file written directly, run after run, on the Firecracker VM of issue 31 (ext4 on
/// virtio-blk; BENCHMARKS.md): the guest's path per I/O was the same (one bio, one request, two
/// extent lookups), the device's latency was twice as long for blocks first written by
/// write-back, and rewriting them later did not undo it. What decided it was the guest memory the
/// first write's data came from: O_DIRECT from one 1 GiB buffer (a page per block, as the page
/// cache is) was as slow, so the buffer here is one 1 MiB chunk, reused. A direct layout also
/// keeps a run from pushing a file's worth of other data out of the page cache.
///
/// Where O_DIRECT is refused after all (EINVAL on open or on the first write) the layout falls
/// back to the page cache; the result says which ran.
fn lay_out(
    path: &Path,
    bytes: u64,
    verify: bool,
    seed: u64,
    direct: Option<(usize, usize)>,
) -> Result<Layout, BenchError> {
    let io = |e: std::io::Error| BenchError::Failed(format!("laying out {}: {e}", path.display()));
    let f = File::create(path).map_err(io)?;
    let mut done = 0u64;
    let mut layout = Layout::Buffered;
    if let Some((mem_align, offset_align)) = direct {
        // Aligned chunks only: whatever is left below one `offset_align` goes through `f`.
        let align = offset_align.max(1);
        let chunk = LAYOUT_CHUNK.next_multiple_of(align);
        let aligned = bytes / align as u64 * align as u64;
        if mem_align <= hostbench_core::buffer::ALIGN && aligned > 0 {
            match lay_out_direct(path, aligned, chunk, verify, seed) {
                Ok(()) => {
                    done = aligned;
                    layout = Layout::Direct;
                }
                // EINVAL: this file or filesystem refuses O_DIRECT after all (the probe file
                // may have been luckier); anything else is a real failure.
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {}
                Err(e) => return Err(io(e)),
            }
        }
    }
    lay_out_buffered(&f, done, bytes, verify, seed).map_err(io)?;
    f.sync_all().map_err(io)?;
    target::evict_cache(f.as_raw_fd()).map_err(io)?;
    Ok(layout)
}

/// The bytes the layout writes at `off` (the generator continues from chunk to chunk, so a
/// layout's data does not depend on its chunk size).
fn layout_fill(buf: &mut [u8], off: u64, verify: bool, seed: u64, rng: &mut workload::Rng) {
    if verify {
        workload::fill_verified(buf, off, seed);
    } else {
        rng.fill(buf);
    }
}

/// `[0, bytes)` with O_DIRECT in `chunk`-byte writes (the last one shorter, still aligned) from
/// one buffer on a 2 MiB boundary, which satisfies any memory alignment O_DIRECT asks.
fn lay_out_direct(
    path: &Path,
    bytes: u64,
    chunk: usize,
    verify: bool,
    seed: u64,
) -> std::io::Result<()> {
    let f = OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)?;
    let mut buf = hostbench_core::buffer::Region::new(chunk, Pages::Small)
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    let mut rng = workload::Rng::new(seed);
    let mut off = 0u64;
    while off < bytes {
        let n = chunk.min((bytes - off) as usize);
        let data = &mut buf.as_mut_slice()[..n];
        layout_fill(data, off, verify, seed, &mut rng);
        write_all_at(&f, data, off)?;
        off += n as u64;
    }
    f.sync_all()
}

/// `[from, bytes)` through the page cache, in 1 MiB writes.
fn lay_out_buffered(
    f: &File,
    from: u64,
    bytes: u64,
    verify: bool,
    seed: u64,
) -> std::io::Result<()> {
    let mut buf = vec![0u8; LAYOUT_CHUNK];
    let mut rng = workload::Rng::new(seed ^ from);
    let mut off = from;
    while off < bytes {
        let n = LAYOUT_CHUNK.min((bytes - off) as usize);
        layout_fill(&mut buf[..n], off, verify, seed, &mut rng);
        write_all_at(f, &buf[..n], off)?;
        off += n as u64;
    }
    Ok(())
}

fn write_all_at(f: &File, data: &[u8], off: u64) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    f.write_all_at(data, off)
}

fn open_for(path: &Path, direct: bool, op: Op) -> std::io::Result<File> {
    let mut o = OpenOptions::new();
    o.read(true).write(op.writes());
    if direct {
        o.custom_flags(libc::O_DIRECT);
    }
    o.open(path)
}

/// What one sample measured, over all threads.
struct SampleOut {
    wall_s: f64,
    bytes: u64,
    ios: u64,
    lat: LatencyHist,
    read_lat: LatencyHist,
    write_lat: LatencyHist,
    /// Throughput per interval (B/s), summed over the threads, when `--interval` was given.
    intervals: Vec<f64>,
    /// Every thread's I/O buffers: bytes, and bytes on huge pages (`None`: unknown).
    buffer_bytes: u64,
    buffer_huge_bytes: Option<u64>,
}

#[allow(clippy::too_many_arguments)]
fn one_sample(
    setup: &Setup,
    cfg: &DiskConfig,
    c: &CaseSpec,
    kind: EngineKind,
    direct: bool,
    mem_align: usize,
    order: &[usize],
    deadline_after: Option<Duration>,
    sample_no: u64,
) -> Result<SampleOut, BenchError> {
    if !direct {
        // Buffered: whatever earlier samples left in the page cache must not be read back.
        let f = File::open(&setup.file).map_err(|e| BenchError::io(&setup.file, e))?;
        target::evict_cache(f.as_raw_fd()).map_err(|e| BenchError::io(&setup.file, e))?;
    }
    let slice = slice_bytes(setup.file_bytes, c);
    let per_thread_io = cfg.io_bytes.map(|b| (b / c.threads as u64).max(c.block));
    let t = parallel::run_pinned(
        c.threads,
        order,
        |i| {
            let f =
                open_for(&setup.file, direct, c.op).map_err(|e| BenchError::io(&setup.file, e))?;
            let mut w = workload::Pattern::new(
                c.op,
                c.block,
                i as u64 * slice,
                slice,
                cfg.seed ^ (sample_no << 20) ^ i as u64,
            );
            w.rwmix_read = cfg.rwmix_read;
            w.verify = cfg.verify;
            w.remaining = per_thread_io;
            w.deadline = deadline_after.map(|d| Instant::now() + d);
            let job = engine::EngineJob {
                interval: cfg.interval,
                fd: f.as_raw_fd(),
                block_bytes: c.block as usize,
                iodepth: c.iodepth,
                mem_align,
                fdatasync_each_write: cfg.sync_writes,
                pages: cfg.pages,
            };
            engine::run_thread(kind, &job, &mut w)
        },
        |_| (),
    )?;
    let first = t.results.iter().filter_map(|s| s.started).min();
    let last = t.results.iter().filter_map(|s| s.finished).max();
    let wall_s = match (first, last) {
        (Some(a), Some(b)) => b.duration_since(a).as_secs_f64(),
        _ => t.wall_s,
    };
    let mut out = SampleOut {
        wall_s: wall_s.max(1e-9),
        bytes: 0,
        ios: 0,
        lat: LatencyHist::new(),
        read_lat: LatencyHist::new(),
        write_lat: LatencyHist::new(),
        intervals: Vec::new(),
        buffer_bytes: t.results.iter().map(|s| s.buffer_bytes).sum(),
        buffer_huge_bytes: t.results.iter().map(|s| s.buffer_huge_bytes).sum(),
    };
    if let Some(iv) = cfg.interval {
        // Each thread's buckets start at its own first submission; the barrier released them
        // together, so summing bucket by bucket lines them up to within microseconds.
        let n = t
            .results
            .iter()
            .map(|s| s.interval_bytes.len())
            .max()
            .unwrap_or(0);
        out.intervals = (0..n)
            .map(|k| {
                let b: u64 = t
                    .results
                    .iter()
                    .filter_map(|s| s.interval_bytes.get(k))
                    .sum();
                b as f64 / iv.as_secs_f64()
            })
            .collect();
    }
    for s in &t.results {
        out.bytes += s.read_bytes + s.write_bytes;
        out.ios += s.read_ios + s.write_ios;
        out.read_lat.merge(&s.read_lat);
        out.write_lat.merge(&s.write_lat);
    }
    out.lat.merge(&out.read_lat);
    out.lat.merge(&out.write_lat);
    if out.ios == 0 {
        return Err(BenchError::Failed("no I/O completed in the sample".into()));
    }
    Ok(out)
}

/// The engines a case runs with, and a note when `auto` had to fall back.
fn engines_for(choice: &EngineChoice) -> (Vec<EngineKind>, Option<String>) {
    match choice {
        EngineChoice::List(l) => (l.clone(), None),
        EngineChoice::Auto => match engine::io_uring_status() {
            Ok(()) => (vec![EngineKind::IoUring], None),
            Err(why) => (
                vec![EngineKind::Psync],
                Some(format!("io_uring unavailable ({why}); psync used instead")),
            ),
        },
    }
}

/// The smallest working file a figure of the device can come from, without a cache size from the
/// spec file: 256 MiB. It is larger than any CPU's caches (a 3 MiB file is read from the last
/// level cache, not even from the page cache) and than the buffer of current hard disks (up to
/// 256 MiB), so a sequential 1 MiB case cannot be served whole from one cache; SSDs keep their
/// DRAM for the mapping table, not for data. A controller's larger cache (a RAID controller's
/// 1-8 GiB write-back cache) is invisible in sysfs: the spec file's `disk.cache_bytes` raises the
/// floor to twice it (see `size_floor`).
pub const MIN_FILE_BYTES: u64 = 256 << 20;

/// The floor for this run and why: twice the spec file's `disk.cache_bytes` where that is above
/// `MIN_FILE_BYTES` (a file twice the cache has half of any uniform access miss it, and a
/// sequential pass cannot stay in it), else the fixed minimum.
fn size_floor(spec: &Spec) -> (u64, String) {
    match spec.disk.cache_bytes {
        Some(c) if c.saturating_mul(2) > MIN_FILE_BYTES => (
            c.saturating_mul(2),
            format!(
                "twice the {} cache of the spec file's disk.cache_bytes",
                format_bytes_iec(c)
            ),
        ),
        _ => (
            MIN_FILE_BYTES,
            "the fixed minimum, above the CPU's caches and a disk's buffer".to_string(),
        ),
    }
}

/// How the working file's size was chosen: `extra.sizing` of every record.
#[derive(Debug, Clone)]
struct Sizing {
    /// What was asked: `--size`, or the default (1 GiB, or the floor where that is larger).
    asked: u64,
    explicit: bool,
    /// Free space on the filesystem before the file was written.
    free: u64,
    used: u64,
    floor: u64,
    floor_basis: String,
    /// A warning for every record: the file is below the floor (asked for explicitly) or smaller
    /// than asked (free space).
    note: Option<String>,
}

impl Sizing {
    fn json(&self) -> serde_json::Value {
        json!({
            "asked": self.asked,
            "asked_by": if self.explicit { "--size" } else { "default" },
            "free": self.free,
            "used": self.used,
            "limited_by": (self.used < self.asked).then_some("free_space"),
            "floor": self.floor,
            "floor_basis": self.floor_basis,
            "below_floor": self.used < self.floor,
        })
    }
}

/// Choose the working file's size, or refuse.
///
/// By default it is 1 GiB (more where the floor is higher), kept to a tenth of the free space but
/// never below the floor: a run with too little free space for the floor is refused with one
/// line naming the free space and the remedies, rather than silently measuring a file that a
/// cache holds (issue 55: 3 MiB on a nearly full filesystem read at 20 GB/s from a disk). Where
/// the free space made it smaller than the default, every record says so.
///
/// A size asked for with `--size` is honoured even below the floor (the user asked, e.g. to
/// measure the cache, and the tests run on small files), but every record is marked: a warning
/// and `extra.sizing.below_floor`. It is only refused where it does not fit in the free space.
fn size_file(
    cfg: &DiskConfig,
    dir: &Path,
    fs: &target::FsInfo,
    spec: &Spec,
    min_bytes: u64,
) -> Result<Sizing, BenchError> {
    let (floor, floor_basis) = size_floor(spec);
    if let Some(b) = cfg.file_bytes {
        target::check_free_space(dir, b, "the data file (--size)")?;
        let note = (b < floor).then(|| {
            format!(
                "working file {} (asked with --size) is below the {} floor ({floor_basis}): the \
                 figures may be of a cache, not of the device",
                format_bytes_iec(b),
                format_bytes_iec(floor)
            )
        });
        return Ok(Sizing {
            asked: b,
            explicit: true,
            free: fs.free_bytes,
            used: b,
            floor,
            floor_basis,
            note,
        });
    }
    const MIB: u64 = 1 << 20;
    let asked = DEFAULT_FILE_BYTES.max(floor);
    let tenth = (fs.free_bytes as f64 * DEFAULT_FREE_FRACTION) as u64 / MIB * MIB;
    let usable = target::usable_bytes(fs);
    let mut used = asked.min(tenth.max(floor)).max(min_bytes);
    if used > usable {
        // Not a tenth, but still the floor where the margin allows it.
        used = floor.max(min_bytes);
    }
    if used > usable {
        let need = if used > floor {
            format!(
                "{} (the widest case's threads x block)",
                format_bytes_iec(used)
            )
        } else {
            format!("{} ({floor_basis})", format_bytes_iec(floor))
        };
        return Err(BenchError::invalid(format!(
            "refused: a figure of the device needs a working file of at least {need}, but only \
             {} is free on {} ({} usable, keeping a 10 % / 1 GiB margin); free space there, \
             test another filesystem with --dir, or ask for a smaller file with --size (its \
             figures are then marked as possibly of a cache)",
            format_bytes_iec(fs.free_bytes),
            dir.display(),
            format_bytes_iec(usable),
        )));
    }
    let note = (used < asked).then(|| {
        let why = if used > tenth {
            "the floor, more than a tenth of"
        } else {
            "a tenth of"
        };
        format!(
            "working file {}, not the {} default: {why} the {} free on {} (--size sets it)",
            format_bytes_iec(used),
            format_bytes_iec(asked),
            format_bytes_iec(fs.free_bytes),
            dir.display()
        )
    });
    Ok(Sizing {
        asked,
        explicit: false,
        free: fs.free_bytes,
        used,
        floor,
        floor_basis,
        note,
    })
}

/// The three records' cases of one case on one engine, with the `direct` it would have (for a
/// refusal before anything ran, what `--direct` asked).
fn three_cases(c: &CaseSpec, kind: EngineKind, cfg: &DiskConfig) -> [Case; 3] {
    let direct = cfg.direct != DirectChoice::Off;
    let f = cfg.file_bytes.unwrap_or(0);
    [
        case_for(
            "disk.throughput",
            Metric::Throughput,
            "B/s",
            c,
            kind,
            direct,
            f,
            cfg,
        ),
        case_for(
            "disk.iops",
            Metric::Throughput,
            "IO/s",
            c,
            kind,
            direct,
            f,
            cfg,
        ),
        case_for(
            "disk.latency",
            Metric::Latency,
            "s",
            c,
            kind,
            direct,
            f,
            cfg,
        ),
    ]
}

/// Run every configured case through `runner`. Bad input is an error before anything is
/// written; a failure inside a case (ENOSPC, EIO) skips that case and the others go on.
pub fn run_disk(
    runner: &mut Runner,
    cfg: &DiskConfig,
    _host: &Host,
    spec: &Spec,
) -> Result<(), BenchError> {
    cfg.validate()?;
    let dir = target::check_dir(&cfg.dir)?;
    let fs = target::fs_info(&dir)?;
    let max_threads = cfg.cases.iter().map(|c| c.threads).max().unwrap_or(1) as u64;
    let max_block = cfg.cases.iter().map(|c| c.block).max().unwrap_or(4096);
    let sizing = match size_file(cfg, &dir, &fs, spec, max_block * max_threads) {
        Ok(s) => s,
        Err(e) if cfg.refusal_skips => {
            // In `run`: the other subsystems go on, and the disk's cases say why they did not.
            for c in &cfg.cases {
                for k in engines_for(&cfg.engines).0 {
                    for case in three_cases(c, k, cfg) {
                        runner.skip_with(&case, "refused", &e.to_string())?;
                    }
                }
            }
            return Ok(());
        }
        Err(e) => return Err(e),
    };
    let file_bytes = sizing.used;
    for c in &cfg.cases {
        if slice_bytes(file_bytes, c) < c.block {
            return Err(BenchError::invalid(format!(
                "file size {} is too small for {} thread(s) x {} blocks",
                format_bytes_iec(file_bytes),
                c.threads,
                format_bytes_iec(c.block)
            )));
        }
    }
    let overlay = (fs.fs_type == "overlay")
        .then(|| target::overlay_upper(&dir))
        .flatten();
    let dio = target::direct_io(&dir);
    if cfg.direct == DirectChoice::On {
        for c in &cfg.cases {
            aligned_for_direct(c, &dio)
                .map_err(|why| BenchError::invalid(format!("--direct on: {why}")))?;
        }
    }
    let work = target::WorkDir::create(&dir)?;
    // The file is written the way the cases will write: with O_DIRECT where they use it (see
    // `lay_out`).
    let layout_direct = match (&dio, cfg.direct) {
        (_, DirectChoice::Off) => None,
        (
            DirectIo::Supported {
                mem_align,
                offset_align,
                ..
            },
            _,
        ) => Some(((*mem_align).max(4096), *offset_align)),
        (DirectIo::Unsupported(_), _) => None,
    };
    let mut setup = Setup {
        file: work.path().join("data"),
        file_bytes,
        sizing,
        dio,
        // An overlay has no device of its own: the upper directory's is the one written.
        device: target::device_info(&dir).or_else(|| {
            overlay
                .as_ref()
                .and_then(|o| target::device_info(Path::new(&o.upperdir)))
        }),
        overlay,
        fs,
        layout: Layout::Buffered,
    };
    let (engines, engine_note) = engines_for(&cfg.engines);
    runner.plan(cfg.cases.len() * engines.len() * 3);
    let cases: Vec<(CaseSpec, EngineKind)> = cfg
        .cases
        .iter()
        .flat_map(|c| engines.iter().map(move |&k| (*c, k)))
        .collect();
    match lay_out(&setup.file, file_bytes, cfg.verify, cfg.seed, layout_direct) {
        Ok(layout) => setup.layout = layout,
        Err(e) => {
            for (c, k) in &cases {
                runner.skip(&throughput_case(c, *k, false, file_bytes, cfg), &e)?;
            }
            return Ok(());
        }
    }
    // I/O threads are not pinned (fio's default): they sleep on completions, and pinning one to
    // the CPU that services the device's interrupts cost a third of the QD1 IOPS on the test
    // VM (BENCHMARKS.md); the scheduler keeps them off a busy CPU.
    let order: Vec<usize> = Vec::new();
    for (i, (c, kind)) in cases.into_iter().enumerate() {
        run_one(
            runner,
            cfg,
            &setup,
            &c,
            kind,
            engine_note.as_deref(),
            &order,
            spec,
            cfg.reference.wants(i == 0),
        )?;
    }
    drop(work);
    Ok(())
}

fn throughput_case(
    c: &CaseSpec,
    kind: EngineKind,
    direct: bool,
    file: u64,
    cfg: &DiskConfig,
) -> Case {
    case_for(
        "disk.throughput",
        Metric::Throughput,
        "B/s",
        c,
        kind,
        direct,
        file,
        cfg,
    )
}

#[allow(clippy::too_many_arguments)]
fn case_for(
    bench: &str,
    metric: Metric,
    unit: &str,
    c: &CaseSpec,
    kind: EngineKind,
    direct: bool,
    file_bytes: u64,
    cfg: &DiskConfig,
) -> Case {
    let mut case = Case::new(bench, metric, unit)
        .param("op", c.op.name())
        .param("block_bytes", c.block)
        .param("threads", c.threads)
        .param("iodepth", c.iodepth)
        .param("engine", kind.name())
        .param("direct", direct)
        .param("file_bytes", file_bytes)
        .param("pages", cfg.pages.name());
    if c.op.mixed() {
        case = case.param("rwmix_read", cfg.rwmix_read);
    }
    case
}

/// `extra.io_buffers` of a record: the page size asked for and what the kernel granted, and a
/// warning when huge pages were asked for and not (all) granted, since the device then sees
/// the scattered segments of 4 KiB pages (see the engine's `BufPool`).
fn io_buffers(pages: Pages, bytes: u64, huge: Option<u64>) -> (serde_json::Value, Option<String>) {
    let fraction = huge.map(|h| h as f64 / bytes.max(1) as f64);
    let info = json!({
        "pages": pages.name(),
        "bytes": bytes,
        "huge_bytes": huge,
        "huge_fraction": fraction,
    });
    let note = match (pages, fraction) {
        (Pages::Huge, Some(f)) if f < 1.0 => Some(format!(
            "huge pages asked for the I/O buffers, {:.0} % granted (transparent huge pages off or \
             memory fragmented: see /sys/kernel/mm/transparent_hugepage/enabled); the rest are \
             4 KiB pages, so large blocks reach the device in more, smaller DMA segments",
            f * 100.0
        )),
        (Pages::Huge, None) => Some(
            "huge pages asked for the I/O buffers; whether they were granted is unknown \
             (/proc/self/smaps unreadable)"
                .to_owned(),
        ),
        _ => None,
    };
    (info, note)
}

#[allow(clippy::too_many_arguments)]
fn run_one(
    runner: &mut Runner,
    cfg: &DiskConfig,
    setup: &Setup,
    c: &CaseSpec,
    kind: EngineKind,
    engine_note: Option<&str>,
    order: &[usize],
    spec: &Spec,
    with_reference: bool,
) -> Result<(), BenchError> {
    let (direct, mem_align, cache_mode, direct_note) = match cfg.direct {
        DirectChoice::Off => (false, 4096, "buffered-evicted", None),
        _ => match aligned_for_direct(c, &setup.dio) {
            Ok(align) => (true, align, "direct", None),
            Err(why) => (
                false,
                4096,
                "buffered-evicted",
                Some(format!(
                    "O_DIRECT not used ({why}): buffered I/O with the file evicted from the page \
                     cache before every sample"
                )),
            ),
        },
    };
    let tp_case = throughput_case(c, kind, direct, setup.file_bytes, cfg);
    let iops_case = case_for(
        "disk.iops",
        Metric::Throughput,
        "IO/s",
        c,
        kind,
        direct,
        setup.file_bytes,
        cfg,
    );
    let lat_case = case_for(
        "disk.latency",
        Metric::Latency,
        "s",
        c,
        kind,
        direct,
        setup.file_bytes,
        cfg,
    );
    let deadline = cfg.io_bytes.is_none().then_some(cfg.duration);
    if !cfg.ramp.is_zero() {
        // Untimed: lets SSD caches, the scheduler and the filesystem reach their steady state.
        let ramp_cfg = DiskConfig {
            io_bytes: None,
            ..cfg.clone()
        };
        if let Err(e) = one_sample(
            setup,
            &ramp_cfg,
            c,
            kind,
            direct,
            mem_align,
            order,
            Some(cfg.ramp),
            0,
        ) {
            return skip_all(runner, &[&tp_case, &iops_case, &lat_case], &e);
        }
    }
    // Every sample's full outcome, for the derived records (iops, latency) and the extras.
    let hists: RefCell<Vec<SampleOut>> = RefCell::new(Vec::new());
    let counter = std::cell::Cell::new(1u64);
    let mut derived: Vec<Record> = Vec::new();
    let device = setup.device.clone();
    let fs = setup.fs.clone();
    let overlay = &setup.overlay;
    let sizing = &setup.sizing;
    let layout = setup.layout;
    // The runner's warm-up samples come first. They bring the device, the scheduler and the
    // filesystem to a steady state (fio's ramp_time) and are never measured, so they run a
    // quarter of a sample: a full 2 s warm-up per case was 10 of the standard run's 43 s of disk.
    let warmups = runner.config().warmup as u64;
    runner.run_case(
        &tp_case,
        || {
            let n = counter.get();
            counter.set(n + 1);
            let limit = match deadline {
                Some(d) if n <= warmups => Some(d / 4),
                other => other,
            };
            let s = one_sample(setup, cfg, c, kind, direct, mem_align, order, limit, n)?;
            let iops = s.ios as f64 / s.wall_s;
            let p50 = s.lat.percentile_ns(50.0) as f64 / 1e9;
            let rate = s.bytes as f64 / s.wall_s;
            hists.borrow_mut().push(s);
            Ok(Sample::new(rate)
                .with("iops", iops)
                .with("latency_p50_s", p50))
        },
        |rec| {
            // The runner's warm-up sample is the first entry: leave it out.
            let all = hists.borrow();
            let warm = all.len().saturating_sub(rec.samples.len());
            let measured = &all[warm..];
            // What the warm-ups took (fio's ramp_time): a quarter of a sample each in duration
            // mode (see above); in amount mode (--io-size) they move the full amount.
            let warmup_s: f64 = all[..warm].iter().map(|h| h.wall_s).sum();
            let iops: Vec<f64> = measured.iter().map(|h| h.ios as f64 / h.wall_s).collect();
            let p50s: Vec<f64> = measured
                .iter()
                .map(|h| h.lat.percentile_ns(50.0) as f64 / 1e9)
                .collect();
            let mut lat = LatencyHist::new();
            let (mut rl, mut wl) = (LatencyHist::new(), LatencyHist::new());
            for h in measured {
                lat.merge(&h.lat);
                rl.merge(&h.read_lat);
                wl.merge(&h.write_lat);
            }
            // The sample with the fewest huge pages speaks for the case (they rarely differ).
            let buffers = measured
                .iter()
                .min_by_key(|h| h.buffer_huge_bytes.unwrap_or(0))
                .map(|h| io_buffers(cfg.pages, h.buffer_bytes, h.buffer_huge_bytes));
            let common = |r: &mut Record| {
                r.extra.insert("cache_mode".into(), json!(cache_mode));
                r.extra.insert("layout".into(), json!(layout.name()));
                if warm > 0 {
                    r.extra.insert("warmup_seconds".into(), json!(warmup_s));
                }
                r.extra.insert("fs_type".into(), json!(fs.fs_type));
                r.extra.insert("sizing".into(), sizing.json());
                if let Some(n) = &sizing.note {
                    r.warnings.push(n.clone());
                }
                if let Some(d) = &device {
                    r.extra.insert("device".into(), json!(d));
                    if d.stack.is_some() {
                        r.extra.insert("device_chain".into(), json!(d.chain()));
                    }
                    // Through a loop device with direct I/O or a one-member dm/md stack, the
                    // device below bounds the figure: its rotational flag and link, not the
                    // stacked device's (a loop device says rotational whatever it is on).
                    let lim = d.limits();
                    if lim.name != d.name {
                        r.extra.insert(
                            "limits_device".into(),
                            json!({
                                "name": lim.name,
                                "model": lim.model,
                                "rotational": lim.rotational,
                                "interface": lim.interface,
                            }),
                        );
                    }
                    if let Some(n) = d.memory_note() {
                        r.warnings.push(n);
                    }
                }
                r.extra.insert("verify".into(), json!(cfg.verify));
                r.extra.insert("sync_writes".into(), json!(cfg.sync_writes));
                if let Some((info, note)) = &buffers {
                    r.extra.insert("io_buffers".into(), info.clone());
                    if let Some(n) = note {
                        r.warnings.push(n.clone());
                    }
                }
                match cfg.io_bytes {
                    Some(b) => r.extra.insert("io_bytes_per_sample".into(), json!(b)),
                    None => r.extra.insert("sample_seconds".into(), json!(cfg.duration.as_secs_f64())),
                };
                match &overlay {
                    Some(o) => {
                        r.extra.insert("overlay_upper".into(), json!(o));
                        r.warnings.push(o.note());
                    }
                    None => {
                        if let Some(n) = fs.caching_note() {
                            r.warnings.push(n.to_string());
                        }
                    }
                }
                if let Some(n) = &direct_note {
                    r.warnings.push(n.clone());
                }
                if let Some(n) = engine_note {
                    r.warnings.push(n.to_string());
                }
                if kind == EngineKind::Psync && c.iodepth > 1 {
                    r.warnings.push(format!(
                        "psync keeps one I/O in flight per thread: iodepth {} has no effect (as in fio)",
                        c.iodepth
                    ));
                }
            };
            common(rec);
            if let Some(iv) = cfg.interval {
                rec.extra
                    .insert("interval_seconds".into(), json!(iv.as_secs_f64()));
                let series: Vec<&Vec<f64>> = measured.iter().map(|h| &h.intervals).collect();
                rec.extra.insert("interval_bytes_per_s".into(), json!(series));
            }
            let write = c.op.writes() && !c.op.reads();
            rec.set_peak(target::disk_peak(device.as_ref(), spec, write, false));
            let mut ir = record_from_samples(&iops_case, iops);
            common(&mut ir);
            ir.set_peak(target::disk_peak(device.as_ref(), spec, write, true));
            let mut lr = record_from_samples(&lat_case, p50s);
            common(&mut lr);
            let s = lat.fill_stats(&mut lr.stats);
            lr.extra.insert("completion_latency".into(), json!(s));
            // Little's law: the queue depth actually kept (fio reports the same as its depth
            // distribution); below iodepth × threads when the workload or the device
            // stalls submission.
            let iops_median = ir.value;
            lr.extra.insert(
                "achieved_depth".into(),
                json!(iops_median * s.mean),
            );
            if c.op.mixed() {
                lr.extra.insert("read_latency".into(), json!(rl.summary()));
                lr.extra.insert("write_latency".into(), json!(wl.summary()));
            }
            lr.extra.insert("measures".into(), json!("completion latency, submit to completion, per I/O; value = median of the samples' p50"));
            if with_reference {
                let at = Twin {
                    mem_align,
                    order,
                    deadline,
                };
                fio_beside(cfg, setup, c, kind, direct, &at, rec, &mut ir, &mut lr);
            }
            derived.push(ir);
            derived.push(lr);
        },
    )?;
    if derived.is_empty() {
        // The measurement produced nothing (ENOSPC, EIO, budget…): the IOPS and latency records
        // are skipped with the same kind and reason as the throughput record.
        if let Some(skip) = runner.result().skipped.last().cloned() {
            runner.skip_with(&iops_case, &skip.kind, &skip.reason)?;
            runner.skip_with(&lat_case, &skip.kind, &skip.reason)?;
        }
    }
    for r in derived {
        runner.commit(r)?;
    }
    Ok(())
}

/// What a twin sample of a case needs beyond its configuration.
struct Twin<'a> {
    mem_align: usize,
    order: &'a [usize],
    deadline: Option<Duration>,
}

/// hostbench's twin of a case with fio's 4 KiB I/O buffers, `runs` samples: (B/s, IO/s, p50 s)
/// medians, for a like-for-like ratio where fio could not get huge pages.
fn twin_on_small_pages(
    cfg: &DiskConfig,
    setup: &Setup,
    c: &CaseSpec,
    kind: EngineKind,
    direct: bool,
    at: &Twin<'_>,
    runs: usize,
) -> Option<(f64, f64, f64)> {
    let small = DiskConfig {
        pages: Pages::Small,
        ..cfg.clone()
    };
    let mut figs = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..runs.max(1) {
        let s = one_sample(
            setup,
            &small,
            c,
            kind,
            direct,
            at.mem_align,
            at.order,
            at.deadline,
            (1 << 16) + i as u64,
        )
        .ok()?;
        figs.0.push(s.bytes as f64 / s.wall_s);
        figs.1.push(s.ios as f64 / s.wall_s);
        figs.2.push(s.lat.percentile_ns(50.0) as f64 / 1e9);
    }
    let med = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    Some((med(figs.0), med(figs.1), med(figs.2)))
}

/// fio with the case's parameters on the same file, as many runs as the case had samples; its
/// figures become the three records' references, its command line `extra.reference_command`.
/// A missing or failing fio is a warning on the records, never a failed case.
///
/// Where fio cannot have hostbench's huge-page buffers (no free hugetlb pages) and the block is
/// large enough for pages to matter, hostbench also runs the case's twin on 4 KiB buffers, and
/// the reference ratio is that twin's against fio (like for like); the headline stays the
/// huge-page figure, its ratio and the reason it is higher kept in `extra.like_for_like`.
#[allow(clippy::too_many_arguments)]
fn fio_beside(
    cfg: &DiskConfig,
    setup: &Setup,
    c: &CaseSpec,
    kind: EngineKind,
    direct: bool,
    at: &Twin<'_>,
    tp: &mut Record,
    iops: &mut Record,
    lat: &mut Record,
) {
    let huge = reference::hugetlb_free_for(c);
    let args = reference::fio_args(c, kind, direct, &setup.file, setup.file_bytes, cfg, huge);
    let command = format!("fio {}", args.join(" "));
    let limit = cfg.duration + cfg.ramp + Duration::from_secs(60);
    // Beside the headline alone (`run`'s default): one fio run, cheap; with --reference as many
    // runs as the case had samples.
    let runs = match cfg.reference {
        hostbench_core::subsystem::ReferenceScope::All => tp.samples.len(),
        _ => 1,
    };
    let outcome = reference::run_fio(&args, runs, limit).and_then(|runs| {
        reference::references(
            &runs,
            &reference::fio_version(),
            (tp.value, iops.value, lat.value),
        )
    });
    // One 4 KiB page holds a small block whole: buffer pages only matter for large ones.
    let buffers_differ = cfg.pages == Pages::Huge && !huge && c.block > 64 << 10;
    let twin = if buffers_differ && outcome.is_ok() {
        twin_on_small_pages(cfg, setup, c, kind, direct, at, runs)
    } else {
        None
    };
    let why_apart = if buffers_differ {
        "fio's I/O buffers were 4 KiB pages, hostbench's huge pages: a large block from scattered \
         pages reaches a virtio disk as many DMA segments (reserve vm.nr_hugepages, or run both \
         with --pages 4k, for like for like)"
    } else {
        "fio ran right after hostbench, same parameters, same file: a virtual disk's throughput \
         moves by more than 10 % between runs (host cache, other tenants); compare medians over \
         several runs (scripts/bench/disk-vs-fio)"
    };
    match outcome {
        Ok((rt, ri, rl)) => {
            let twins = twin.map(|t| [t.0, t.1, t.2]);
            for (i, (r, reference)) in [(tp, Some(rt)), (iops, Some(ri)), (lat, rl)]
                .into_iter()
                .enumerate()
            {
                if let (Some(t), Some(mut x)) = (twins.map(|t| t[i]), reference.clone()) {
                    let like = match r.metric {
                        hostbench_core::model::Metric::Throughput => t / x.value,
                        hostbench_core::model::Metric::Latency => x.value / t,
                    };
                    r.extra.insert(
                        "like_for_like".into(),
                        json!({
                            "setting": "pages=4k",
                            "hostbench": t,
                            "ratio": like,
                            "headline_ratio": x.ratio,
                            "why_higher": "the headline uses huge-page I/O buffers, which \
                                fio could not have here (no free hugetlb pages for \
                                --iomem=shmhuge): a large block from scattered 4 KiB pages \
                                reaches a virtio disk as many DMA segments",
                        }),
                    );
                    x.ratio = like;
                    hostbench_core::reference::attach(r, Ok(x), &command, why_apart);
                    continue;
                }
                if buffers_differ {
                    r.warnings.push(
                        "fio's I/O buffers are 4 KiB pages (no free hugetlb pages for \
                         --iomem=shmhuge: reserve them with vm.nr_hugepages), hostbench's are \
                         huge pages: large blocks may differ for that alone"
                            .into(),
                    );
                }
                if let Some(x) = reference {
                    hostbench_core::reference::attach(r, Ok(x), &command, why_apart);
                }
            }
        }
        Err(e) => {
            for r in [tp, iops, lat] {
                r.warnings.push(format!("reference not measured: {e}"));
            }
        }
    }
}

fn skip_all(runner: &mut Runner, cases: &[&Case], e: &BenchError) -> Result<(), BenchError> {
    if let BenchError::InvalidInput(_) = e {
        return Err(BenchError::invalid(e.to_string()));
    }
    for c in cases {
        runner.skip(c, e)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::FileExt;

    #[test]
    fn io_buffers_say_what_was_granted_and_warn_when_huge_pages_fell_short() {
        let (info, note) = io_buffers(Pages::Huge, 8 << 20, Some(8 << 20));
        assert_eq!(info["pages"], "huge");
        assert_eq!(info["huge_fraction"], 1.0);
        assert!(note.is_none());
        let (info, note) = io_buffers(Pages::Huge, 8 << 20, Some(2 << 20));
        assert_eq!(info["huge_fraction"], 0.25);
        let note = note.expect("warning");
        assert!(note.contains("25 % granted"));
        // One sentence with single spaces (a lost line continuation once left runs of 14).
        assert!(!note.contains("  "), "{note}");
        let (_, note) = io_buffers(Pages::Huge, 8 << 20, None);
        let note = note.expect("warning");
        assert!(note.contains("unknown") && !note.contains("  "), "{note}");
        // 4k was asked for: nothing to warn about, and no huge pages claimed.
        let (info, note) = io_buffers(Pages::Small, 4096, Some(0));
        assert_eq!(info["pages"], "4k");
        assert_eq!(info["huge_bytes"], 0);
        assert!(note.is_none());
    }

    /// Pages of `f` in the page cache now (mincore over a read-only mapping, which faults
    /// nothing in).
    fn resident_pages(f: &File) -> usize {
        let len = f.metadata().map_or(0, |m| m.len()) as usize;
        if len == 0 {
            return 0;
        }
        // SAFETY: a fresh read-only shared mapping of an open file; it is only passed to mincore
        // and unmapped below, never read through.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                f.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return 0;
        }
        let mut vec = vec![0u8; len.div_ceil(4096)];
        // SAFETY: p..p+len is the mapping made above; vec has one byte per 4 KiB page of it.
        let rc = unsafe { libc::mincore(p, len, vec.as_mut_ptr()) };
        // SAFETY: p and len are exactly what mmap returned and was given.
        unsafe { libc::munmap(p, len) };
        assert_eq!(rc, 0, "mincore: {}", std::io::Error::last_os_error());
        vec.iter().filter(|&&b| b & 1 == 1).count()
    }

    /// The O_DIRECT alignments of a fresh temporary directory whose O_DIRECT reaches a device
    /// (not tmpfs and the like), or `None`.
    fn direct_dir() -> Option<(tempfile::TempDir, (usize, usize))> {
        let dir = tempfile::tempdir().unwrap();
        if target::fs_info(dir.path())
            .unwrap()
            .caching_note()
            .is_some()
        {
            return None;
        }
        match target::direct_io(dir.path()) {
            DirectIo::Supported {
                mem_align,
                offset_align,
                ..
            } => Some((dir, (mem_align.max(4096), offset_align))),
            DirectIo::Unsupported(_) => None,
        }
    }

    /// Issue 31 (2): a file laid out through the page cache took 4 KiB random writes at half the
    /// rate of one written with O_DIRECT, as fio's write pass writes it. Where the cases use
    /// O_DIRECT, not one page of the file may enter the page cache during the layout.
    #[test]
    fn direct_layout_never_puts_the_file_in_the_page_cache() {
        let Some((dir, align)) = direct_dir() else {
            eprintln!("no O_DIRECT to a device in the temporary directory: nothing to check");
            return;
        };
        let path = dir.path().join("data");
        let bytes = 64u64 << 20;
        let stop = std::sync::atomic::AtomicBool::new(false);
        let (layout, seen) = std::thread::scope(|s| {
            let watcher = s.spawn(|| {
                let mut most = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    if let Ok(f) = File::open(&path) {
                        most = most.max(resident_pages(&f));
                    }
                }
                most
            });
            let layout = lay_out(&path, bytes, false, 3, Some(align));
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            (layout, watcher.join().unwrap())
        });
        assert_eq!(
            seen, 0,
            "the layout put {seen} pages of the file in the page cache"
        );
        assert_eq!(layout.unwrap(), Layout::Direct);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), bytes);
    }

    #[test]
    fn direct_layout_writes_every_byte_and_an_unaligned_tail() {
        let Some((dir, align)) = direct_dir() else {
            eprintln!("no O_DIRECT to a device in the temporary directory: nothing to check");
            return;
        };
        let path = dir.path().join("data");
        // Three 1 MiB chunks, a shorter aligned one and 1,000 bytes no O_DIRECT write can take.
        let bytes = (3u64 << 20) + 8192 + 1000;
        assert_eq!(
            lay_out(&path, bytes, true, 5, Some(align)).unwrap(),
            Layout::Direct
        );
        let data = std::fs::read(&path).unwrap();
        assert_eq!(data.len() as u64, bytes);
        workload::check_verified(&data, 0).unwrap();
        // Without O_DIRECT (--direct off) the same bytes go through the page cache.
        let buffered = dir.path().join("buffered");
        assert_eq!(
            lay_out(&buffered, bytes, true, 5, None).unwrap(),
            Layout::Buffered
        );
        assert_eq!(std::fs::read(&buffered).unwrap(), data);
    }

    #[test]
    fn verify_catches_a_corrupted_block_on_disk() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data");
        lay_out(&path, 1 << 20, true, 7, None).unwrap();
        // Flip one byte inside the third 512-byte unit of the second 64 KiB block.
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .unwrap();
        let at = 65536 + 2 * workload::UNIT as u64 + 100;
        let mut b = [0u8; 1];
        f.read_exact_at(&mut b, at).unwrap();
        f.write_all_at(&[b[0] ^ 0xFF], at).unwrap();
        for kind in [EngineKind::Psync, EngineKind::IoUring] {
            if kind == EngineKind::IoUring && engine::io_uring_status().is_err() {
                continue;
            }
            let mut w = workload::Pattern::new(Op::Read, 65536, 0, 1 << 20, 1);
            w.verify = true;
            w.remaining = Some(1 << 20);
            let job = engine::EngineJob {
                interval: None,
                fd: f.as_raw_fd(),
                block_bytes: 65536,
                iodepth: 4,
                mem_align: 4096,
                fdatasync_each_write: false,
                pages: Pages::Huge,
            };
            let e = engine::run_thread(kind, &job, &mut w).unwrap_err();
            assert!(matches!(e, BenchError::Validation(_)), "{e}");
            assert!(
                e.to_string()
                    .contains(&format!("offset {}", 65536 + 2 * workload::UNIT)),
                "{e}"
            );
        }
    }

    fn fs_with(free_mib: u64, total_mib: u64) -> target::FsInfo {
        target::FsInfo {
            fs_type: "ext4".into(),
            magic: 0xEF53,
            free_bytes: free_mib << 20,
            total_bytes: total_mib << 20,
        }
    }

    /// Issue 55 (1): a nearly full filesystem (a 48 MiB ext4 with 37 MiB free) once got a 3 MiB
    /// file, silently, and figures of a cache. The default size never goes below the floor: where
    /// the free space cannot hold it, the run is refused in one line naming the free space and
    /// the remedies.
    #[test]
    fn a_default_file_below_the_floor_is_refused_naming_free_space_and_remedies() {
        let cfg = DiskConfig::default();
        let spec = Spec::default();
        let d = Path::new("/mnt/small");
        let e = size_file(&cfg, d, &fs_with(37, 48), &spec, 1 << 20).unwrap_err();
        assert!(matches!(e, BenchError::InvalidInput(_)), "{e}");
        let m = e.to_string();
        assert!(!m.contains('\n'), "{m}");
        for part in [
            "refused: ",
            "at least 256 MiB",
            "37.0 MiB is free on /mnt/small",
            "--dir",
            "--size",
        ] {
            assert!(m.contains(part), "{part:?} not in {m}");
        }
        // 1.5 GiB free of 100 GiB: a tenth (153 MiB) is below the floor, the floor fits beside
        // the 1 GiB margin, so the file is the floor, and said to be smaller than the default.
        let s = size_file(&cfg, d, &fs_with(1536, 102_400), &spec, 1 << 20).unwrap();
        assert_eq!(s.used, MIN_FILE_BYTES);
        let note = s.note.clone().unwrap();
        assert!(
            note.starts_with(
                "working file 256 MiB, not the 1.00 GiB default: the floor, more than a tenth of \
                 the 1.50 GiB free on /mnt/small"
            ),
            "{note}"
        );
        let j = s.json();
        assert_eq!(j["limited_by"], "free_space");
        assert_eq!(j["asked_by"], "default");
        assert_eq!(j["free"], 1536u64 << 20);
        assert_eq!(j["below_floor"], false);
        // 5 GiB free of 100 GiB: a tenth, 512 MiB.
        let s = size_file(&cfg, d, &fs_with(5120, 102_400), &spec, 1 << 20).unwrap();
        assert_eq!(s.used, 512 << 20);
        let note = s.note.unwrap();
        assert!(
            note.contains("default: a tenth of the 5.00 GiB free"),
            "{note}"
        );
        // Plenty of space: the default, nothing to say.
        let s = size_file(&cfg, d, &fs_with(102_400, 204_800), &spec, 1 << 20).unwrap();
        assert_eq!((s.used, s.note.is_none()), (DEFAULT_FILE_BYTES, true));
        assert_eq!(s.json()["limited_by"], serde_json::Value::Null);
        // The widest case's threads x block can raise it above the floor.
        let e = size_file(&cfg, d, &fs_with(1536, 102_400), &spec, 600 << 20).unwrap_err();
        assert!(
            e.to_string().contains("the widest case's threads x block"),
            "{e}"
        );
    }

    #[test]
    fn a_cache_in_the_spec_file_raises_the_floor_to_twice_it() {
        let mut spec = Spec::default();
        spec.disk.cache_bytes = Some(1 << 30);
        let cfg = DiskConfig::default();
        let d = Path::new("/d");
        let s = size_file(&cfg, d, &fs_with(102_400, 204_800), &spec, 1 << 20).unwrap();
        assert_eq!((s.floor, s.used, s.asked), (2 << 30, 2 << 30, 2 << 30));
        assert!(
            s.floor_basis.contains("disk.cache_bytes"),
            "{}",
            s.floor_basis
        );
        let e = size_file(&cfg, d, &fs_with(2048, 204_800), &spec, 1 << 20).unwrap_err();
        assert!(
            e.to_string()
                .contains("at least 2.00 GiB (twice the 1.00 GiB cache"),
            "{e}"
        );
        // A cache below half the fixed minimum leaves the minimum.
        spec.disk.cache_bytes = Some(64 << 20);
        assert_eq!(size_floor(&spec).0, MIN_FILE_BYTES);
    }

    /// A small file asked for with --size runs (the user asked; the tests rely on it), marked.
    #[test]
    fn an_explicit_small_file_is_honoured_and_marked() {
        let dir = tempfile::tempdir().unwrap();
        let fs = target::fs_info(dir.path()).unwrap();
        let cfg = DiskConfig {
            file_bytes: Some(8 << 20),
            ..DiskConfig::default()
        };
        let s = size_file(&cfg, dir.path(), &fs, &Spec::default(), 1 << 20).unwrap();
        assert_eq!(s.used, 8 << 20);
        let note = s.note.clone().unwrap();
        assert!(
            note.starts_with(
                "working file 8.00 MiB (asked with --size) is below the 256 MiB floor"
            ),
            "{note}"
        );
        let j = s.json();
        assert_eq!(
            (j["asked_by"].as_str(), j["below_floor"].as_bool()),
            (Some("--size"), Some(true))
        );
        assert_eq!(j["limited_by"], serde_json::Value::Null);
        // Above the floor: no mark.
        let cfg = DiskConfig {
            file_bytes: Some(MIN_FILE_BYTES),
            ..cfg
        };
        if fs.free_bytes > 4 * MIN_FILE_BYTES {
            let s = size_file(&cfg, dir.path(), &fs, &Spec::default(), 1 << 20).unwrap();
            assert!(s.note.is_none());
        }
    }

    #[test]
    fn default_cases_are_the_fio_presets_and_lists_multiply() {
        let d = default_cases();
        assert_eq!(d.len(), 5);
        assert_eq!((d[0].op, d[0].block, d[0].iodepth), (Op::Read, 1 << 20, 8));
        assert_eq!(
            (d[3].op, d[3].block, d[3].iodepth),
            (Op::RandRead, 4096, 32)
        );
        let c = cases_from(&[Op::Read, Op::RandWrite], None, &[1, 2], &[1, 8]);
        assert_eq!(c.len(), 8);
        assert_eq!(c[4].block, 4096);
        let bad = DiskConfig {
            cases: vec![CaseSpec {
                op: Op::Read,
                block: 0,
                threads: 1,
                iodepth: 1,
            }],
            ..DiskConfig::default()
        };
        assert!(matches!(bad.validate(), Err(BenchError::InvalidInput(_))));
    }
}

//! The disk driver: sizing the file, running each case (op × block × threads × depth × engine)
//! through the runner into throughput, IOPS and latency records, the small-page twin and fio
//! beside it. Moved out of `lib.rs` so the crate root is a facade (issue 53).

use std::cell::RefCell;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use hostbench_core::buffer::Pages;
use hostbench_core::model::{Host, Metric, Record, Work};
use hostbench_core::runner::record_from_samples;
use hostbench_core::spec::Spec;
use hostbench_core::units::format_bytes_iec;
use hostbench_core::{parallel, BenchError, Case, Runner, Sample};
use serde_json::json;

use crate::engine::EngineKind;
use crate::histogram::LatencyHist;
use crate::layout::*;
use crate::place::{self, DirectIo};
use crate::workload::{self};
use crate::*;

/// Where and how the cases run, decided once per run.
pub(crate) struct Setup {
    pub(crate) file: PathBuf,
    pub(crate) file_bytes: u64,
    /// How `file_bytes` was chosen (`extra.sizing`), and the note when it is below the floor or
    /// smaller than asked.
    pub(crate) sizing: Sizing,
    pub(crate) dio: DirectIo,
    pub(crate) fs: place::FsInfo,
    pub(crate) device: Option<place::DeviceInfo>,
    /// The overlay's upper directory, where `dir` is on an overlay this namespace can see.
    pub(crate) overlay: Option<place::OverlayUpper>,
    /// How the data file was written.
    pub(crate) layout: Layout,
}

/// What one sample measured, over all threads.
pub(crate) struct SampleOut {
    pub(crate) wall_s: f64,
    pub(crate) bytes: u64,
    pub(crate) ios: u64,
    pub(crate) lat: LatencyHist,
    pub(crate) read_lat: LatencyHist,
    pub(crate) write_lat: LatencyHist,
    /// Throughput per interval (B/s), summed over the threads, when `--interval` was given.
    pub(crate) intervals: Vec<f64>,
    /// Every thread's I/O buffers: bytes, and bytes on huge pages (`None`: unknown).
    pub(crate) buffer_bytes: u64,
    pub(crate) buffer_huge_bytes: Option<u64>,
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn one_sample(
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
        place::evict_cache(f.as_raw_fd()).map_err(|e| BenchError::io(&setup.file, e))?;
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
pub(crate) fn engines_for(choice: &EngineChoice) -> (Vec<EngineKind>, Option<String>) {
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
pub(crate) fn size_floor(spec: &Spec) -> (u64, String) {
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
pub(crate) struct Sizing {
    /// What was asked: `--size`, or the default (1 GiB, or the floor where that is larger).
    pub(crate) asked: u64,
    pub(crate) explicit: bool,
    /// Free space on the filesystem before the file was written.
    pub(crate) free: u64,
    pub(crate) used: u64,
    pub(crate) floor: u64,
    pub(crate) floor_basis: String,
    /// A warning for every record: the file is below the floor (asked for explicitly) or smaller
    /// than asked (free space).
    pub(crate) note: Option<String>,
}

impl Sizing {
    pub(crate) fn json(&self) -> serde_json::Value {
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
pub(crate) fn size_file(
    cfg: &DiskConfig,
    dir: &Path,
    fs: &place::FsInfo,
    spec: &Spec,
    min_bytes: u64,
) -> Result<Sizing, BenchError> {
    let (floor, floor_basis) = size_floor(spec);
    if let Some(b) = cfg.file_bytes {
        place::check_free_space(dir, b, "the data file (--size)")?;
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
    let usable = place::usable_bytes(fs);
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
pub(crate) fn three_cases(c: &CaseSpec, kind: EngineKind, cfg: &DiskConfig) -> [Case; 3] {
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
    let dir = place::check_dir(&cfg.dir)?;
    let fs = place::fs_info(&dir)?;
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
        .then(|| place::overlay_upper(&dir))
        .flatten();
    let dio = place::direct_io(&dir);
    if cfg.direct == DirectChoice::On {
        for c in &cfg.cases {
            aligned_for_direct(c, &dio)
                .map_err(|why| BenchError::invalid(format!("--direct on: {why}")))?;
        }
    }
    let work = place::WorkDir::create(&dir)?;
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
        device: place::device_info(&dir).or_else(|| {
            overlay
                .as_ref()
                .and_then(|o| place::device_info(Path::new(&o.upperdir)))
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

pub(crate) fn throughput_case(
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
pub(crate) fn case_for(
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
        .work(Work::Storage)
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
pub(crate) fn io_buffers(
    pages: Pages,
    bytes: u64,
    huge: Option<u64>,
) -> (serde_json::Value, Option<String>) {
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
pub(crate) fn run_one(
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
            rec.set_peak(place::disk_peak(device.as_ref(), spec, write, false));
            let mut ir = record_from_samples(&iops_case, iops);
            common(&mut ir);
            ir.set_peak(place::disk_peak(device.as_ref(), spec, write, true));
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
pub(crate) struct Twin<'a> {
    pub(crate) mem_align: usize,
    pub(crate) order: &'a [usize],
    pub(crate) deadline: Option<Duration>,
}

/// hostbench's twin of a case with fio's 4 KiB I/O buffers, `runs` samples: (B/s, IO/s, p50 s)
/// medians, for a like-for-like ratio where fio could not get huge pages.
pub(crate) fn twin_on_small_pages(
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
pub(crate) fn fio_beside(
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

pub(crate) fn skip_all(
    runner: &mut Runner,
    cases: &[&Case],
    e: &BenchError,
) -> Result<(), BenchError> {
    if let BenchError::InvalidInput(_) = e {
        return Err(BenchError::invalid(e.to_string()));
    }
    for c in cases {
        runner.skip(c, e)?;
    }
    Ok(())
}

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
//!
//! This file is the crate's facade: configuration, the case lists and `pub use`; the driver
//! (`run_disk`, sizing, each case's samples) is in `run.rs`, the data file's layout in
//! `layout.rs` (issue 53).

pub mod burn;
pub mod engine;
mod layout;
pub mod reference;
mod run;
pub use hostbench_core::histogram;
pub mod place;
pub mod subsystem;
/// The module's old name (it was `target/`, which build tools and readers take for Cargo's
/// output directory); kept so code written against `hostbench_disk::target` still compiles.
pub use place as target;
pub mod workload;

pub(crate) use layout::slice_bytes;
pub use run::run_disk;
pub use subsystem::Disk;

use std::path::PathBuf;
use std::time::Duration;

use hostbench_core::buffer::Pages;
use hostbench_core::BenchError;

pub use engine::EngineKind;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::*;
    use crate::place::DirectIo;
    use crate::run::*;
    use hostbench_core::spec::Spec;
    use std::fs::{File, OpenOptions};
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::FileExt;
    use std::path::Path;

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
        if place::fs_info(dir.path()).unwrap().caching_note().is_some() {
            return None;
        }
        match place::direct_io(dir.path()) {
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

    fn fs_with(free_mib: u64, total_mib: u64) -> place::FsInfo {
        place::FsInfo {
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
        let fs = place::fs_info(dir.path()).unwrap();
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

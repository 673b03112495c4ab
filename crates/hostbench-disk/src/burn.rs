//! The disk's burn-in: write a file of checksummed 512-byte units (`workload::fill_verified`:
//! each unit carries its own offset, the pass's seed and a checksum), flush it to the device,
//! drop it from the page cache, read it back and verify every unit; again with a new seed until
//! the time is up. A unit that comes back wrong names its file offset and what was wrong with
//! it (no header, written for another offset, a stale pass, a checksum mismatch).
//!
//! Safety as for the benchmark: it writes only inside a fresh `hostbench-burn-*` directory under
//! the directory given, removed afterwards whatever happened, and never more than a quarter of
//! the free space.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use hostbench_core::burn::{Mismatch, TimelinePoint, UnitRun};
use hostbench_core::BenchError;

use crate::workload::{check_verified, fill_verified};

/// The burn's chunk: large enough to stream, small enough to keep in memory twice.
const CHUNK: usize = 1 << 20;
/// The file's size when free space allows: above a disk's own buffer and most controller caches.
const FILE_BYTES: u64 = 256 << 20;

/// A disk burn: where, how long, how often to note the rate.
#[derive(Debug, Clone)]
pub struct DiskBurnConfig {
    /// The directory the scratch directory is made in (the user's `--disk-dir`).
    pub dir: PathBuf,
    pub duration: Duration,
    pub interval: Duration,
}

/// What the disk burn did: its unit and the timeline of its rate.
#[derive(Debug, Clone)]
pub struct DiskBurn {
    pub unit: UnitRun,
    pub timeline: Vec<TimelinePoint>,
}

/// The scratch directory, removed when dropped (also on an error or a panic).
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Run the disk burn in `cfg.dir`.
pub fn run(cfg: &DiskBurnConfig) -> Result<DiskBurn, BenchError> {
    if !cfg.dir.is_dir() {
        return Err(BenchError::invalid(format!(
            "--disk-dir {}: not a directory",
            cfg.dir.display()
        )));
    }
    let free = free_bytes(&cfg.dir)?;
    let bytes = (FILE_BYTES.min(free / 4) / CHUNK as u64) * CHUNK as u64;
    if bytes == 0 {
        return Err(BenchError::invalid(format!(
            "--disk-dir {}: only {free} bytes free, too little for a burn file",
            cfg.dir.display()
        )));
    }
    let scratch = Scratch(
        cfg.dir
            .join(format!("hostbench-burn-{}", std::process::id())),
    );
    std::fs::create_dir(&scratch.0).map_err(|e| BenchError::io(&scratch.0, e))?;
    let path = scratch.0.join("burn.dat");
    let mut unit = UnitRun::new(
        "disk",
        &cfg.dir.display().to_string(),
        "all",
        "write-read-verify",
        "B/s",
    );
    let mut timeline = Vec::new();
    let t0 = Instant::now();
    let mut moved = 0u64;
    let mut mark = (Instant::now(), 0u64);
    // The CPU clock, temperature and others' CPU time beside each interval, as the CPU and
    // memory burns have them (the I/O path runs on the CPUs too).
    let mut probe = hostbench_core::burn::Probe::start();
    let mut pass = 0u64;
    let mut buf = vec![0u8; CHUNK];
    while t0.elapsed() < cfg.duration || pass == 0 {
        pass += 1;
        let seed = 0x6275_726e_0000_0000 ^ pass;
        write_pass(&path, bytes, seed, &mut buf)?;
        moved += bytes;
        read_pass(&path, bytes, seed, &mut buf, &mut unit)?;
        moved += bytes;
        if mark.0.elapsed() >= cfg.interval {
            let secs = mark.0.elapsed().as_secs_f64();
            timeline.push(probe.read().point(
                t0.elapsed().as_secs_f64(),
                "disk write-read-verify".into(),
                (moved - mark.1) as f64 / secs,
                "B/s".into(),
            ));
            mark = (Instant::now(), moved);
        }
    }
    unit.seconds = t0.elapsed().as_secs_f64();
    unit.rate = moved as f64 / unit.seconds.max(1e-9);
    unit.note = Some(format!(
        "{pass} pass{} over a {} MiB file",
        if pass == 1 { "" } else { "es" },
        bytes >> 20
    ));
    unit.settle();
    Ok(DiskBurn { unit, timeline })
}

/// Write the whole file with this pass's units and push it to the device.
fn write_pass(path: &Path, bytes: u64, seed: u64, buf: &mut [u8]) -> Result<(), BenchError> {
    let mut f = OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(false)
        .open(path)
        .map_err(|e| BenchError::io(path, e))?;
    let mut at = 0u64;
    while at < bytes {
        fill_verified(buf, at, seed);
        f.write_all(buf).map_err(|e| BenchError::io(path, e))?;
        at += buf.len() as u64;
    }
    f.sync_all().map_err(|e| BenchError::io(path, e))?;
    drop_cache(&f);
    Ok(())
}

/// Read the file back and verify every unit; a wrong one is counted with where and what.
fn read_pass(
    path: &Path,
    bytes: u64,
    seed: u64,
    buf: &mut [u8],
    unit: &mut UnitRun,
) -> Result<(), BenchError> {
    let mut f = File::open(path).map_err(|e| BenchError::io(path, e))?;
    f.seek(SeekFrom::Start(0))
        .map_err(|e| BenchError::io(path, e))?;
    let mut at = 0u64;
    while at < bytes {
        f.read_exact(buf).map_err(|e| BenchError::io(path, e))?;
        for (i, piece) in buf.chunks(512).enumerate() {
            let off = at + (i * 512) as u64;
            unit.checks += 1;
            let stale = piece.len() >= 24 && piece[16..24] != seed.to_ne_bytes();
            let verdict = check_verified(piece, off).and_then(|()| {
                if stale {
                    Err(format!(
                        "verify failed at offset {off}: a unit of an earlier pass"
                    ))
                } else {
                    Ok(())
                }
            });
            if let Err(why) = verdict {
                unit.record_error(Mismatch {
                    location: format!("{} offset {off}", path.display()),
                    expected: format!("unit of pass seed {seed:#x}"),
                    got: why,
                    bits: Vec::new(),
                    detail: None,
                });
            }
        }
        at += buf.len() as u64;
    }
    drop_cache(&f);
    Ok(())
}

/// Ask the kernel to drop the file's cached pages, so the read comes from the device.
fn drop_cache(f: &File) {
    // SAFETY: posix_fadvise on a descriptor we own, whole file; advice only, no memory touched.
    unsafe {
        libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED);
    }
}

fn free_bytes(dir: &Path) -> Result<u64, BenchError> {
    let c = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes())
        .map_err(|_| BenchError::invalid(format!("{}: a NUL in the path", dir.display())))?;
    // SAFETY: statvfs fills the struct we pass; the path is a valid C string.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return Err(BenchError::io(dir, std::io::Error::last_os_error()));
    }
    Ok(st.f_bavail as u64 * st.f_frsize as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A short burn verifies every unit and leaves nothing behind; a unit changed on disk
    /// between write and read is found and named by its offset.
    #[test]
    fn a_burn_verifies_and_cleans_up_and_a_changed_unit_is_found() {
        let dir = tempfile::tempdir().expect("tmp");
        let cfg = DiskBurnConfig {
            dir: dir.path().into(),
            duration: Duration::from_millis(1),
            interval: Duration::from_secs(3600),
        };
        let b = run(&cfg).expect("burn");
        assert_eq!(b.unit.errors, 0, "{:?}", b.unit);
        assert!(b.unit.checks > 0);
        assert_eq!(std::fs::read_dir(dir.path()).expect("dir").count(), 0);

        let path = dir.path().join("f");
        let mut buf = vec![0u8; CHUNK];
        write_pass(&path, CHUNK as u64, 7, &mut buf).expect("write");
        let mut bytes = std::fs::read(&path).expect("read");
        bytes[5 * 512 + 100] ^= 0x20;
        std::fs::write(&path, &bytes).expect("corrupt");
        let mut u = UnitRun::new("disk", "t", "all", "write-read-verify", "B/s");
        read_pass(&path, CHUNK as u64, 7, &mut buf, &mut u).expect("read");
        assert_eq!(u.errors, 1);
        let first = u.first_error.expect("first");
        assert!(first.location.ends_with("offset 2560"), "{first:?}");
        assert!(first.got.contains("checksum mismatch"), "{first:?}");
        // Last pass's file read as this pass's: every unit is stale.
        let mut u = UnitRun::new("disk", "t", "all", "write-read-verify", "B/s");
        write_pass(&path, CHUNK as u64, 7, &mut buf).expect("write");
        read_pass(&path, CHUNK as u64, 8, &mut buf, &mut u).expect("read");
        assert_eq!(u.errors, (CHUNK / 512) as u64);
    }
}

//! Whether O_DIRECT works in a directory, and with which alignment; the page-cache eviction used
//! where it does not; the self-removing probe file.
//!
//! Why this is its own module: fio errors out when O_DIRECT is refused and hard-codes nothing about
//! alignment. hostbench finds the alignment the kernel asks for (`direct_io`: statx DIOALIGN, the
//! device's logical block size confirmed by a probe, or a plain 4 KiB probe) rather than assuming
//! 512, and where direct I/O is refused falls back to buffered I/O with the file's pages evicted
//! (`evict_cache`).

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::RawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;

use super::device::{dev_of, logical_block_from, SYS_ROOT};
#[cfg(all(target_os = "linux", any(target_env = "gnu", target_env = "musl")))]
use super::fs::c_path;
use super::fs::fs_info;

/// Size of the block the direct-I/O probe writes: 4 KiB is aligned for every common device
/// (512 and 4096-byte sectors) and is the page size, so it also satisfies pre-6.0 buffer rules.
const PROBE_BLOCK: usize = 4096;

/// Whether O_DIRECT works in a directory, and the alignment it needs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum DirectIo {
    Supported {
        /// Required alignment of the user buffer's address. Since Linux 6.0 this can be as small
        /// as the device's DMA alignment (4 bytes on some NVMe); page-aligned buffers satisfy
        /// every value and avoid split pages, so callers should use `max(4096, mem_align)`.
        mem_align: usize,
        /// Required alignment of file offsets and transfer lengths.
        offset_align: usize,
        /// How it was found: "statx DIOALIGN" | "block device logical_block_size" | "probe".
        source: &'static str,
    },
    /// Why not, in one line (for the "falling back to buffered I/O" warning).
    Unsupported(String),
}

/// Find out whether O_DIRECT works in `dir`, best source first:
/// 1. `statx(STATX_DIOALIGN)` on a file there (Linux ≥ 6.1): authoritative, per file;
/// 2. the backing device's logical block size from sysfs, trusted only once a probe confirms it;
/// 3. a probe: one aligned 4 KiB O_DIRECT write and read-back; EINVAL means no direct I/O.
///
/// A `Supported` answer says only that the kernel accepts O_DIRECT; whether it bypasses caching is
/// `FsInfo::caching_note`'s business (tmpfs ≥ 6.6 accepts O_DIRECT at any alignment).
pub fn direct_io(dir: &Path) -> DirectIo {
    let fs = fs_info(dir)
        .map(|f| f.fs_type)
        .unwrap_or_else(|_| "this filesystem".to_string());
    let probe = match ProbeFile::create(dir) {
        Ok(p) => p,
        Err(e) => {
            return DirectIo::Unsupported(format!(
                "cannot create a direct-I/O probe file in {}: {e}",
                dir.display()
            ));
        }
    };
    if let Some((mem, off)) = statx_dioalign(&probe.path) {
        if mem > 0 && off > 0 {
            return DirectIo::Supported {
                mem_align: mem as usize,
                offset_align: off as usize,
                source: "statx DIOALIGN",
            };
        }
    }
    let lbs = dev_of(dir).and_then(|(maj, min)| {
        logical_block_from(Path::new(SYS_ROOT), maj, min).map(|b| b as usize)
    });
    probe_direct_io(&probe.path, lbs, &fs)
    // `probe` is dropped here, removing the file whatever happened above.
}

/// The probe itself, on an existing empty file. `lbs` is the device's logical block size if known.
fn probe_direct_io(path: &Path, lbs: Option<usize>, fs: &str) -> DirectIo {
    let lbs = lbs.filter(|&b| b > 0);
    // The first transfer must satisfy any plausible device: at least 4 KiB, a multiple of the
    // logical block (real modulo arithmetic: 520/528-byte sectors exist).
    let first = match lbs {
        Some(b) => PROBE_BLOCK.div_ceil(b) * b,
        None => PROBE_BLOCK,
    };
    let file = match open_direct(path) {
        Ok(f) => f,
        Err(e) => return DirectIo::Unsupported(dio_error(fs, "open", &e)),
    };
    if let Err((stage, e)) = write_read_back(&file, 0, first, PROBE_BLOCK) {
        return DirectIo::Unsupported(dio_error(fs, stage, &e));
    }
    // A 4 KiB-aligned transfer working says little about 512-byte ones; before reporting the
    // smaller device alignment, try exactly that: one block at offset `lbs` from a buffer aligned
    // to `lbs` and no more.
    if let Some(b) = lbs.filter(|&b| b < first) {
        if write_read_back(&file, b as u64, b, b).is_ok() {
            return DirectIo::Supported {
                mem_align: b,
                offset_align: b,
                source: "block device logical_block_size",
            };
        }
    }
    DirectIo::Supported {
        mem_align: PROBE_BLOCK,
        offset_align: first,
        source: "probe",
    }
}

fn dio_error(fs: &str, stage: &str, e: &io::Error) -> String {
    if e.raw_os_error() == Some(libc::EINVAL) {
        format!("O_DIRECT not supported by {fs}: {stage}: {e}")
    } else {
        format!("O_DIRECT probe on {fs} failed: {stage}: {e}")
    }
}

#[cfg(any(target_os = "linux", target_os = "android"))]
fn open_direct(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn open_direct(_path: &Path) -> io::Result<File> {
    // macOS's F_NOCACHE does not evict pages already cached, so it is not offered as O_DIRECT.
    Err(io::Error::from_raw_os_error(libc::EINVAL))
}

/// Write `len` bytes at `offset` from a buffer aligned to exactly `align` (not more, so a 512-byte
/// test does not pass by accident of a page-aligned buffer), read them back and compare.
fn write_read_back(
    file: &File,
    offset: u64,
    len: usize,
    align: usize,
) -> Result<(), (&'static str, io::Error)> {
    use std::os::unix::fs::FileExt;
    let mut out = AlignedBuf::new(len, align);
    for (i, b) in out.as_mut().iter_mut().enumerate() {
        // Not all zeros, so a hole or an unwritten extent cannot pass for the data.
        *b = (i % 251) as u8 ^ 0x5A;
    }
    let n = file
        .write_at(out.as_mut(), offset)
        .map_err(|e| ("write", e))?;
    if n != len {
        return Err(("write", short("write", n, len)));
    }
    let mut back = AlignedBuf::new(len, align);
    let n = file
        .read_at(back.as_mut(), offset)
        .map_err(|e| ("read", e))?;
    if n != len {
        return Err(("read", short("read", n, len)));
    }
    if back.as_mut() != out.as_mut() {
        return Err((
            "read",
            io::Error::other("read back different data than was written"),
        ));
    }
    Ok(())
}

fn short(what: &str, n: usize, len: usize) -> io::Error {
    io::Error::other(format!("short {what}: {n} of {len} bytes"))
}

/// A byte buffer whose start is aligned to `align` and, when `align` < 4096, deliberately *not*
/// aligned to twice that, so the probe tests the alignment it claims. Safe code: over-allocate a
/// Vec and slice into it.
struct AlignedBuf {
    raw: Vec<u8>,
    start: usize,
    len: usize,
}

impl AlignedBuf {
    fn new(len: usize, align: usize) -> Self {
        let align = align.max(1);
        let raw = vec![0u8; len + 3 * align];
        let addr = raw.as_ptr() as usize;
        let mut start = (align - addr % align) % align;
        if (addr + start).is_multiple_of(2 * align) && align < PROBE_BLOCK {
            start += align;
        }
        Self { raw, start, len }
    }

    fn as_mut(&mut self) -> &mut [u8] {
        &mut self.raw[self.start..self.start + self.len]
    }
}

/// `(stx_dio_mem_align, stx_dio_offset_align)` if the kernel reports them for this file.
#[cfg(all(target_os = "linux", any(target_env = "gnu", target_env = "musl")))]
fn statx_dioalign(path: &Path) -> Option<(u32, u32)> {
    let c = c_path(path).ok()?;
    let mut st = std::mem::MaybeUninit::<libc::statx>::zeroed();
    // The raw system call rather than glibc's `statx` wrapper, which only glibc 2.28 has: the
    // portable binary (scripts/package) links against glibc 2.17.
    // SAFETY: `c` is a NUL-terminated path that outlives the call; `st` is a writable buffer of
    // the size of `struct statx`, which the kernel fills on success.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_statx,
            libc::AT_FDCWD,
            c.as_ptr(),
            0,
            libc::STATX_DIOALIGN,
            st.as_mut_ptr(),
        )
    };
    if rc != 0 {
        // ENOSYS before Linux 4.11: fall back to the probe.
        return None;
    }
    // SAFETY: statx returned 0, so the struct is filled (and all-zero was already valid).
    let st = unsafe { st.assume_init() };
    // Before 6.1, or on a filesystem without DIO support (tmpfs), the mask bit is absent.
    if st.stx_mask & libc::STATX_DIOALIGN == 0 {
        return None;
    }
    Some((st.stx_dio_mem_align, st.stx_dio_offset_align))
}

#[cfg(not(all(target_os = "linux", any(target_env = "gnu", target_env = "musl"))))]
fn statx_dioalign(_path: &Path) -> Option<(u32, u32)> {
    None
}

/// Drop a file's pages from the page cache, for the buffered fallback: dirty pages cannot be
/// dropped, hence the `fdatasync` first (posix_fadvise(2)). No privileges needed, unlike
/// `/proc/sys/vm/drop_caches`, and no effect on other workloads.
#[cfg(any(target_os = "linux", target_os = "android"))]
pub fn evict_cache(fd: RawFd) -> io::Result<()> {
    // SAFETY: fdatasync only reads the descriptor number; a bad fd yields EBADF, not UB.
    if unsafe { libc::fdatasync(fd) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: as above; offset 0 and length 0 mean "the whole file".
    let rc = unsafe { libc::posix_fadvise(fd, 0, 0, libc::POSIX_FADV_DONTNEED) };
    // posix_fadvise returns the error number instead of setting errno.
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    Ok(())
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
pub fn evict_cache(_fd: RawFd) -> io::Result<()> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "page-cache eviction is implemented for Linux only",
    ))
}

/// A scratch file with a unique name, removed when dropped whatever happened to it.
pub(super) struct ProbeFile {
    path: PathBuf,
}

impl ProbeFile {
    pub(super) fn create(dir: &Path) -> io::Result<Self> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let path = dir.join(format!(
            ".hostbench-probe-{}-{}-{n}",
            std::process::id(),
            now_nanos()
        ));
        // create_new: never open (let alone truncate) a file that is already there.
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)?;
        Ok(Self { path })
    }
}

impl Drop for ProbeFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

pub(super) fn now_nanos() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::place::check_dir;

    #[test]
    fn direct_io_tempdir() {
        let tmp = tempfile::tempdir().unwrap();
        let got = direct_io(tmp.path());
        eprintln!("direct_io({}) = {got:?}", tmp.path().display());
        if let DirectIo::Supported {
            mem_align,
            offset_align,
            ..
        } = got
        {
            assert!(mem_align > 0 && offset_align > 0);
        }
        assert_eq!(
            std::fs::read_dir(tmp.path()).unwrap().count(),
            0,
            "probe file left behind"
        );
    }

    #[test]
    fn direct_io_dev_shm() {
        let shm = Path::new("/dev/shm");
        if !shm.is_dir() || check_dir(shm).is_err() {
            return;
        }
        // Whatever the kernel says (EINVAL before 6.6, any alignment since), no panic, and the
        // result is labelled as memory.
        let got = direct_io(shm);
        eprintln!("direct_io(/dev/shm) = {got:?}");
        if let DirectIo::Unsupported(m) = &got {
            assert!(!m.contains('\n'));
        }
        let fs = fs_info(shm).unwrap();
        if fs.fs_type == "tmpfs" {
            assert!(fs.caching_note().is_some());
        }
    }

    #[test]
    fn probe_rejects_direct_io_where_open_fails() {
        let tmp = tempfile::tempdir().unwrap();
        let missing = tmp.path().join("missing");
        match probe_direct_io(&missing, None, "testfs") {
            DirectIo::Unsupported(m) => assert!(m.contains("testfs") && m.contains("open")),
            other => panic!("{other:?}"),
        }
        let einval = io::Error::from_raw_os_error(libc::EINVAL);
        assert!(dio_error("tmpfs", "open", &einval).starts_with("O_DIRECT not supported by tmpfs"));
    }

    #[test]
    fn probe_without_statx() {
        // The fallback path that kernels before 6.1 take, run here on whatever the tempdir is.
        let tmp = tempfile::tempdir().unwrap();
        let probe = ProbeFile::create(tmp.path()).unwrap();
        let fs = fs_info(tmp.path()).unwrap().fs_type;
        match probe_direct_io(&probe.path, Some(512), &fs) {
            DirectIo::Supported {
                mem_align,
                offset_align,
                source,
            } => {
                eprintln!("probe with lbs 512 on {fs}: {mem_align}/{offset_align} via {source}");
                match source {
                    "block device logical_block_size" => assert_eq!(offset_align, 512),
                    "probe" => assert_eq!(offset_align, 4096),
                    other => panic!("{other}"),
                }
            }
            DirectIo::Unsupported(m) => eprintln!("no O_DIRECT on {fs}: {m}"),
        }
        if let DirectIo::Supported { source, .. } = probe_direct_io(&probe.path, None, &fs) {
            assert_eq!(source, "probe");
        }
        let path = probe.path.clone();
        drop(probe);
        assert!(!path.exists());
    }

    #[test]
    fn aligned_buf_is_exactly_aligned() {
        for align in [512usize, 1024, 4096] {
            let mut b = AlignedBuf::new(align, align);
            let addr = b.as_mut().as_ptr() as usize;
            assert_eq!(addr % align, 0);
            if align < PROBE_BLOCK {
                assert_ne!(addr % (2 * align), 0);
            }
            assert_eq!(b.as_mut().len(), align);
        }
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn evict_cache_on_a_file() {
        use std::io::Write;
        use std::os::fd::AsRawFd;
        let tmp = tempfile::tempdir().unwrap();
        let mut f = File::create(tmp.path().join("f")).unwrap();
        f.write_all(&[7u8; 8192]).unwrap();
        evict_cache(f.as_raw_fd()).unwrap();
        assert!(evict_cache(-1).is_err());
    }
}

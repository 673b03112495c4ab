//! The target directory: what filesystem and device it is on, whether O_DIRECT works there and
//! with which alignment, and the safety rules for writing into it.
//!
//! Why this is its own module: a disk benchmark is only as honest as what it knows about where it
//! writes. fio errors out when O_DIRECT is refused, hard-codes nothing about alignment, never checks
//! free space and leaves its files behind; tmpfs, ZFS and overlay accept "direct" I/O that never
//! reaches storage. So, before any byte is written, hostbench
//!
//! - accepts only an existing, writable *directory* (`check_dir`): block devices are refused
//!   outright, because a benchmark that can overwrite `/dev/sda` eventually will;
//! - names the filesystem (`fs_info`) and labels those whose direct I/O measures memory;
//! - checks free space with a margin (`check_free_space`), since filling the disk that holds `/`
//!   hurts more than a refused run (ENOSPC mid-run is still handled by the caller);
//! - finds the O_DIRECT alignment the kernel asks for (`direct_io`) rather than assuming 512;
//! - finds the device and its link (`device_info`) so a result can be compared with the interface
//!   limit (`disk_peak`);
//! - writes only inside a fresh `hostbench-<pid>-<nanos>` directory (`WorkDir`) that is removed on
//!   success, failure and Ctrl-C (`install_signal_cleanup`).

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::RawFd;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use hostbench_core::model::Peak;
use hostbench_core::spec::Spec;
use hostbench_core::units::{format_bytes_iec, format_value};
use hostbench_core::BenchError;
use serde::Serialize;

/// Where sysfs lives; the `_from` functions take it as a parameter so tests can use a fixture tree.
const SYS_ROOT: &str = "/sys";

/// Size of the block the direct-I/O probe writes: 4 KiB is aligned for every common device
/// (512 and 4096-byte sectors) and is the page size, so it also satisfies pre-6.0 buffer rules.
const PROBE_BLOCK: usize = 4096;

const GIB: u64 = 1 << 30;

// ---------------------------------------------------------------------------------------------
// The user's --dir
// ---------------------------------------------------------------------------------------------

/// Validate the user's `--dir` and return its canonical path.
///
/// Every refusal is `InvalidInput` with one line naming the value, so the binary exits 2 with a
/// message the user can act on.
pub fn check_dir(path: &Path) -> Result<PathBuf, BenchError> {
    let shown = path.display();
    // `metadata` follows symlinks on purpose: a symlink to a directory is a fine target, a symlink
    // to a block device is exactly as dangerous as the device itself.
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(BenchError::invalid(format!(
                "--dir {shown}: no such directory"
            )));
        }
        Err(e) => return Err(BenchError::invalid(format!("--dir {shown}: {e}"))),
    };
    let ft = meta.file_type();
    if ft.is_block_device() {
        return Err(BenchError::invalid(format!(
            "--dir {shown} is a block device: hostbench never writes to devices, give a directory \
             on its filesystem"
        )));
    }
    if !ft.is_dir() {
        return Err(BenchError::invalid(format!(
            "--dir {shown} is not a directory"
        )));
    }
    let canonical = path
        .canonicalize()
        .map_err(|e| BenchError::invalid(format!("--dir {shown}: {e}")))?;
    if read_only_mount(&canonical) {
        return Err(not_writable(
            path,
            &io::Error::from_raw_os_error(libc::EROFS),
        ));
    }
    // Creating a file is the only test that cannot lie: permission bits are bypassed by root
    // (so `access(W_OK)` says yes on a 0555 directory, correctly), but ACLs, quotas, LSMs and
    // read-only bind mounts all show up here as the error a benchmark would hit later.
    match ProbeFile::create(&canonical) {
        Ok(probe) => drop(probe),
        Err(e) => return Err(not_writable(path, &e)),
    }
    Ok(canonical)
}

/// The "not writable" refusal, with a plain reason for the common errors; separate so that tests
/// can inject EROFS without mounting anything.
fn not_writable(path: &Path, err: &io::Error) -> BenchError {
    let reason = match err.raw_os_error() {
        Some(libc::EROFS) => "read-only filesystem".to_string(),
        Some(libc::EACCES) | Some(libc::EPERM) => format!("permission denied ({err})"),
        Some(libc::ENOSPC) => "no space left on the filesystem".to_string(),
        Some(libc::EDQUOT) => "disk quota exceeded".to_string(),
        // What procfs and similar pseudo-filesystems answer to O_CREAT.
        Some(libc::ENOENT) => "it does not allow creating files".to_string(),
        _ => err.to_string(),
    };
    BenchError::invalid(format!(
        "--dir {} is not writable: {reason}",
        path.display()
    ))
}

/// Whether the mount holding `path` is read-only (statvfs ST_RDONLY). This answers correctly for
/// root too, and before any file is created.
fn read_only_mount(path: &Path) -> bool {
    statvfs(path).is_ok_and(|s| s.f_flag & libc::ST_RDONLY != 0)
}

// ---------------------------------------------------------------------------------------------
// Filesystem
// ---------------------------------------------------------------------------------------------

/// The filesystem a path lives on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FsInfo {
    /// "ext4", "xfs", "btrfs", "tmpfs", "overlay", "zfs", "nfs", "fuse", "ramfs", … or
    /// "0x<magic>" for a filesystem this table does not know.
    pub fs_type: String,
    /// `statfs.f_type` (0 where the platform has no such field).
    pub magic: u64,
    /// Bytes an unprivileged writer may still use (`f_bavail × f_frsize`).
    pub free_bytes: u64,
    pub total_bytes: u64,
}

/// `statfs` magic numbers (linux/magic.h and the out-of-tree filesystems HPC sites run).
const FS_MAGICS: &[(u64, &str)] = &[
    // ext2 and ext3 share this magic; in practice they are mounted by the ext4 driver.
    (0xEF53, "ext4"),
    (0x5846_5342, "xfs"),
    (0x9123_683E, "btrfs"),
    (0x0102_1994, "tmpfs"),
    (0x8584_58F6, "ramfs"),
    (0x794C_7630, "overlay"),
    (0x2FC1_2FC1, "zfs"),
    (0x6969, "nfs"),
    (0x6573_5546, "fuse"),
    (0xF2F5_2010, "f2fs"),
    (0xCA45_1A4E, "bcachefs"),
    (0xFF53_4D42, "cifs"),
    (0xFE53_4D42, "smb2"),
    (0x0102_1997, "9p"),
    (0x4D44, "vfat"),
    (0x2011_BAB0, "exfat"),
    (0x5346_544E, "ntfs"),
    (0x0BD0_0BD0, "lustre"),
    (0x4750_4653, "gpfs"),
    (0x00C3_6400, "ceph"),
    (0x1983_0326, "beegfs"),
    (0x7371_7368, "squashfs"),
    (0x9660, "iso9660"),
];

fn fs_name(magic: u64) -> String {
    FS_MAGICS
        .iter()
        .find(|(m, _)| *m == magic)
        .map(|(_, n)| (*n).to_string())
        .unwrap_or_else(|| format!("0x{magic:x}"))
}

impl FsInfo {
    /// A label for filesystems whose "direct" I/O does not measure storage; the caller attaches it
    /// to every record from this directory as a warning.
    pub fn caching_note(&self) -> Option<&'static str> {
        match self.fs_type.as_str() {
            "tmpfs" | "ramfs" => Some("memory, not storage"),
            // The upper directory is named in the mount options, but inside a container (the usual
            // place for overlay) that path belongs to the host's namespace and cannot be opened, so
            // naming its filesystem is not reliable enough to print.
            "overlay" => Some(
                "overlay: I/O goes to the upper filesystem, which cannot be identified from here \
                 (often the container host's disk, sometimes tmpfs)",
            ),
            "zfs" => Some("ZFS: the ARC may cache even O_DIRECT I/O before OpenZFS 2.3"),
            "nfs" | "cifs" | "smb2" => Some(
                "network filesystem: O_DIRECT skips only the client's cache; the server may answer \
                 from its memory",
            ),
            _ => None,
        }
    }
}

/// Name the filesystem under `path` and how much space it has.
pub fn fs_info(path: &Path) -> Result<FsInfo, BenchError> {
    let vfs = statvfs(path).map_err(|e| BenchError::io(path, e))?;
    let magic = fs_magic(path).map_err(|e| BenchError::io(path, e))?;
    // The casts widen (the field types differ per platform and are at most 64 bits).
    let frsize = vfs.f_frsize as u64;
    Ok(FsInfo {
        fs_type: if magic == 0 {
            "unknown".to_string()
        } else {
            fs_name(magic)
        },
        magic,
        free_bytes: (vfs.f_bavail as u64).saturating_mul(frsize),
        total_bytes: (vfs.f_blocks as u64).saturating_mul(frsize),
    })
}

fn c_path(path: &Path) -> io::Result<std::ffi::CString> {
    use std::os::unix::ffi::OsStrExt;
    std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains a NUL byte"))
}

fn statvfs(path: &Path) -> io::Result<libc::statvfs> {
    let c = c_path(path)?;
    let mut st = std::mem::MaybeUninit::<libc::statvfs>::zeroed();
    // SAFETY: `c` is NUL-terminated and lives across the call; `st` points to writable memory of
    // the right size, which the kernel fills on success.
    let rc = unsafe { libc::statvfs(c.as_ptr(), st.as_mut_ptr()) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: statvfs returned 0, so the struct is filled (and all-zero was already valid).
    Ok(unsafe { st.assume_init() })
}

#[cfg(any(target_os = "linux", target_os = "android"))]
fn fs_magic(path: &Path) -> io::Result<u64> {
    let c = c_path(path)?;
    let mut st = std::mem::MaybeUninit::<libc::statfs>::zeroed();
    // SAFETY: as for statvfs: a NUL-terminated path and a writable, correctly sized out-struct.
    let rc = unsafe { libc::statfs(c.as_ptr(), st.as_mut_ptr()) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: statfs returned 0, so the struct is filled.
    let st = unsafe { st.assume_init() };
    // f_type is signed on some architectures; magics are 32-bit, so keep the low 32 bits rather
    // than sign-extending btrfs's 0x9123683E into a 64-bit negative.
    Ok((st.f_type as u64) & 0xFFFF_FFFF)
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn fs_magic(_path: &Path) -> io::Result<u64> {
    Ok(0)
}

/// Refuse to start a case that would leave less than the margin free: min(10 % of the
/// filesystem, 1 GiB). The check cannot be exact (other writers, quotas, CoW metadata), which is
/// why ENOSPC during the run is still handled; it only keeps hostbench from planning to fill `/`.
pub fn check_free_space(dir: &Path, needed: u64, what: &str) -> Result<(), BenchError> {
    let fs = fs_info(dir)?;
    check_free_space_in(&fs, dir, needed, what)
}

fn check_free_space_in(fs: &FsInfo, dir: &Path, needed: u64, what: &str) -> Result<(), BenchError> {
    let margin = (fs.total_bytes / 10).min(GIB);
    let usable = fs.free_bytes.saturating_sub(margin);
    if needed > usable {
        return Err(BenchError::invalid(format!(
            "{what} needs {} but only {} is free on {} (keeping a 10 % / 1 GiB margin, {} usable)",
            format_bytes_iec(needed),
            format_bytes_iec(fs.free_bytes),
            dir.display(),
            format_bytes_iec(usable),
        )));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Direct I/O
// ---------------------------------------------------------------------------------------------

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
    // SAFETY: `c` is a NUL-terminated path that outlives the call; `st` is a writable buffer of
    // the size of `struct statx`, which the kernel fills on success.
    let rc = unsafe {
        libc::statx(
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
struct ProbeFile {
    path: PathBuf,
}

impl ProbeFile {
    fn create(dir: &Path) -> io::Result<Self> {
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

fn now_nanos() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

// ---------------------------------------------------------------------------------------------
// Device and interface limit
// ---------------------------------------------------------------------------------------------

/// The block device under a directory and the link it hangs on.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeviceInfo {
    /// Kernel name of the whole disk (partitions resolved to their disk): nvme0n1, vda, sda, dm-0.
    pub name: String,
    pub model: Option<String>,
    pub rotational: Option<bool>,
    pub logical_block: Option<u32>,
    pub physical_block: Option<u32>,
    /// "PCIe 4.0 x4", "SATA 6.0 Gb/s", "virtio", …; None for stacked devices (dm, md, loop).
    pub interface: Option<String>,
    /// The link's payload rate in bytes/s after line encoding; None where there is no wire limit
    /// (virtio) or it could not be read.
    pub interface_bps: Option<f64>,
}

/// PCIe per-lane payload rate after encoding (8b/10b for gen 1–2, 128b/130b for 3–5, FLIT for 6),
/// keyed by the transfer rate in tenths of GT/s as sysfs prints it.
const PCIE_GENS: &[(u32, u32, f64)] = &[
    (25, 1, 0.25e9),
    (50, 2, 0.5e9),
    (80, 3, 0.985e9),
    (160, 4, 1.969e9),
    (320, 5, 3.938e9),
    (640, 6, 7.563e9),
];

/// Find the device holding `dir` via its `st_dev`. None for filesystems without one (tmpfs,
/// overlay, btrfs's anonymous device numbers, NFS) or where sysfs is not mounted.
pub fn device_info(dir: &Path) -> Option<DeviceInfo> {
    let (major, minor) = dev_of(dir)?;
    device_info_from(Path::new(SYS_ROOT), major, minor)
}

#[cfg(any(target_os = "linux", target_os = "android"))]
fn dev_of(path: &Path) -> Option<(u32, u32)> {
    use std::os::unix::fs::MetadataExt;
    let dev = std::fs::metadata(path).ok()?.dev();
    // The casts only unify c_uint (glibc) and c_int (bionic); device numbers are non-negative.
    Some((libc::major(dev) as u32, libc::minor(dev) as u32))
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn dev_of(_path: &Path) -> Option<(u32, u32)> {
    None
}

/// The sysfs directory of the whole disk for `major:minor` (a partition resolves to its parent).
fn disk_dir(sys_root: &Path, major: u32, minor: u32) -> Option<PathBuf> {
    let dir = sys_root
        .join("dev/block")
        .join(format!("{major}:{minor}"))
        .canonicalize()
        .ok()?;
    // A partition's directory sits inside its disk's and has no queue/ of its own.
    if dir.join("partition").exists() {
        return dir.parent().map(Path::to_path_buf);
    }
    Some(dir)
}

fn logical_block_from(sys_root: &Path, major: u32, minor: u32) -> Option<u32> {
    let disk = disk_dir(sys_root, major, minor)?;
    read_num(&disk.join("queue/logical_block_size"))
}

/// `device_info` against a sysfs tree rooted at `sys_root` (normally `/sys`).
pub fn device_info_from(sys_root: &Path, major: u32, minor: u32) -> Option<DeviceInfo> {
    let disk = disk_dir(sys_root, major, minor)?;
    let name = disk.file_name()?.to_string_lossy().into_owned();
    let queue = disk.join("queue");
    let mut info = DeviceInfo {
        model: read_trim(&disk.join("device/model")),
        rotational: read_trim(&queue.join("rotational")).map(|s| s != "0"),
        logical_block: read_num(&queue.join("logical_block_size")),
        physical_block: read_num(&queue.join("physical_block_size")),
        interface: None,
        interface_bps: None,
        name,
    };
    let stacked = ["dm-", "md", "loop", "zram", "nbd", "ram", "drbd", "rbd"];
    if stacked.iter().any(|p| info.name.starts_with(p)) {
        // Stacked or virtual: the limit is that of the devices below (or of memory); guessing one
        // would be worse than saying nothing.
        return Some(info);
    }
    let components: Vec<String> = disk
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    let numbered = |prefix: &str| {
        components.iter().find_map(|c| {
            let rest = c.strip_prefix(prefix)?;
            (!rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit())).then(|| rest.to_string())
        })
    };
    if info.name.starts_with("nvme") {
        (info.interface, info.interface_bps) = nvme_link(sys_root, &disk, &info.name);
    } else if numbered("virtio").is_some() {
        info.interface = Some("virtio".to_string());
    } else if info.name.starts_with("xvd") {
        info.interface = Some("Xen virtual block device".to_string());
    } else if numbered("usb").is_some() {
        // The USB generation is in the hub's `speed` file, but a bridge chip usually limits more.
        info.interface = Some("USB".to_string());
    } else if let Some((iface, bps)) = sas_link(&disk) {
        (info.interface, info.interface_bps) = (Some(iface), bps);
    } else if let Some(port) = numbered("ata") {
        let spd = read_trim(
            &sys_root
                .join("class/ata_link")
                .join(format!("link{port}"))
                .join("sata_spd"),
        );
        if let Some(gbps) = spd.as_deref().and_then(leading_number) {
            // 8b/10b encoding: 10 line bits per byte.
            info.interface = Some(format!("SATA {gbps:.1} Gb/s"));
            info.interface_bps = Some(gbps * 1e9 / 10.0);
        } else {
            info.interface = Some("SATA".to_string());
        }
    }
    Some(info)
}

/// The SAS link of a disk behind a SAS transport (an `end_device-*` in its sysfs path): the
/// negotiated rate of each phy of the port just above the end device (the HBA's, or an
/// expander's for an expander-attached disk), summed over a wide port. None when the disk is not
/// on SAS; a rate-less "SAS" when the phys cannot be read.
fn sas_link(disk: &Path) -> Option<(String, Option<f64>)> {
    let end_device = disk.ancestors().find(|a| {
        a.file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("end_device-"))
    })?;
    let port = end_device.parent()?;
    let mut rates: Vec<f64> = std::fs::read_dir(port)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.starts_with("phy-").then(|| {
                read_trim(
                    &e.path()
                        .join("sas_phy")
                        .join(&name)
                        .join("negotiated_linkrate"),
                )
            })?
        })
        .filter_map(|r| leading_number(&r))
        .collect();
    rates.sort_by(f64::total_cmp);
    let Some(&fastest) = rates.last() else {
        return Some(("SAS".to_string(), None));
    };
    // SAS-1 to SAS-3 (1.5–12 Gb/s) use 8b/10b, SAS-4 ("22.5 Gbit") 128b/150b.
    let payload = |gbit: f64| {
        if gbit > 12.0 {
            gbit * 1e9 * 128.0 / 150.0 / 8.0
        } else {
            gbit * 1e9 / 10.0
        }
    };
    let lanes = rates.len();
    let name = if lanes > 1 {
        format!("SAS {fastest:.1} Gb/s x{lanes}")
    } else {
        format!("SAS {fastest:.1} Gb/s")
    };
    Some((name, Some(rates.iter().map(|&g| payload(g)).sum())))
}

/// PCIe link of an NVMe namespace's controller, or the fabric transport for NVMe-oF.
fn nvme_link(sys_root: &Path, disk: &Path, name: &str) -> (Option<String>, Option<f64>) {
    // nvme0n1/device is the controller and its device the PCI function; with native multipath
    // nvme0n1/device is the subsystem instead, so also try the controller named after the disk.
    let ctrl_name: String = {
        let digits: String = name["nvme".len()..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        format!("nvme{digits}")
    };
    let ctrls = [
        disk.join("device"),
        sys_root.join("class/nvme").join(&ctrl_name),
    ];
    for ctrl in &ctrls {
        if let Some(t) = read_trim(&ctrl.join("transport")) {
            if t != "pcie" {
                return (Some(format!("NVMe over {t}")), None);
            }
        }
        let speed = read_trim(&ctrl.join("device/current_link_speed"));
        let width = read_num(&ctrl.join("device/current_link_width"));
        if let (Some(speed), Some(width)) = (speed, width) {
            let gts = leading_number(&speed).map(|g| (g * 10.0).round() as u32);
            let gen = gts.and_then(|t| PCIE_GENS.iter().find(|(r, _, _)| *r == t));
            return match gen {
                Some(&(_, gen, per_lane)) if width > 0 => (
                    Some(format!("PCIe {gen}.0 x{width}")),
                    Some(per_lane * f64::from(width)),
                ),
                // "Unknown" speed, link down, or a generation this table predates.
                _ => (Some(format!("PCIe ({speed}, x{width})")), None),
            };
        }
    }
    (Some("NVMe".to_string()), None)
}

fn read_trim(path: &Path) -> Option<String> {
    let s = std::fs::read_to_string(path).ok()?;
    let s = s.trim();
    (!s.is_empty()).then(|| s.to_string())
}

fn read_num(path: &Path) -> Option<u32> {
    read_trim(path)?.parse().ok()
}

/// "16.0 GT/s PCIe" → 16.0, "6.0 Gbps" → 6.0.
fn leading_number(s: &str) -> Option<f64> {
    s.split_whitespace()
        .next()?
        .parse()
        .ok()
        .filter(|v: &f64| *v > 0.0)
}

/// The theoretical limit for a disk record: the spec file's datasheet figure if given, else (for
/// throughput only) the interface limit. IOPS have no honest peak without a datasheet.
pub fn disk_peak(dev: Option<&DeviceInfo>, spec: &Spec, write: bool, iops: bool) -> Option<Peak> {
    let (key, value) = match (write, iops) {
        (false, false) => ("read_bps", spec.disk.read_bps),
        (true, false) => ("write_bps", spec.disk.write_bps),
        (false, true) => ("read_iops", spec.disk.read_iops),
        (true, true) => ("write_iops", spec.disk.write_iops),
    };
    if let Some(value) = value {
        return Some(Peak {
            value,
            basis: format!("spec file disk.{key}"),
        });
    }
    if iops {
        return None;
    }
    let dev = dev?;
    let (iface, bps) = (dev.interface.as_deref()?, dev.interface_bps?);
    Some(Peak {
        value: bps,
        basis: interface_basis(iface, bps),
    })
}

fn interface_basis(iface: &str, bps: f64) -> String {
    const NOT_DEVICE: &str = "(interface limit, not the device's)";
    let words: Vec<&str> = iface.split_whitespace().collect();
    if let ["PCIe", _gen, width] = words.as_slice() {
        if let Some(lanes) = width.strip_prefix('x').and_then(|w| w.parse::<u32>().ok()) {
            if lanes > 0 {
                let per_lane = bps / f64::from(lanes) / 1e9;
                return format!("{iface} link: {lanes} lanes x {per_lane} GB/s {NOT_DEVICE}");
            }
        }
    }
    if iface.starts_with("SATA") || iface.starts_with("SAS") {
        let encoding = match leading_number(iface.split_once(' ').map_or("", |(_, r)| r)) {
            Some(g) if iface.starts_with("SAS") && g > 12.0 => "128b/150b",
            _ => "8b/10b",
        };
        return format!(
            "{iface} link: {} after {encoding} encoding {NOT_DEVICE}",
            format_value(bps, "B/s")
        );
    }
    format!("{iface} link: {} {NOT_DEVICE}", format_value(bps, "B/s"))
}

// ---------------------------------------------------------------------------------------------
// The work directory and Ctrl-C
// ---------------------------------------------------------------------------------------------

/// Work directories that exist right now, for the signal thread to remove.
static REGISTRY: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

fn registry() -> MutexGuard<'static, Vec<PathBuf>> {
    // A panic while holding the lock leaves a plain Vec that is still correct; cleanup must go on.
    REGISTRY.lock().unwrap_or_else(|e| e.into_inner())
}

/// A fresh `hostbench-<pid>-<nanos>` directory: every file hostbench writes lives inside it, and
/// it is removed (recursively) when this value drops or when `install_signal_cleanup`'s thread
/// sees SIGINT/SIGTERM/SIGHUP.
#[derive(Debug)]
pub struct WorkDir {
    path: PathBuf,
}

impl WorkDir {
    /// Create the directory under `parent` (which `check_dir` has validated).
    pub fn create(parent: &Path) -> Result<WorkDir, BenchError> {
        let pid = std::process::id();
        Self::create_with(parent, |attempt| {
            if attempt == 0 {
                format!("hostbench-{pid}-{}", now_nanos())
            } else {
                format!("hostbench-{pid}-{}-{attempt}", now_nanos())
            }
        })
    }

    /// `create` with the naming injected, so tests can force a collision.
    fn create_with(
        parent: &Path,
        mut name: impl FnMut(u32) -> String,
    ) -> Result<WorkDir, BenchError> {
        const ATTEMPTS: u32 = 16;
        let mut last = None;
        for attempt in 0..ATTEMPTS {
            let path = parent.join(name(attempt));
            // create_dir, not create_dir_all: an existing directory of that name is someone
            // else's (or a crashed run's) and must be neither reused nor later deleted by us.
            match std::fs::create_dir(&path) {
                Ok(()) => {
                    registry().push(path.clone());
                    return Ok(WorkDir { path });
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = Some((path, e)),
                Err(e) => return Err(BenchError::io(path, e)),
            }
        }
        Err(match last {
            Some((path, e)) => BenchError::io(path, e),
            None => BenchError::Failed("could not name a work directory".to_string()),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir_all(&self.path) {
            if e.kind() != io::ErrorKind::NotFound {
                eprintln!(
                    "hostbench: could not remove work directory {}: {e}",
                    self.path.display()
                );
            }
        }
        registry().retain(|p| p != &self.path);
    }
}

/// Remove every registered work directory; returns the removed ones and one message per failure.
fn remove_registered() -> (Vec<PathBuf>, Vec<String>) {
    // Copy the list out so that a Drop on another thread is not blocked behind the deletions.
    let dirs: Vec<PathBuf> = registry().clone();
    remove_dirs(dirs)
}

fn remove_dirs(dirs: Vec<PathBuf>) -> (Vec<PathBuf>, Vec<String>) {
    let mut removed = Vec::new();
    let mut failed = Vec::new();
    for dir in dirs {
        // Worker threads may still be creating files while we delete; a second pass catches
        // the ENOTEMPTY that race produces.
        let mut result = std::fs::remove_dir_all(&dir);
        if result.is_err() {
            result = std::fs::remove_dir_all(&dir);
        }
        match result {
            Ok(()) => removed.push(dir),
            Err(e) if e.kind() == io::ErrorKind::NotFound => removed.push(dir),
            Err(e) => failed.push(format!("could not remove {}: {e}", dir.display())),
        }
    }
    (removed, failed)
}

/// The shell convention for "killed by signal N".
fn exit_code_for(sig: i32) -> i32 {
    128 + sig
}

fn interrupted_message(removed: &[PathBuf], failed: &[String]) -> String {
    let mut msg = if removed.is_empty() {
        "hostbench: interrupted; no work directory to remove".to_string()
    } else {
        let list: Vec<String> = removed.iter().map(|p| p.display().to_string()).collect();
        format!("hostbench: interrupted; removed {}", list.join(", "))
    };
    for f in failed {
        msg.push_str("; ");
        msg.push_str(f);
    }
    msg
}

/// Remove the work directories on SIGINT, SIGTERM and SIGHUP, then exit 128 + signal (130, 143,
/// 129). Idempotent.
///
/// **Call it before any other thread starts** (first thing in `main`): it blocks the signals in
/// the calling thread, and only threads spawned afterwards inherit that mask. A thread created
/// earlier would keep them unblocked, the kernel could deliver Ctrl-C there, and the default action
/// would kill the process with the directories still on disk. Child processes are unaffected:
/// `std::process::Command` resets the signal mask before `exec`.
///
/// Why a `sigwait` thread rather than a handler: a signal handler may only call async-signal-safe
/// functions, and removing a directory tree, taking a mutex, allocating and printing are not. A
/// thread that waits for the blocked signals synchronously runs ordinary Rust code.
#[cfg(unix)]
pub fn install_signal_cleanup() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let set = cleanup_signals();
        // SAFETY: `set` is an initialised sigset_t; a null old-set pointer is allowed.
        let rc = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
        if rc != 0 {
            eprintln!(
                "hostbench: warning: cannot block signals ({}); work directories are not removed \
                 on Ctrl-C",
                io::Error::from_raw_os_error(rc)
            );
            return;
        }
        let spawned = std::thread::Builder::new()
            .name("hostbench-signals".to_string())
            .spawn(move || loop {
                let mut sig: libc::c_int = 0;
                // SAFETY: `set` is a valid sigset_t owned by this closure, `sig` a valid out-pointer.
                let rc = unsafe { libc::sigwait(&set, &mut sig) };
                if rc != 0 {
                    continue;
                }
                let (removed, failed) = remove_registered();
                eprintln!("{}", interrupted_message(&removed, &failed));
                std::process::exit(exit_code_for(sig));
            });
        if let Err(e) = spawned {
            // Without the waiting thread, blocked signals would make Ctrl-C do nothing at all;
            // unblocking restores the default (kill, leaving the directory behind) instead.
            // SAFETY: as above.
            unsafe { libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut()) };
            eprintln!(
                "hostbench: warning: cannot start the signal thread ({e}); work directories are \
                 not removed on Ctrl-C"
            );
        }
    });
}

#[cfg(unix)]
fn cleanup_signals() -> libc::sigset_t {
    let mut set = std::mem::MaybeUninit::<libc::sigset_t>::uninit();
    // SAFETY: sigemptyset initialises the whole set; sigaddset only sets bits in it, and the
    // signal numbers are valid, so neither can fail.
    unsafe {
        libc::sigemptyset(set.as_mut_ptr());
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            libc::sigaddset(set.as_mut_ptr(), sig);
        }
        set.assume_init()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(e: &BenchError) -> String {
        let m = e.to_string();
        assert!(!m.contains('\n'), "message is not one line: {m:?}");
        m
    }

    #[test]
    fn check_dir_missing() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("nope");
        let e = check_dir(&p).unwrap_err();
        assert!(matches!(e, BenchError::InvalidInput(_)));
        assert!(msg(&e).ends_with(": no such directory"), "{e}");
    }

    #[test]
    fn check_dir_regular_file_and_char_device() {
        let tmp = tempfile::tempdir().unwrap();
        let f = tmp.path().join("file");
        std::fs::write(&f, b"x").unwrap();
        let e = check_dir(&f).unwrap_err();
        assert!(msg(&e).ends_with("is not a directory"), "{e}");
        let e = check_dir(Path::new("/dev/null")).unwrap_err();
        assert!(msg(&e).ends_with("is not a directory"), "{e}");
    }

    #[test]
    fn check_dir_block_device() {
        // Only a device that exists here; nothing is opened, let alone written.
        let Ok(entries) = std::fs::read_dir("/dev") else {
            return;
        };
        let block = entries
            .flatten()
            .map(|e| e.path())
            .find(|p| std::fs::metadata(p).is_ok_and(|m| m.file_type().is_block_device()));
        let Some(dev) = block else {
            eprintln!("no block device under /dev; skipping");
            return;
        };
        let e = check_dir(&dev).unwrap_err();
        assert!(matches!(e, BenchError::InvalidInput(_)));
        assert!(
            msg(&e).contains("is a block device: hostbench never writes to devices"),
            "{e}"
        );
    }

    #[test]
    fn check_dir_ok_is_canonical_and_leaves_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let sub = tmp.path().join("a");
        std::fs::create_dir(&sub).unwrap();
        let got = check_dir(&sub.join("../a/.")).unwrap();
        assert_eq!(got, sub.canonicalize().unwrap());
        assert_eq!(
            std::fs::read_dir(&sub).unwrap().count(),
            0,
            "probe file left behind"
        );
    }

    #[test]
    fn check_dir_read_only() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let ro = tmp.path().join("ro");
        std::fs::create_dir(&ro).unwrap();
        std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o555)).unwrap();
        let got = check_dir(&ro);
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        if root {
            // Root bypasses permission bits, so hostbench really could write there.
            assert!(got.is_ok(), "{got:?}");
        } else {
            let e = got.unwrap_err();
            assert!(
                msg(&e).contains("is not writable: permission denied"),
                "{e}"
            );
        }
        std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[test]
    fn not_writable_names_erofs() {
        let e = not_writable(
            Path::new("/mnt/ro"),
            &io::Error::from_raw_os_error(libc::EROFS),
        );
        assert!(matches!(e, BenchError::InvalidInput(_)));
        assert_eq!(
            msg(&e),
            "--dir /mnt/ro is not writable: read-only filesystem"
        );
        let e = not_writable(Path::new("/x"), &io::Error::from_raw_os_error(libc::EDQUOT));
        assert!(msg(&e).ends_with("disk quota exceeded"));
    }

    #[test]
    fn fs_info_tmpfs_and_tempdir() {
        let tmp = tempfile::tempdir().unwrap();
        let fs = fs_info(tmp.path()).unwrap();
        assert!(fs.total_bytes >= fs.free_bytes, "{fs:?}");
        assert!(fs.total_bytes > 0, "{fs:?}");
        assert!(!fs.fs_type.is_empty());
        let shm = Path::new("/dev/shm");
        if shm.is_dir() {
            let fs = fs_info(shm).unwrap();
            if fs.fs_type == "tmpfs" {
                assert_eq!(fs.caching_note(), Some("memory, not storage"));
            }
        }
    }

    #[test]
    fn fs_names_and_notes() {
        assert_eq!(fs_name(0xEF53), "ext4");
        assert_eq!(fs_name(0x9123_683E), "btrfs");
        assert_eq!(fs_name(0x1234), "0x1234");
        let mk = |t: &str| FsInfo {
            fs_type: t.to_string(),
            magic: 0,
            free_bytes: 0,
            total_bytes: 0,
        };
        assert!(mk("ramfs").caching_note().is_some());
        assert!(mk("overlay").caching_note().unwrap().starts_with("overlay"));
        assert!(mk("zfs").caching_note().unwrap().contains("ARC"));
        assert_eq!(mk("ext4").caching_note(), None);
        assert_eq!(mk("xfs").caching_note(), None);
    }

    #[test]
    fn free_space_refusal() {
        let tmp = tempfile::tempdir().unwrap();
        let e = check_free_space(tmp.path(), u64::MAX, "the 4 KiB randwrite case").unwrap_err();
        assert!(matches!(e, BenchError::InvalidInput(_)));
        let m = msg(&e);
        assert!(m.starts_with("the 4 KiB randwrite case needs "), "{m}");
        assert!(m.contains("keeping a 10 % / 1 GiB margin"), "{m}");
        check_free_space(tmp.path(), 0, "nothing").unwrap();
    }

    #[test]
    fn free_space_margin_is_min_of_10_percent_and_1_gib() {
        let dir = Path::new("/d");
        let small = FsInfo {
            fs_type: "ext4".into(),
            magic: 0xEF53,
            free_bytes: 500 << 20,
            total_bytes: 1000 << 20,
        };
        // 10 % of 1000 MiB = 100 MiB margin.
        assert!(check_free_space_in(&small, dir, 400 << 20, "x").is_ok());
        assert!(check_free_space_in(&small, dir, (400 << 20) + 1, "x").is_err());
        let big = FsInfo {
            free_bytes: 100 * GIB,
            total_bytes: 1000 * GIB,
            ..small
        };
        assert!(check_free_space_in(&big, dir, 99 * GIB, "x").is_ok());
        assert!(check_free_space_in(&big, dir, 99 * GIB + 1, "x").is_err());
    }

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

    // ---- sysfs fixtures -------------------------------------------------------------------

    fn write(p: &Path, s: &str) {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, format!("{s}\n")).unwrap();
    }

    fn link(target: &str, at: &Path) {
        std::fs::create_dir_all(at.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(target, at).unwrap();
    }

    fn queue(disk: &Path, rot: &str, lbs: &str, pbs: &str) {
        write(&disk.join("queue/rotational"), rot);
        write(&disk.join("queue/logical_block_size"), lbs);
        write(&disk.join("queue/physical_block_size"), pbs);
    }

    /// An NVMe gen4 x4 drive with one partition, laid out like a real /sys.
    fn nvme_fixture(root: &Path) {
        let pci = root.join("devices/pci0000:00/0000:00:01.1/0000:01:00.0");
        write(&pci.join("current_link_speed"), "16.0 GT/s PCIe");
        write(&pci.join("current_link_width"), "4");
        let ctrl = pci.join("nvme/nvme0");
        write(
            &ctrl.join("model"),
            "Samsung SSD 980 PRO 1TB                 ",
        );
        write(&ctrl.join("transport"), "pcie");
        link("../../../0000:01:00.0", &ctrl.join("device"));
        let disk = ctrl.join("nvme0n1");
        queue(&disk, "0", "512", "512");
        link("../../nvme0", &disk.join("device"));
        write(&disk.join("nvme0n1p1/partition"), "1");
        link(
            "../../devices/pci0000:00/0000:00:01.1/0000:01:00.0/nvme/nvme0/nvme0n1/nvme0n1p1",
            &root.join("dev/block/259:1"),
        );
        link(
            "../../devices/pci0000:00/0000:00:01.1/0000:01:00.0/nvme/nvme0/nvme0n1",
            &root.join("dev/block/259:0"),
        );
        link(
            "../../devices/pci0000:00/0000:00:01.1/0000:01:00.0/nvme/nvme0",
            &root.join("class/nvme/nvme0"),
        );
    }

    fn sata_fixture(root: &Path) {
        let scsi = root.join("devices/pci0000:00/0000:00:1f.2/ata3/host2/target2:0:0/2:0:0:0");
        write(&scsi.join("model"), "WDC WD40EFRX-68N");
        let disk = scsi.join("block/sda");
        queue(&disk, "1", "512", "4096");
        link("../../../2:0:0:0", &disk.join("device"));
        write(&disk.join("sda2/partition"), "2");
        link(
            "../../devices/pci0000:00/0000:00:1f.2/ata3/host2/target2:0:0/2:0:0:0/block/sda/sda2",
            &root.join("dev/block/8:2"),
        );
        write(&root.join("class/ata_link/link3/sata_spd"), "6.0 Gbps");
    }

    /// A SAS disk behind an expander, on a 12 Gb/s narrow port, and a SAS-4 disk on a 2-phy
    /// wide port straight off the HBA.
    fn sas_fixture(root: &Path) {
        let hba = "devices/pci0000:00/0000:00:03.0/0000:02:00.0/host0";
        let sdb = sas_disk(
            root,
            hba,
            "port-0:0/expander-0:0/port-0:0:3",
            "0:0:3",
            "sdb 8:16",
        );
        write(&sdb.join("device/model"), "ST8000NM0075");
        sas_phys(
            root,
            hba,
            "port-0:0/expander-0:0/port-0:0:3",
            &["phy-0:0:3"],
            "12.0 Gbit",
        );
        sas_disk(root, hba, "port-0:1", "0:1", "sdc 8:32");
        sas_phys(root, hba, "port-0:1", &["phy-0:4", "phy-0:5"], "22.5 Gbit");
    }

    /// A disk `NAME MAJ:MIN` at `hba/port/end_device-END/...`, linked from dev/block.
    fn sas_disk(root: &Path, hba: &str, port: &str, end: &str, name_dev: &str) -> PathBuf {
        let (name, dev) = name_dev.split_once(' ').unwrap();
        let rel = format!("{hba}/{port}/end_device-{end}/target0:0:0/0:0:0:0/block/{name}");
        let disk = root.join(&rel);
        queue(&disk, "1", "512", "4096");
        std::fs::create_dir_all(disk.join("device")).unwrap();
        link(&format!("../../{rel}"), &root.join("dev/block").join(dev));
        disk
    }

    fn sas_phys(root: &Path, hba: &str, port: &str, phys: &[&str], rate: &str) {
        for phy in phys {
            let dir = root
                .join(hba)
                .join(port)
                .join(phy)
                .join("sas_phy")
                .join(phy);
            write(&dir.join("negotiated_linkrate"), rate);
        }
    }

    fn virtio_fixture(root: &Path) {
        let vdev = root.join("devices/pci0000:00/0000:00:02.0/virtio1");
        write(&vdev.join("modalias"), "virtio:d00000002v00001AF4");
        let disk = vdev.join("block/vda");
        queue(&disk, "1", "512", "512");
        link("../../../virtio1", &disk.join("device"));
        link(
            "../../devices/pci0000:00/0000:00:02.0/virtio1/block/vda",
            &root.join("dev/block/254:0"),
        );
        let dm = root.join("devices/virtual/block/dm-0");
        queue(&dm, "0", "4096", "4096");
        link(
            "../../devices/virtual/block/dm-0",
            &root.join("dev/block/252:0"),
        );
    }

    #[test]
    fn device_info_nvme_gen4_x4_partition() {
        let tmp = tempfile::tempdir().unwrap();
        nvme_fixture(tmp.path());
        for minor in [1, 0] {
            let d = device_info_from(tmp.path(), 259, minor).unwrap();
            assert_eq!(d.name, "nvme0n1");
            assert_eq!(d.model.as_deref(), Some("Samsung SSD 980 PRO 1TB"));
            assert_eq!(d.rotational, Some(false));
            assert_eq!(d.logical_block, Some(512));
            assert_eq!(d.interface.as_deref(), Some("PCIe 4.0 x4"));
            assert!((d.interface_bps.unwrap() - 4.0 * 1.969e9).abs() < 1.0);
        }
        assert_eq!(logical_block_from(tmp.path(), 259, 1), Some(512));
        assert!(device_info_from(tmp.path(), 259, 7).is_none());
    }

    #[test]
    fn device_info_nvme_multipath_uses_class_controller() {
        let tmp = tempfile::tempdir().unwrap();
        nvme_fixture(tmp.path());
        // Native multipath: the namespace hangs under the subsystem, not the controller.
        let sub = tmp
            .path()
            .join("devices/virtual/nvme-subsystem/nvme-subsys0");
        write(&sub.join("model"), "Some Drive");
        let disk = sub.join("nvme0n2");
        queue(&disk, "0", "4096", "4096");
        link("../../nvme-subsys0", &disk.join("device"));
        link(
            "../../devices/virtual/nvme-subsystem/nvme-subsys0/nvme0n2",
            &tmp.path().join("dev/block/259:5"),
        );
        let d = device_info_from(tmp.path(), 259, 5).unwrap();
        assert_eq!(d.model.as_deref(), Some("Some Drive"));
        assert_eq!(d.interface.as_deref(), Some("PCIe 4.0 x4"));
    }

    #[test]
    fn device_info_sata_virtio_dm() {
        let tmp = tempfile::tempdir().unwrap();
        sata_fixture(tmp.path());
        virtio_fixture(tmp.path());
        let sda = device_info_from(tmp.path(), 8, 2).unwrap();
        assert_eq!(sda.name, "sda");
        assert_eq!(sda.model.as_deref(), Some("WDC WD40EFRX-68N"));
        assert_eq!(sda.rotational, Some(true));
        assert_eq!(sda.physical_block, Some(4096));
        assert_eq!(sda.interface.as_deref(), Some("SATA 6.0 Gb/s"));
        assert!((sda.interface_bps.unwrap() - 600e6).abs() < 1.0);

        let vda = device_info_from(tmp.path(), 254, 0).unwrap();
        assert_eq!(vda.name, "vda");
        assert_eq!(vda.interface.as_deref(), Some("virtio"));
        assert_eq!(vda.interface_bps, None);
        assert_eq!(vda.model, None);

        let dm = device_info_from(tmp.path(), 252, 0).unwrap();
        assert_eq!(dm.name, "dm-0");
        assert_eq!(dm.interface, None);
        assert_eq!(dm.logical_block, Some(4096));
    }

    #[test]
    fn device_info_sas_narrow_wide_and_sas4() {
        let tmp = tempfile::tempdir().unwrap();
        sas_fixture(tmp.path());
        let sdb = device_info_from(tmp.path(), 8, 16).unwrap();
        assert_eq!(sdb.model.as_deref(), Some("ST8000NM0075"));
        assert_eq!(sdb.interface.as_deref(), Some("SAS 12.0 Gb/s"));
        assert!((sdb.interface_bps.unwrap() - 1.2e9).abs() < 1.0);
        let p = disk_peak(Some(&sdb), &Spec::default(), false, false).unwrap();
        assert!(
            p.basis.starts_with("SAS 12.0 Gb/s link: 1.2"),
            "{}",
            p.basis
        );
        assert!(p.basis.contains("8b/10b"), "{}", p.basis);
        // Two 22.5 Gbit phys: 2 x 2.4 GB/s after 128b/150b.
        let sdc = device_info_from(tmp.path(), 8, 32).unwrap();
        assert_eq!(sdc.interface.as_deref(), Some("SAS 22.5 Gb/s x2"));
        assert!((sdc.interface_bps.unwrap() - 4.8e9).abs() < 1.0);
        let p = disk_peak(Some(&sdc), &Spec::default(), true, false).unwrap();
        assert!(p.basis.contains("128b/150b"), "{}", p.basis);
    }

    #[test]
    fn device_info_here_does_not_panic() {
        let tmp = tempfile::tempdir().unwrap();
        eprintln!("device_info(tempdir) = {:?}", device_info(tmp.path()));
        eprintln!(
            "device_info(/dev/shm) = {:?}",
            device_info(Path::new("/dev/shm"))
        );
    }

    #[test]
    fn disk_peak_spec_wins_then_interface() {
        let tmp = tempfile::tempdir().unwrap();
        nvme_fixture(tmp.path());
        let dev = device_info_from(tmp.path(), 259, 0).unwrap();
        let none = Spec::default();
        let p = disk_peak(Some(&dev), &none, false, false).unwrap();
        assert!((p.value - 7.876e9).abs() < 1.0);
        assert_eq!(
            p.basis,
            "PCIe 4.0 x4 link: 4 lanes x 1.969 GB/s (interface limit, not the device's)"
        );
        assert_eq!(disk_peak(Some(&dev), &none, false, true), None);
        assert_eq!(disk_peak(None, &none, true, false), None);

        let mut spec = Spec::default();
        spec.disk.read_bps = Some(7.0e9);
        spec.disk.write_iops = Some(1.0e6);
        let p = disk_peak(Some(&dev), &spec, false, false).unwrap();
        assert_eq!(
            (p.value, p.basis.as_str()),
            (7.0e9, "spec file disk.read_bps")
        );
        let p = disk_peak(None, &spec, true, true).unwrap();
        assert_eq!(
            (p.value, p.basis.as_str()),
            (1.0e6, "spec file disk.write_iops")
        );
        // Write throughput has no spec figure: back to the link.
        let p = disk_peak(Some(&dev), &spec, true, false).unwrap();
        assert!(p.basis.starts_with("PCIe 4.0 x4 link"));

        sata_fixture(tmp.path());
        let sda = device_info_from(tmp.path(), 8, 2).unwrap();
        let p = disk_peak(Some(&sda), &none, true, false).unwrap();
        assert!(
            p.basis
                .starts_with("SATA 6.0 Gb/s link: 600 MB/s after 8b/10b"),
            "{}",
            p.basis
        );
    }

    #[test]
    fn work_dir_created_and_removed() {
        let tmp = tempfile::tempdir().unwrap();
        let path = {
            let wd = WorkDir::create(tmp.path()).unwrap();
            let p = wd.path().to_path_buf();
            assert!(p.is_dir());
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            assert!(name.starts_with(&format!("hostbench-{}-", std::process::id())));
            assert!(registry().contains(&p));
            std::fs::create_dir(p.join("sub")).unwrap();
            std::fs::write(p.join("sub/file"), b"data").unwrap();
            p
        };
        assert!(!path.exists());
        assert!(!registry().contains(&path));
    }

    #[test]
    fn work_dir_never_reuses_an_existing_name() {
        let tmp = tempfile::tempdir().unwrap();
        let taken = tmp.path().join("hostbench-1-1");
        std::fs::create_dir(&taken).unwrap();
        std::fs::write(taken.join("keep"), b"someone else's").unwrap();
        let wd = WorkDir::create_with(tmp.path(), |i| format!("hostbench-1-{}", i + 1)).unwrap();
        assert_eq!(wd.path(), tmp.path().join("hostbench-1-2"));
        drop(wd);
        assert!(
            taken.join("keep").exists(),
            "existing directory was touched"
        );
        // Every candidate taken: an error, not reuse.
        let e = WorkDir::create_with(tmp.path(), |_| "hostbench-1-1".to_string()).unwrap_err();
        assert!(matches!(e, BenchError::Io { .. }));
        assert!(taken.join("keep").exists());
    }

    #[test]
    fn work_dir_parent_missing_is_an_error() {
        let tmp = tempfile::tempdir().unwrap();
        assert!(WorkDir::create(&tmp.path().join("no/such")).is_err());
    }

    #[test]
    fn signal_cleanup_pieces() {
        let tmp = tempfile::tempdir().unwrap();
        let wd = WorkDir::create(tmp.path()).unwrap();
        std::fs::write(wd.path().join("f"), b"x").unwrap();
        // Only this test's directory: tests run in parallel and share the registry.
        let (removed, failed) = remove_dirs(vec![wd.path().to_path_buf()]);
        assert!(removed.contains(&wd.path().to_path_buf()));
        assert!(failed.is_empty(), "{failed:?}");
        assert!(!wd.path().exists());
        let m = interrupted_message(&[wd.path().to_path_buf()], &[]);
        assert_eq!(
            m,
            format!("hostbench: interrupted; removed {}", wd.path().display())
        );
        drop(wd); // already gone: Drop must stay quiet and unregister
        assert_eq!(exit_code_for(libc::SIGINT), 130);
        assert_eq!(exit_code_for(libc::SIGTERM), 143);
        assert_eq!(
            interrupted_message(&[], &[]),
            "hostbench: interrupted; no work directory to remove"
        );
    }
}

//! The filesystem under a path: its name (from the `statfs` magic), its size and free space, and
//! the free-space check with a margin.
//!
//! Why this is its own module: tmpfs, ZFS, overlay and network filesystems accept "direct" I/O that
//! never reaches storage, so the filesystem is named (`fs_info`) and those are labelled
//! (`FsInfo::caching_note`). Free space is checked with a margin (`check_free_space`), since
//! filling the disk that holds `/` hurts more than a refused run (ENOSPC mid-run is still handled
//! by the caller).

use std::io;
use std::path::Path;

use hostbench_core::units::format_bytes_iec;
use hostbench_core::BenchError;
use serde::Serialize;

const GIB: u64 = 1 << 30;

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

/// An overlay's upper directory, where every write and every copied-up file goes, and the
/// filesystem it is on; found only where this mount namespace can see it (not from inside a
/// container whose overlay the host set up, the usual case, which keeps the generic note).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OverlayUpper {
    pub upperdir: String,
    pub fs_type: String,
}

impl OverlayUpper {
    /// The label for every record: memory where the upper directory is on tmpfs or ramfs (an
    /// overlay over tmpfs measures memory, as tmpfs does), else which filesystem took the I/O.
    pub fn note(&self) -> String {
        match self.fs_type.as_str() {
            "tmpfs" | "ramfs" => format!(
                "memory, not storage: an overlay whose upper directory {} is on {}",
                self.upperdir, self.fs_type
            ),
            fs => format!(
                "overlay: I/O goes to its upper directory {}, on {fs}",
                self.upperdir
            ),
        }
    }
}

/// The upper directory of the overlay mounted at `dir` or above it, from
/// `/proc/self/mountinfo`; None where `dir` is not on an overlay or the upper directory cannot be
/// read from here.
pub fn overlay_upper(dir: &Path) -> Option<OverlayUpper> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let upperdir = overlay_upperdir(&text, &dir.canonicalize().ok()?)?;
    let fs = fs_info(Path::new(&upperdir)).ok()?;
    Some(OverlayUpper {
        upperdir,
        fs_type: fs.fs_type,
    })
}

/// `upperdir=` of the mount holding `dir` (the deepest mount point above it, the last mounted
/// where several share one), if that mount is an overlay.
fn overlay_upperdir(mountinfo: &str, dir: &Path) -> Option<String> {
    let mut best: Option<(usize, Option<String>)> = None;
    for line in mountinfo.lines() {
        // "36 35 98:0 /root /mnt/point rw,noatime shared:1 - overlay overlay rw,upperdir=/u,…"
        let Some((pre, post)) = line.split_once(" - ") else {
            continue;
        };
        let Some(point) = pre.split(' ').nth(4).map(unescape_mount) else {
            continue;
        };
        let point = Path::new(&point);
        if !dir.starts_with(point) {
            continue;
        }
        let mut post = post.split(' ');
        let fs_type = post.next().unwrap_or("");
        let options = post.nth(1).unwrap_or("");
        let upper = (fs_type == "overlay")
            .then(|| {
                options
                    .split(',')
                    .find_map(|o| o.strip_prefix("upperdir="))
                    .map(unescape_mount)
            })
            .flatten();
        let depth = point.components().count();
        if best.as_ref().is_none_or(|(d, _)| depth >= *d) {
            best = Some((depth, upper));
        }
    }
    best?.1
}

/// mountinfo escapes space, tab, newline and backslash as `\ooo` octal.
fn unescape_mount(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal = b
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match (b[i], octal) {
            (b'\\', Some(d)) => {
                out.push(d.iter().fold(0u8, |v, c| v.wrapping_mul(8) + (c - b'0')));
                i += 4;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
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

pub(super) fn c_path(path: &Path) -> io::Result<std::ffi::CString> {
    use std::os::unix::ffi::OsStrExt;
    std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains a NUL byte"))
}

pub(super) fn statvfs(path: &Path) -> io::Result<libc::statvfs> {
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

/// The bytes a run may write on `fs`: its free space less the margin of `check_free_space`.
pub fn usable_bytes(fs: &FsInfo) -> u64 {
    let margin = (fs.total_bytes / 10).min(GIB);
    fs.free_bytes.saturating_sub(margin)
}

fn check_free_space_in(fs: &FsInfo, dir: &Path, needed: u64, what: &str) -> Result<(), BenchError> {
    let usable = usable_bytes(fs);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::place::test_util::msg;

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
    fn an_overlay_is_followed_to_its_upper_directory() {
        let info = "\
22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw
40 22 0:35 / /run/t rw shared:5 - tmpfs tmpfs rw,size=65536k
41 22 0:36 / /srv/my\\040root rw shared:6 - overlay overlay \
rw,lowerdir=/srv/lower,upperdir=/run/t/up\\040per,workdir=/run/t/work
42 41 254:0 /data /srv/my\\040root/data rw shared:7 - ext4 /dev/vda rw
";
        let up = |d: &str| overlay_upperdir(info, Path::new(d));
        assert_eq!(up("/srv/my root/x").as_deref(), Some("/run/t/up per"));
        assert_eq!(up("/srv/my root").as_deref(), Some("/run/t/up per"));
        // A mount inside the overlay, or no overlay at all.
        assert_eq!(up("/srv/my root/data/y"), None);
        assert_eq!(up("/srv/my rootx"), None);
        assert_eq!(up("/home"), None);
        let o = OverlayUpper {
            upperdir: "/run/t/up per".into(),
            fs_type: "tmpfs".into(),
        };
        assert_eq!(
            o.note(),
            "memory, not storage: an overlay whose upper directory /run/t/up per is on tmpfs"
        );
        let o = OverlayUpper {
            fs_type: "ext4".into(),
            ..o
        };
        assert!(o
            .note()
            .starts_with("overlay: I/O goes to its upper directory"));
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
}

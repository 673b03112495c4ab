//! The user's `--dir`: accept only an existing, writable *directory*, canonicalised.
//!
//! Why this is its own module: a benchmark that can overwrite `/dev/sda` eventually will, so block
//! devices are refused outright (`check_dir`), and writability is proven by creating a file rather
//! than trusted from permission bits (root bypasses them; ACLs, quotas, LSMs and read-only bind
//! mounts do not). A read-only mount is named as such before anything is created.

use std::io;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

use hostbench_core::BenchError;

use super::direct::ProbeFile;
use super::fs::statvfs;

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::place::test_util::msg;

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
}

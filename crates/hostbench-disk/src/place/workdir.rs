//! The work directory: a fresh `hostbench-<pid>-<nanos>` directory that holds every file
//! hostbench writes, removed on success, failure and Ctrl-C.
//!
//! Why this is its own module: fio leaves its files behind. Here each `WorkDir` is registered while
//! it exists, removed when it drops, and removed by a `sigwait` thread on SIGINT, SIGTERM and
//! SIGHUP (`install_signal_cleanup`) before the process exits 128 + signal.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use hostbench_core::BenchError;

use super::direct::now_nanos;

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

/// The line a Ctrl-C prints when it removed (or failed to remove) work directories.
fn interrupted_message(removed: &[PathBuf], failed: &[String]) -> String {
    let list: Vec<String> = removed.iter().map(|p| p.display().to_string()).collect();
    let mut msg = format!("hostbench: interrupted; removed {}", list.join(", "));
    for f in failed {
        msg.push_str("; ");
        msg.push_str(f);
    }
    msg
}

/// Remove the work directories on SIGINT, SIGTERM and SIGHUP, through the process's one signal
/// thread (`hostbench_core::interrupt`: the clean-ups run first, then the command's handler, then
/// the process exits 128 + signal). Idempotent.
///
/// **Call it before any other thread starts** (first thing in `main`): see
/// `hostbench_core::interrupt::install` for why.
pub fn install_signal_cleanup() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        hostbench_core::interrupt::add_cleanup(|| {
            let (removed, failed) = remove_registered();
            (!removed.is_empty() || !failed.is_empty())
                .then(|| interrupted_message(&removed, &failed))
        });
        hostbench_core::interrupt::install();
    });
}

#[cfg(test)]
mod tests {
    use super::*;

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
    }
}

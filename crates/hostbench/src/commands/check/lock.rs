//! One `hostbench check` at a time per node. A health check that fires while a Prolog's check is
//! measuring would measure a node busy with the other check (and find it slow): instead the
//! second waits for the first (an exclusive flock on `check-<node>.lock` in the run directory),
//! then reuses the first's verdict if it answered the same question (level, --only, yardsticks,
//! counter root) and finished while it waited, else measures itself. The wait is bounded by --max-time (else `WAIT_DEFAULT`). The run
//! directory is HOSTBENCH_RUN_DIR, else $XDG_RUNTIME_DIR/hostbench, else /run/hostbench as root,
//! else /tmp/hostbench-<uid>.

use std::fs::{File, OpenOptions};
use std::io::{Read as _, Seek as _, Write as _};
use std::os::fd::AsRawFd as _;
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::Context as _;
use serde::{Deserialize, Serialize};

/// How long a check waits for another one without --max-time.
pub const WAIT_DEFAULT: Duration = Duration::from_secs(600);

/// The verdict a finished check leaves for one that waited on it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Last {
    pub level: String,
    /// Everything that decides the verdict besides the node (level, --only, --expect,
    /// --baseline, --peak-share, --tolerance, --disk-dir, HOSTBENCH_HEALTH_ROOT): a verdict is
    /// reused only for the same question.
    pub question: String,
    pub verdict: hostbench_core::check::Verdict,
    pub reason: String,
    pub first_line: String,
    pub pid: u32,
    pub finished_unix: f64,
}

pub enum Entry {
    /// This check measures; `waited` says for how long and on which pid it waited, if it did.
    Own {
        held: Held,
        waited: Option<(Duration, String)>,
    },
    /// The check that held the lock finished while this one waited, at the same level: its verdict.
    Reuse { last: Last, waited: Duration },
}

/// The lock, released when dropped (closing the file releases the flock).
pub struct Held {
    _file: File,
    last: PathBuf,
}

impl Held {
    /// Leave this check's verdict for a check waiting on it.
    pub fn leave(&self, last: &Last) {
        if let Ok(body) = serde_json::to_vec(last) {
            let tmp = self.last.with_extension("last.tmp");
            if std::fs::write(&tmp, body).is_ok() {
                let _ = std::fs::rename(&tmp, &self.last);
            }
        }
    }
}

fn run_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("HOSTBENCH_RUN_DIR").filter(|d| !d.is_empty()) {
        return d.into();
    }
    if let Some(d) = std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(d).join("hostbench");
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    let uid = unsafe { libc::geteuid() };
    if uid == 0 && std::path::Path::new("/run").is_dir() {
        "/run/hostbench".into()
    } else {
        format!("/tmp/hostbench-{uid}").into()
    }
}

pub fn now_unix() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

fn try_lock(f: &File) -> bool {
    // SAFETY: flock on a descriptor this process owns.
    unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) == 0 }
}

/// Take the node's check lock, waiting up to `bound` for a check that holds it. `Err`: the other
/// check still held it after `bound` (why, in words). `may_reuse` false (the caller writes a
/// document of its own: --json, --openmetrics, --write-expect): after a wait it measures anyway.
pub fn enter(
    node: &str,
    level: &str,
    question: &str,
    bound: Duration,
    may_reuse: bool,
) -> anyhow::Result<Result<Entry, String>> {
    let dir = run_dir();
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let key: String = node
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let path = dir.join(format!("check-{key}.lock"));
    let last = dir.join(format!("check-{key}.last"));
    let mut file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(&path)
        .with_context(|| format!("opening {}", path.display()))?;
    let arrived = now_unix();
    let t0 = Instant::now();
    let mut waited = None;
    if !try_lock(&file) {
        let mut holder = String::new();
        let _ = file.read_to_string(&mut holder);
        let holder = holder.trim().to_string();
        loop {
            std::thread::sleep(Duration::from_millis(100));
            if try_lock(&file) {
                break;
            }
            if t0.elapsed() >= bound {
                return Ok(Err(format!(
                    "another check on this node (pid {holder}) was still running after {:.0} s",
                    bound.as_secs_f64()
                )));
            }
        }
        let previous: Option<Last> = std::fs::read(&last)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok());
        if let Some(p) = previous.filter(|p| {
            may_reuse && p.finished_unix >= arrived && p.level == level && p.question == question
        }) {
            return Ok(Ok(Entry::Reuse {
                last: p,
                waited: t0.elapsed(),
            }));
        }
        waited = Some((t0.elapsed(), holder));
    }
    let _ = file.set_len(0);
    let _ = file.rewind();
    let _ = write!(file, "{}", std::process::id());
    Ok(Ok(Entry::Own {
        held: Held { _file: file, last },
        waited,
    }))
}

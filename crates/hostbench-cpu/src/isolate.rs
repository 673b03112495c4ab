//! Try code that might crash the process in a child process first.
//!
//! A kernel that has never run on the hardware it targets (the AMX HPL-MxP kernel, written
//! without an AMX machine at hand) could fault: a tile configuration the CPU rejects, a tile
//! load outside its buffer. A run must not die of it. [`in_child`] forks, runs the trial in the
//! child, and hands back what it returned; a child that crashes, panics or hangs becomes an
//! error naming that, and the caller passes the code over with the reason.
//!
//! The child of a multithreaded process has only the forking thread. glibc's `fork` leaves its
//! allocator usable in the child, so the trial may allocate and start threads of its own; a
//! lock another thread held at the fork stays held in the child, which the time limit covers.

use std::io::Read;
use std::os::fd::{FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

/// Run `trial` in a forked child, at most `limit`: its `Ok` text, or why not (`what` names the
/// trial in the messages).
pub fn in_child(
    what: &str,
    limit: Duration,
    trial: impl FnOnce() -> Result<String, String>,
) -> Result<String, String> {
    let mut fds = [0; 2];
    // SAFETY: a two-element array for pipe2 to fill.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(format!(
            "could not try {what} in a child process (pipe: {})",
            std::io::Error::last_os_error()
        ));
    }
    // SAFETY: both descriptors were just opened and are owned here alone.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // SAFETY: the child runs only the trial and leaves through `_exit` (no atexit handlers, no
    // unwinding into the caller's frames); see the module header for what it may do.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(format!(
            "could not try {what} in a child process (fork: {})",
            std::io::Error::last_os_error()
        ));
    }
    if pid == 0 {
        drop(read);
        // A trial that faults is an expected outcome, not a bug to keep a core file of.
        let none = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: a valid rlimit; it lowers this child's own limit only.
        unsafe { libc::setrlimit(libc::RLIMIT_CORE, &none) };
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(trial));
        let report = match outcome {
            Ok(Ok(text)) => format!("ok\n{text}"),
            Ok(Err(why)) => format!("err\n{why}"),
            Err(_) => "err\nit panicked".to_string(),
        };
        let mut file = std::fs::File::from(write);
        let _ = std::io::Write::write_all(&mut file, report.as_bytes());
        // SAFETY: leaves the child at once, as a forked child of a threaded process must.
        unsafe { libc::_exit(0) };
    }
    drop(write);
    let text = read_until(read, Instant::now() + limit);
    let mut status = 0;
    if text.is_none() {
        // SAFETY: `pid` is our child, not yet reaped.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    // SAFETY: waits for our own child; `status` is a valid out-pointer.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    match text {
        None => Err(format!(
            "{what} did not finish within {} s in a child process",
            limit.as_secs_f64()
        )),
        Some(t) => match t.split_once('\n') {
            Some(("ok", rest)) => Ok(rest.to_string()),
            Some(("err", why)) => Err(why.to_string()),
            // Nothing, or not all of it: the child died before it could report.
            _ => Err(format!(
                "{what} crashed in a child process ({})",
                if libc::WIFSIGNALED(status) {
                    signal_name(libc::WTERMSIG(status))
                } else {
                    format!("exit status {}", libc::WEXITSTATUS(status))
                }
            )),
        },
    }
}

/// Everything the child writes until it closes the pipe (at exit or death), or `None` at the
/// deadline.
fn read_until(read: OwnedFd, deadline: Instant) -> Option<String> {
    let mut file = std::fs::File::from(read);
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return None;
        }
        let mut p = libc::pollfd {
            fd: std::os::fd::AsRawFd::as_raw_fd(&file),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = left.as_millis().clamp(1, i32::MAX as u128) as i32;
        // SAFETY: one valid pollfd.
        let r = unsafe { libc::poll(&mut p, 1, ms) };
        if r < 0 {
            // A signal: look again; anything else: the pipe is gone, take what came.
            if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Some(String::from_utf8_lossy(&out).into_owned());
        }
        if r == 0 {
            continue;
        }
        match file.read(&mut buf) {
            Ok(0) => return Some(String::from_utf8_lossy(&out).into_owned()),
            Ok(k) => out.extend_from_slice(&buf[..k]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return Some(String::from_utf8_lossy(&out).into_owned()),
        }
    }
}

/// "SIGSEGV", or "signal 42".
fn signal_name(sig: i32) -> String {
    match sig {
        libc::SIGSEGV => "SIGSEGV".into(),
        libc::SIGILL => "SIGILL".into(),
        libc::SIGBUS => "SIGBUS".into(),
        libc::SIGFPE => "SIGFPE".into(),
        libc::SIGABRT => "SIGABRT".into(),
        libc::SIGKILL => "SIGKILL".into(),
        s => format!("signal {s}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMIT: Duration = Duration::from_secs(20);

    #[test]
    fn what_the_child_returns_comes_back() {
        assert_eq!(
            in_child("a trial", LIMIT, || Ok(format!("{} GFLOP/s", 6 * 7))),
            Ok("42 GFLOP/s".to_string())
        );
        assert_eq!(
            in_child("a trial", LIMIT, || Err("C(3, 4) = 1, expected 2".into())),
            Err("C(3, 4) = 1, expected 2".to_string())
        );
        // The child may allocate and run threads of its own.
        let sum = in_child("a trial", LIMIT, || {
            let v: Vec<u64> = (0..100_000).collect();
            let t = std::thread::spawn(move || v.iter().sum::<u64>());
            Ok(t.join().unwrap().to_string())
        });
        assert_eq!(sum, Ok("4999950000".to_string()));
    }

    #[test]
    fn a_crash_a_panic_and_a_hang_are_errors_not_the_end_of_the_process() {
        // An undefined instruction: what a tile instruction without the kernel's permission
        // raises.
        let crash = in_child("the kernel", LIMIT, || {
            // SAFETY: the child faults on purpose; nothing after it runs.
            #[cfg(target_arch = "x86_64")]
            unsafe {
                std::arch::asm!("ud2")
            };
            // SAFETY: as above.
            #[cfg(target_arch = "aarch64")]
            unsafe {
                std::arch::asm!("udf #0")
            };
            Ok(String::new())
        });
        assert_eq!(
            crash,
            Err("the kernel crashed in a child process (SIGILL)".to_string())
        );
        let panic = in_child("the kernel", LIMIT, || panic!("a bug"));
        assert_eq!(panic, Err("it panicked".to_string()));
        let hang = in_child("the kernel", Duration::from_millis(300), || {
            std::thread::sleep(Duration::from_secs(30));
            Ok(String::new())
        });
        assert_eq!(
            hang,
            Err("the kernel did not finish within 0.3 s in a child process".to_string())
        );
    }
}

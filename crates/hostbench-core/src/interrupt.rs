//! Ctrl-C (SIGINT), SIGTERM and SIGHUP for the whole process: one `sigwait` thread that first runs
//! the quick clean-ups (the disk phase's work directories), then the command's own handler (`run`
//! writes the partial run's reports and history entry and prints what it kept), then exits
//! 128 + signal. A second signal while the handler runs ends the process at once, after the
//! clean-ups, as iperf3 and fio do.
//!
//! Why a `sigwait` thread rather than a handler: a signal handler may only call async-signal-safe
//! functions, and removing a directory tree, taking a mutex, allocating, writing reports and
//! printing are not. A thread that waits for the blocked signals synchronously runs ordinary Rust
//! code.
//!
//! While the handler runs, the measuring threads go on until the process exits: [`interrupted`]
//! tells the runner to stop saving (the handler owns run.json from then on), and
//! [`park_if_interrupted`] keeps a command that finishes in that window from exiting before the
//! handler has written what it measured.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};

/// A clean-up run on the first signal, before the handler: returns a line to print, if any.
type Cleanup = Box<dyn Fn() -> Option<String> + Send>;
/// The command's handler, given the signal's number.
type Handler = Box<dyn FnOnce(i32) + Send>;

static CLEANUPS: Mutex<Vec<Cleanup>> = Mutex::new(Vec::new());
static HANDLER: Mutex<Option<Handler>> = Mutex::new(None);
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

fn lock<T>(m: &'static Mutex<T>) -> MutexGuard<'static, T> {
    // A panic while holding the lock leaves data that is still usable; clean-up must go on.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether a signal has arrived: the runner stops writing the partial file from then on.
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// Run `cleanup` on the first signal (and on a second, if the first's did not finish).
pub fn add_cleanup(cleanup: impl Fn() -> Option<String> + Send + 'static) {
    lock(&CLEANUPS).push(Box::new(cleanup));
}

/// What the command does with what it measured when a signal arrives (replaces any earlier one).
pub fn on_interrupt(handler: impl FnOnce(i32) + Send + 'static) {
    *lock(&HANDLER) = Some(Box::new(handler));
}

/// A command that is about to exit while the handler is still writing waits for it: the handler
/// ends the process itself.
pub fn park_if_interrupted() {
    while interrupted() {
        std::thread::park();
    }
}

/// The shell convention for "killed by signal N".
pub fn exit_code_for(sig: i32) -> i32 {
    128 + sig
}

/// The signal's usual name, for messages and the run's record of it.
pub fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGINT => "SIGINT",
        libc::SIGTERM => "SIGTERM",
        libc::SIGHUP => "SIGHUP",
        _ => "signal",
    }
}

/// Run the clean-ups once; whether any printed a line.
fn run_cleanups() -> bool {
    // Taken out of the list: a clean-up runs once, and a second signal does not wait for a lock
    // that the first one's clean-up holds.
    let cleanups = std::mem::take(&mut *lock(&CLEANUPS));
    let mut said = false;
    for c in &cleanups {
        if let Some(line) = c() {
            eprintln!("{line}");
            said = true;
        }
    }
    said
}

/// Install the signal thread. Idempotent.
///
/// **Call it before any other thread starts**: it blocks the signals in the calling thread, and
/// only threads spawned afterwards inherit that mask. A thread created earlier would keep them
/// unblocked, the kernel could deliver Ctrl-C there, and the default action would kill the
/// process with no clean-up. Child processes are unaffected: `std::process::Command` resets the
/// signal mask before `exec`.
pub fn install() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let set = signals();
        // SAFETY: `set` is an initialised sigset_t; a null old-set pointer is allowed.
        let rc = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
        if rc != 0 {
            eprintln!(
                "hostbench: warning: cannot block signals ({}); nothing is cleaned up or kept \
                 on Ctrl-C",
                std::io::Error::from_raw_os_error(rc)
            );
            return;
        }
        let spawned = std::thread::Builder::new()
            .name("hostbench-signals".to_string())
            .spawn(move || loop {
                let mut sig: libc::c_int = 0;
                // SAFETY: `set` is a valid sigset_t owned by this closure, `sig` a valid out-pointer.
                if unsafe { libc::sigwait(&set, &mut sig) } != 0 {
                    continue;
                }
                if INTERRUPTED.swap(true, Ordering::SeqCst) {
                    // The second signal: no more waiting for reports.
                    run_cleanups();
                    eprintln!("hostbench: interrupted again; exiting now");
                    std::process::exit(exit_code_for(sig));
                }
                let said = run_cleanups();
                match lock(&HANDLER).take() {
                    // The handler runs on its own thread so that this one keeps listening for
                    // the second signal.
                    Some(handler) => {
                        let spawned = std::thread::Builder::new()
                            .name("hostbench-interrupted".into())
                            .spawn(move || {
                                handler(sig);
                                std::process::exit(exit_code_for(sig));
                            });
                        if spawned.is_err() {
                            std::process::exit(exit_code_for(sig));
                        }
                    }
                    None => {
                        // Never silent: a Ctrl-C that prints nothing looks like a crash.
                        if !said {
                            eprintln!("hostbench: interrupted ({})", signal_name(sig));
                        }
                        std::process::exit(exit_code_for(sig))
                    }
                }
            });
        if let Err(e) = spawned {
            // Without the waiting thread, blocked signals would make Ctrl-C do nothing at all;
            // unblocking restores the default (kill, nothing cleaned up) instead.
            // SAFETY: as above.
            unsafe { libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut()) };
            eprintln!(
                "hostbench: warning: cannot start the signal thread ({e}); nothing is cleaned \
                 up or kept on Ctrl-C"
            );
        }
    });
}

fn signals() -> libc::sigset_t {
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

    #[test]
    fn exit_codes_and_names_follow_the_shell() {
        assert_eq!(exit_code_for(libc::SIGINT), 130);
        assert_eq!(exit_code_for(libc::SIGTERM), 143);
        assert_eq!(signal_name(libc::SIGHUP), "SIGHUP");
        assert!(!interrupted());
    }
}

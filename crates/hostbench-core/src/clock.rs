//! The core clock, measured rather than believed.
//!
//! Theoretical peaks are cores × clock × operations per cycle, and the clock is the factor every
//! reference tool gets wrong: the nominal clock, the TSC and `/proc/cpuinfo` can be 30 % off under
//! turbo or in a VM. Here the clock is timed directly: a chain of dependent register-register adds
//! retires one add per cycle on every x86-64 and AArch64 core we know of, so adds per second is
//! cycles per second. Register-register (not add-immediate) because recent Intel cores fold
//! immediate adds at rename, which would make the chain run faster than one per cycle.

use std::time::{Duration, Instant};

/// Adds per call of `add_chain` (unrolled inside the asm block).
const ADDS_PER_BLOCK: u64 = 100;

/// Run `blocks × 100` dependent adds; returns the final value so the work is observable.
#[inline(never)]
pub fn add_chain(blocks: u64) -> u64 {
    let mut x: u64 = 0;
    let one: u64 = std::hint::black_box(1);
    for _ in 0..blocks {
        add100(&mut x, one);
    }
    x
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn add100(x: &mut u64, one: u64) {
    // SAFETY: pure register arithmetic on two general-purpose registers; no memory, no stack.
    unsafe {
        std::arch::asm!(
            ".rept 100",
            "add {x}, {one}",
            ".endr",
            x = inout(reg) *x,
            one = in(reg) one,
            options(nomem, nostack),
        );
    }
}

#[cfg(target_arch = "aarch64")]
#[inline(always)]
fn add100(x: &mut u64, one: u64) {
    // SAFETY: pure register arithmetic on two general-purpose registers; no memory, no stack.
    unsafe {
        std::arch::asm!(
            ".rept 100",
            "add {x}, {x}, {one}",
            ".endr",
            x = inout(reg) *x,
            one = in(reg) one,
            options(nomem, nostack, preserves_flags),
        );
    }
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
#[inline(always)]
fn add100(_x: &mut u64, _one: u64) {}

/// Whether this architecture has a clock-measuring chain.
pub fn supported() -> bool {
    cfg!(any(target_arch = "x86_64", target_arch = "aarch64"))
}

/// Measure the clock of the core this thread runs on over roughly `window`, after a short spin
/// that lets the core leave idle states. Returns Hz from several timed slices of about 1 ms.
pub fn measure_hz(window: Duration) -> Option<f64> {
    if !supported() {
        return None;
    }
    measure_hz_with(window, add_chain, ADDS_PER_BLOCK)
}

/// The slicing and percentile logic behind [`measure_hz`], for any chain that retires exactly one
/// dependent add per cycle: `chain(blocks)` runs `blocks × adds_per_block` of them and returns
/// their count, which is checked, so a chain the compiler deleted or cut short yields `None`.
/// The CPU crate times chains interleaved with vector instructions through this, so that the
/// clock is read under the instruction class of a sample (a core may clock down for it).
pub fn measure_hz_with(
    window: Duration,
    chain: impl Fn(u64) -> u64,
    adds_per_block: u64,
) -> Option<f64> {
    // Calibrate a slice of about 1 ms.
    let mut blocks: u64 = 1000;
    loop {
        let t = Instant::now();
        std::hint::black_box(chain(blocks));
        let el = t.elapsed();
        if el >= Duration::from_micros(500) || blocks >= 1 << 30 {
            let per_block = el.as_secs_f64() / blocks as f64;
            blocks = ((1e-3 / per_block) as u64).max(1);
            break;
        }
        blocks *= 4;
    }
    let slices = ((window.as_secs_f64() / 1e-3) as usize).clamp(5, 10_000);
    let mut hz = Vec::with_capacity(slices);
    let mut undisturbed = Vec::with_capacity(slices);
    for _ in 0..slices {
        let c0 = thread_cpu_s();
        let t = Instant::now();
        let v = chain(blocks);
        let el = t.elapsed().as_secs_f64();
        let on_cpu = thread_cpu_s().zip(c0).map(|(c1, c0)| c1 - c0);
        if v != blocks * adds_per_block {
            return None;
        }
        if el > 0.0 {
            let rate = (blocks * adds_per_block) as f64 / el;
            hz.push(rate);
            // The thread's own CPU time brackets the slice, so it is at least the wall time
            // unless the thread was off the CPU (another task ran, or the hypervisor stole it
            // where the kernel accounts steal): such a slice under-reads and is left out.
            if on_cpu.is_some_and(|c| c >= el * UNDISTURBED) {
                undisturbed.push(rate);
            }
        }
    }
    // Slices the thread ran throughout, when there are enough of them; else all slices.
    let mut hz = if undisturbed.len() >= 3 {
        undisturbed
    } else {
        hz
    };
    // The 90th percentile, not the median: a slice can only under-read the clock (an interrupt
    // or a time-sliced neighbour steals cycles from it), never over-read it, so the upper end is
    // the core's own rate, while the very top slice is left out as a possible timer glitch.
    hz.sort_by(f64::total_cmp);
    let rank = ((hz.len() as f64 - 1.0) * 0.9).round() as usize;
    hz.get(rank).copied()
}

/// A slice whose thread ran at least this share of its wall time counts as undisturbed.
const UNDISTURBED: f64 = 0.98;

/// The calling thread's CPU time in seconds (`CLOCK_THREAD_CPUTIME_ID`).
fn thread_cpu_s() -> Option<f64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    (rc == 0).then_some(ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chain_does_the_adds_it_claims() {
        assert_eq!(add_chain(7), 700);
    }

    #[test]
    fn a_chain_that_skips_work_reads_no_clock() {
        // A chain that reports fewer adds than it was asked for (as a deleted one would).
        assert_eq!(
            measure_hz_with(Duration::from_millis(5), |b| add_chain(b) - 1, 100),
            None
        );
    }

    #[test]
    fn a_neighbour_on_the_same_cpu_does_not_lower_the_clock() {
        if !supported() {
            return;
        }
        let cpu = crate::affinity::allowed_cpus()[0];
        let on_cpu = |f: &(dyn Fn() -> Option<f64> + Sync)| {
            std::thread::scope(|s| {
                s.spawn(|| {
                    let _ = crate::affinity::pin_current_thread(cpu);
                    f()
                })
                .join()
                .unwrap()
            })
        };
        let window = Duration::from_millis(40);
        let stop = std::sync::atomic::AtomicBool::new(false);
        let contended = || {
            stop.store(false, std::sync::atomic::Ordering::Relaxed);
            std::thread::scope(|s| {
                s.spawn(|| {
                    let _ = crate::affinity::pin_current_thread(cpu);
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        std::hint::black_box(add_chain(100));
                    }
                });
                let hz = on_cpu(&|| measure_hz(window));
                stop.store(true, std::sync::atomic::Ordering::Relaxed);
                hz
            })
        };
        // Alternating pairs, each compared on its own: a shared host's clock drifts by several
        // per cent over seconds.
        let mut ratios: Vec<f64> = (0..4)
            .map(|_| contended().expect("clock") / on_cpu(&|| measure_hz(window)).expect("clock"))
            .collect();
        ratios.sort_by(f64::total_cmp);
        // Time-sliced with a busy thread, the slices it ran throughout still give the clock.
        assert!(ratios[2] >= 0.85, "under contention / alone: {ratios:?}");
    }

    #[test]
    fn measured_clock_is_plausible() {
        if !supported() {
            return;
        }
        let hz = measure_hz(Duration::from_millis(20)).expect("clock");
        // Any real core runs between 100 MHz and 10 GHz; a deleted chain would read far higher.
        assert!((1e8..1e10).contains(&hz), "{hz}");
    }
}

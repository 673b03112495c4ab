//! Thread placement and pinning: which CPUs this process may use, the order to hand them to worker
//! threads, and pinning the calling thread to one of them.
//!
//! Benchmarks pin one worker per CPU in a fixed order (DESIGN.md §5): one thread per physical core
//! first, round-robin across sockets, and SMT siblings only once every allowed core has a thread.
//! So "2 threads" means two cores (and both sockets' memory controllers on a two-socket machine),
//! not two hyperthreads sharing one core's FMA pipes, and a run repeats the same placement every
//! time. The order comes from sysfs topology; when that is unreadable it falls back to plain CPU
//! number order, which is still a valid placement, only not SMT-aware.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::OnceLock;

use crate::error::BenchError;
use crate::host::{cpu_place, CoreKey};

/// The CPUs this process may run on, sorted: its affinity mask (which already reflects `taskset`,
/// cgroup cpusets and Slurm's binding) as first read. Falls back to `0..available_parallelism`
/// where the mask cannot be read.
///
/// The first answer is kept for the life of the process, and [`pin_current_thread`] takes it
/// before pinning anything: otherwise a benchmark that pinned the main thread for a
/// single-threaded case would see one CPU in every case after it.
pub fn allowed_cpus() -> Vec<usize> {
    static ALLOWED: OnceLock<Vec<usize>> = OnceLock::new();
    ALLOWED.get_or_init(read_allowed_cpus).clone()
}

fn read_allowed_cpus() -> Vec<usize> {
    #[cfg(target_os = "linux")]
    if let Some(cpus) = linux::get_affinity().filter(|c| !c.is_empty()) {
        return cpus;
    }
    let n = std::thread::available_parallelism().map_or(1, |n| n.get());
    (0..n).collect()
}

/// [`allowed_cpus`] in placement order for the live machine (see [`placement_order_from`]).
pub fn placement_order() -> Vec<usize> {
    placement_order_from(Path::new("/"), &allowed_cpus())
}

/// `allowed` in placement order, reading topology under `root`: first one CPU per physical core,
/// cores taken round-robin across sockets (within a socket by lowest CPU number), then the second
/// hardware thread of each core in the same order, and so on. If the topology of any allowed CPU
/// cannot be read, the CPUs are returned sorted and deduplicated.
pub fn placement_order_from(root: &Path, allowed: &[usize]) -> Vec<usize> {
    let cpus: BTreeSet<usize> = allowed.iter().copied().collect();
    // Per package: its cores in order of their lowest allowed CPU, each with its allowed CPUs.
    let mut packages: BTreeMap<i64, Vec<Vec<usize>>> = BTreeMap::new();
    let mut core_slot: BTreeMap<CoreKey, (i64, usize)> = BTreeMap::new();
    for &cpu in &cpus {
        let Some(place) = cpu_place(root, cpu) else {
            return cpus.into_iter().collect();
        };
        let package = place.package.unwrap_or(-1);
        let cores = packages.entry(package).or_default();
        let (pkg, slot) = *core_slot.entry(place.core).or_insert_with(|| {
            cores.push(Vec::new());
            (package, cores.len() - 1)
        });
        if let Some(core) = packages.get_mut(&pkg).and_then(|c| c.get_mut(slot)) {
            core.push(cpu);
        }
    }
    let max_cores = packages.values().map(Vec::len).max().unwrap_or(0);
    let max_threads = packages.values().flatten().map(Vec::len).max().unwrap_or(0);
    let mut order = Vec::with_capacity(cpus.len());
    for thread in 0..max_threads {
        for core in 0..max_cores {
            for cores in packages.values() {
                if let Some(&cpu) = cores.get(core).and_then(|c| c.get(thread)) {
                    order.push(cpu);
                }
            }
        }
    }
    order
}

/// Pin the calling thread to `cpu`.
///
/// Fails with [`BenchError::Failed`] carrying the OS error when the kernel refuses (a CPU outside
/// the allowed set or offline). On systems other than Linux pinning is not implemented and the
/// result is [`BenchError::Unsupported`]; callers treat pinning as best effort there.
pub fn pin_current_thread(cpu: usize) -> Result<(), BenchError> {
    #[cfg(target_os = "linux")]
    {
        // Record the process's mask while this thread still has it (see `allowed_cpus`).
        let _ = allowed_cpus();
        linux::set_affinity(cpu)
    }
    #[cfg(not(target_os = "linux"))]
    {
        Err(BenchError::unsupported(format!(
            "pinning a thread to CPU {cpu} is only implemented on Linux"
        )))
    }
}

/// The CPU the calling thread is running on (`sched_getcpu`); `None` where it cannot be told.
/// A benchmark whose figure belongs to particular CPUs (core-to-core latency) checks its pinning
/// with it instead of trusting that the kernel honoured the request.
pub fn current_cpu() -> Option<usize> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: sched_getcpu has no arguments and no preconditions.
        let c = unsafe { libc::sched_getcpu() };
        usize::try_from(c).ok()
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

/// The CPU for worker `i`: `order[i % order.len()]`, so more workers than CPUs wrap around. With
/// an empty order there is nothing to choose from and `i` itself is returned.
pub fn cpu_for_thread(order: &[usize], i: usize) -> usize {
    match order.len() {
        0 => i,
        n => order.get(i % n).copied().unwrap_or(i),
    }
}

/// Number of distinct physical cores among `cpus`, reading topology under `root`; the number of
/// distinct CPUs if any of them has no readable topology.
pub fn physical_cores_in(root: &Path, cpus: &[usize]) -> usize {
    let distinct: BTreeSet<usize> = cpus.iter().copied().collect();
    let mut cores = BTreeSet::new();
    for &cpu in &distinct {
        match cpu_place(root, cpu) {
            Some(place) => {
                cores.insert(place.core);
            }
            None => return distinct.len(),
        }
    }
    cores.len()
}

/// [`physical_cores_in`] for the live machine.
pub fn physical_cores(cpus: &[usize]) -> usize {
    physical_cores_in(Path::new("/"), cpus)
}

#[cfg(target_os = "linux")]
mod linux {
    use crate::error::BenchError;

    const WORD_BITS: usize = libc::c_ulong::BITS as usize;
    /// glibc's `cpu_set_t` size; kernels built for more CPUs need a bigger mask.
    const MIN_BITS: usize = 1024;
    /// Give up growing the mask here (far beyond any kernel's NR_CPUS).
    const MAX_BITS: usize = 1 << 20;

    fn cpus_in(mask: &[libc::c_ulong]) -> Vec<usize> {
        let mut cpus = Vec::new();
        for (w, &word) in mask.iter().enumerate() {
            for bit in 0..WORD_BITS {
                if (word >> bit) & 1 == 1 {
                    cpus.push(w * WORD_BITS + bit);
                }
            }
        }
        cpus
    }

    /// The calling thread's affinity mask, growing the buffer while the kernel's is larger.
    pub(super) fn get_affinity() -> Option<Vec<usize>> {
        let mut bits = MIN_BITS;
        loop {
            let mut mask: Vec<libc::c_ulong> = vec![0; bits / WORD_BITS];
            let bytes = std::mem::size_of_val(mask.as_slice());
            // SAFETY: `mask` is a writable buffer of exactly `bytes` bytes, at least as large and
            // as aligned as a cpu_set_t (an array of c_ulong); the kernel writes at most `bytes`.
            let rc = unsafe {
                libc::sched_getaffinity(0, bytes, mask.as_mut_ptr().cast::<libc::cpu_set_t>())
            };
            if rc == 0 {
                return Some(cpus_in(&mask));
            }
            let err = std::io::Error::last_os_error();
            if err.raw_os_error() != Some(libc::EINVAL) || bits >= MAX_BITS {
                return None;
            }
            bits *= 2;
        }
    }

    pub(super) fn set_affinity(cpu: usize) -> Result<(), BenchError> {
        if cpu >= MAX_BITS {
            return Err(BenchError::Failed(format!(
                "cannot pin thread to CPU {cpu}: no kernel supports that many CPUs"
            )));
        }
        let words = (cpu / WORD_BITS + 1).max(MIN_BITS / WORD_BITS);
        let mut mask: Vec<libc::c_ulong> = vec![0; words];
        if let Some(word) = mask.get_mut(cpu / WORD_BITS) {
            *word |= 1 << (cpu % WORD_BITS);
        }
        let bytes = std::mem::size_of_val(mask.as_slice());
        // SAFETY: `mask` is a readable buffer of exactly `bytes` bytes, at least as large and as
        // aligned as a cpu_set_t; the kernel only reads it. pid 0 means the calling thread.
        let rc =
            unsafe { libc::sched_setaffinity(0, bytes, mask.as_ptr().cast::<libc::cpu_set_t>()) };
        if rc == 0 {
            Ok(())
        } else {
            Err(BenchError::Failed(format!(
                "cannot pin thread to CPU {cpu}: {}",
                std::io::Error::last_os_error()
            )))
        }
    }

    #[cfg(test)]
    mod tests {
        #[test]
        fn mask_bits_to_cpus() {
            let mut mask: Vec<libc::c_ulong> = vec![0; 2];
            mask[0] = 0b1011;
            mask[1] = 1;
            assert_eq!(super::cpus_in(&mask), vec![0, 1, 3, super::WORD_BITS]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::tests::{put, smt_tree};

    /// 2 sockets × 2 cores × 2 threads, numbered the way Linux numbers x86: cpu0-3 are the first
    /// thread of each core (0,1 on socket 0; 2,3 on socket 1), cpu4-7 their siblings.
    fn two_socket_tree(root: &Path) {
        for cpu in 0..8usize {
            let first = cpu % 4;
            let t = format!("sys/devices/system/cpu/cpu{cpu}/topology");
            put(
                root,
                &format!("{t}/physical_package_id"),
                &format!("{}\n", first / 2),
            );
            put(root, &format!("{t}/core_id"), &format!("{}\n", first % 2));
            put(
                root,
                &format!("{t}/thread_siblings_list"),
                &format!("{first},{}\n", first + 4),
            );
        }
    }

    #[test]
    fn smt_fixture_places_one_thread_per_core_first() {
        let dir = tempfile::tempdir().expect("tempdir");
        smt_tree(dir.path());
        assert_eq!(
            placement_order_from(dir.path(), &[0, 1, 2, 3]),
            vec![0, 2, 1, 3]
        );
        assert_eq!(
            placement_order_from(dir.path(), &[3, 2, 1, 0, 0]),
            vec![0, 2, 1, 3]
        );
        assert_eq!(placement_order_from(dir.path(), &[1, 2, 3]), vec![1, 2, 3]);
        assert_eq!(placement_order_from(dir.path(), &[2, 3]), vec![2, 3]);
        assert_eq!(placement_order_from(dir.path(), &[]), Vec::<usize>::new());
    }

    #[test]
    fn two_sockets_are_interleaved() {
        let dir = tempfile::tempdir().expect("tempdir");
        two_socket_tree(dir.path());
        let all: Vec<usize> = (0..8).collect();
        assert_eq!(
            placement_order_from(dir.path(), &all),
            vec![0, 2, 1, 3, 4, 6, 5, 7]
        );
        assert_eq!(physical_cores_in(dir.path(), &all), 4);
        assert_eq!(physical_cores_in(dir.path(), &[0, 4]), 1);
        assert_eq!(physical_cores_in(dir.path(), &[0, 2, 4, 6]), 2);
    }

    #[test]
    fn core_id_is_used_without_sibling_lists() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        for cpu in 0..4usize {
            let t = format!("sys/devices/system/cpu/cpu{cpu}/topology");
            put(root, &format!("{t}/physical_package_id"), "0\n");
            put(root, &format!("{t}/core_id"), &format!("{}\n", cpu / 2));
        }
        assert_eq!(placement_order_from(root, &[0, 1, 2, 3]), vec![0, 2, 1, 3]);
        assert_eq!(physical_cores_in(root, &[0, 1, 2, 3]), 2);
    }

    #[test]
    fn missing_topology_falls_back_to_cpu_order() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert_eq!(
            placement_order_from(dir.path(), &[3, 1, 2, 1]),
            vec![1, 2, 3]
        );
        assert_eq!(physical_cores_in(dir.path(), &[3, 1, 2, 1]), 3);
        // One CPU without topology spoils the whole answer rather than half-applying it.
        smt_tree(dir.path());
        assert_eq!(placement_order_from(dir.path(), &[0, 1, 9]), vec![0, 1, 9]);
        assert_eq!(physical_cores_in(dir.path(), &[0, 1, 9]), 3);
    }

    #[test]
    fn smt_fixture_physical_cores() {
        let dir = tempfile::tempdir().expect("tempdir");
        smt_tree(dir.path());
        assert_eq!(physical_cores_in(dir.path(), &[0, 1, 2, 3]), 2);
        assert_eq!(physical_cores_in(dir.path(), &[0, 1]), 1);
        assert_eq!(physical_cores_in(dir.path(), &[1, 2]), 2);
        assert_eq!(physical_cores_in(dir.path(), &[]), 0);
    }

    #[test]
    fn threads_wrap_around_the_order() {
        let order = [0, 2, 1, 3];
        let picked: Vec<usize> = (0..6).map(|i| cpu_for_thread(&order, i)).collect();
        assert_eq!(picked, vec![0, 2, 1, 3, 0, 2]);
        assert_eq!(cpu_for_thread(&[], 5), 5);
    }

    #[test]
    fn live_placement_is_a_permutation_of_allowed() {
        let allowed = allowed_cpus();
        assert!(!allowed.is_empty());
        assert!(allowed.windows(2).all(|w| w[0] < w[1]));
        let mut order = placement_order();
        assert_eq!(order.len(), allowed.len());
        order.sort_unstable();
        assert_eq!(order, allowed);
        let cores = physical_cores(&allowed);
        assert!(cores >= 1 && cores <= allowed.len());
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn pinning_restricts_the_thread_but_not_allowed_cpus() {
        let allowed = allowed_cpus();
        let target = *allowed.last().expect("at least one CPU");
        let (mask, still_allowed) = std::thread::spawn(move || {
            pin_current_thread(target).expect("pin");
            (linux::get_affinity(), allowed_cpus())
        })
        .join()
        .expect("thread");
        assert_eq!(mask, Some(vec![target]));
        assert_eq!(still_allowed, allowed);
        assert_eq!(allowed_cpus(), allowed);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn pinning_to_a_missing_cpu_fails_with_the_os_error() {
        let handle = std::thread::spawn(|| {
            let err = pin_current_thread(65_535).expect_err("no such CPU");
            assert!(matches!(err, BenchError::Failed(_)), "{err:?}");
            assert!(err.to_string().contains("65535"), "{err}");
            let err = pin_current_thread(usize::MAX).expect_err("absurd CPU");
            assert!(matches!(err, BenchError::Failed(_)), "{err:?}");
        });
        handle.join().expect("thread");
    }
}

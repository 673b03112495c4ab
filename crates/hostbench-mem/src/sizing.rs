//! How big the working sets are, and which level of the memory hierarchy a size lands in.
//!
//! STREAM's run rule (stream.c, INSTRUCTIONS 1a; Intel's restatement) wants every array at least
//! four times the *sum* of all last-level caches in use, so the sum counts every LLC instance: a
//! chiplet CPU has one L3 per CCX and a "per-core LLC" guess undersizes it (the STREAMBenchmark.jl
//! #29 trap). The classic assignment also wanted a 1 GiB workload, so DRAM sizes are the larger of
//! the two. Levels are labelled from the detected caches: private caches (one instance per core or
//! more) are compared with the working set of one thread, shared ones with the whole working set
//! against all their instances together.

use hostbench_core::model::{Cache, Host};

pub const KIB: u64 = 1024;
pub const MIB: u64 = 1024 * KIB;
pub const GIB: u64 = 1024 * MIB;

/// Smallest DRAM working set: the classic 1 GiB workload.
pub const MIN_DRAM_BYTES: u64 = GIB;

/// Data and unified caches, the ones loads and stores go through.
fn data_caches(caches: &[Cache]) -> impl Iterator<Item = &Cache> {
    caches.iter().filter(|c| c.kind != "instruction")
}

/// The last-level cache (highest level holding data), if any cache is known.
pub fn last_level(caches: &[Cache]) -> Option<&Cache> {
    data_caches(caches).max_by_key(|c| c.level)
}

/// Sum of all instances of the last-level cache, in bytes (0 when no cache is known).
pub fn llc_total(caches: &[Cache]) -> u64 {
    last_level(caches).map_or(0, |c| c.size_bytes * u64::from(c.instances.max(1)))
}

/// Default DRAM working set for a kernel touching `arrays` arrays: each array at least 4 × the sum
/// of the LLC instances, and the whole at least 1 GiB. Rounded up to a whole MiB per array.
pub fn dram_working_set(caches: &[Cache], arrays: u64) -> u64 {
    let arrays = arrays.max(1);
    let per_array = (4 * llc_total(caches)).max(MIN_DRAM_BYTES.div_ceil(arrays));
    per_array.div_ceil(MIB) * MIB * arrays
}

/// The hierarchy level a working set of `total` bytes, spread over `threads` threads, lives in:
/// "L1", "L2", "L3", … or "DRAM".
pub fn level_for(host: &Host, total: u64, threads: usize) -> String {
    level_in(&host.cpu.caches, host.cpu.cores.max(1), total, threads)
}

pub fn level_in(caches: &[Cache], cores: u32, total: u64, threads: usize) -> String {
    let threads = threads.max(1) as u64;
    let per_thread = total.div_ceil(threads);
    let mut levels: Vec<&Cache> = data_caches(caches).collect();
    levels.sort_by_key(|c| c.level);
    for c in levels {
        let private = c.instances >= cores;
        let fits = if private {
            per_thread <= c.size_bytes
        } else {
            // Threads are spread over the instances, so all of them hold the working set.
            let usable = u64::from(c.instances.max(1)).min(threads);
            total <= c.size_bytes * usable
        };
        if fits {
            return format!("L{}", c.level);
        }
    }
    "DRAM".to_string()
}

/// Working sets for a sweep from 4 KiB to at least `8 × LLC` and `min_top`: powers of two and the
/// points half-way between them (×1.5), two per octave, the density at which a cache step shows,
/// up to twice the LLC; past that, one per octave (see [`sweep_sizes_to`]).
pub fn sweep_sizes(caches: &[Cache], min_top: u64) -> Vec<u64> {
    sweep_sizes_to(caches, 8, min_top)
}

/// [`sweep_sizes`] up to `llcs × LLC` (and at least `min_top`).
///
/// Past twice the LLC no cache step is left to find: the curve only approaches DRAM as the
/// share of the set the LLC still holds falls (a half at 2 × LLC, an eighth at 8 ×), which
/// powers of two show as well. Those are the sizes that cost: each point maps, touches and links
/// or streams gigabytes, so on a 480 MiB LLC the 1.5 and 3 GiB half-octaves took about a
/// quarter of the latency curve's time. With no cache known, every point keeps its half-octave.
pub fn sweep_sizes_to(caches: &[Cache], llcs: u64, min_top: u64) -> Vec<u64> {
    let llc = llc_total(caches);
    let top = (llcs * llc).max(min_top);
    let dense_to = if llc == 0 { top } else { 2 * llc };
    let mut v = Vec::new();
    let mut s = 4 * KIB;
    while s <= top {
        v.push(s);
        let mid = s + s / 2;
        if mid <= top && mid <= dense_to {
            v.push(mid);
        }
        s *= 2;
    }
    if v.last() != Some(&top) && top > 4 * KIB {
        // Always end exactly at the top so "beyond the LLC" is really reached.
        v.push(top);
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache(level: u32, kind: &str, size: u64, instances: u32) -> Cache {
        Cache {
            level,
            kind: kind.into(),
            size_bytes: size,
            instances,
        }
    }

    /// 2-core VM: L1d 32K×2, L2 1M×2, one 32 MiB L3.
    fn small() -> Vec<Cache> {
        vec![
            cache(1, "data", 32 * KIB, 2),
            cache(1, "instruction", 32 * KIB, 2),
            cache(2, "unified", MIB, 2),
            cache(3, "unified", 32 * MIB, 1),
        ]
    }

    /// Two-socket chiplet server: 8 CCDs × 32 MiB L3 per socket → 16 instances, 512 MiB in all.
    fn chiplet() -> Vec<Cache> {
        vec![
            cache(1, "data", 48 * KIB, 128),
            cache(2, "unified", 2 * MIB, 128),
            cache(3, "unified", 32 * MIB, 16),
        ]
    }

    #[test]
    fn llc_counts_every_instance() {
        assert_eq!(llc_total(&small()), 32 * MIB);
        assert_eq!(llc_total(&chiplet()), 512 * MIB);
        assert_eq!(llc_total(&[]), 0);
    }

    #[test]
    fn dram_sets_follow_the_four_times_llc_and_one_gib_rules() {
        // Small LLC: the 1 GiB floor wins; 3 arrays each get a third (rounded up to a MiB).
        let ws = dram_working_set(&small(), 3);
        assert!((GIB..GIB + 3 * MIB).contains(&ws), "{ws}");
        assert_eq!(ws % (3 * MIB), 0);
        // Chiplet server: every array ≥ 4 × 512 MiB.
        assert_eq!(dram_working_set(&chiplet(), 3), 3 * 2 * GIB);
        assert_eq!(dram_working_set(&chiplet(), 1), 2 * GIB);
        // Unknown caches: still the 1 GiB floor.
        assert_eq!(dram_working_set(&[], 2), GIB);
    }

    #[test]
    fn levels_use_private_per_thread_and_shared_in_total() {
        let c = small();
        assert_eq!(level_in(&c, 2, 16 * KIB, 1), "L1");
        assert_eq!(level_in(&c, 2, 64 * KIB, 1), "L2");
        assert_eq!(level_in(&c, 2, 64 * KIB, 2), "L1"); // 32 KiB per thread
        assert_eq!(level_in(&c, 2, 16 * MIB, 2), "L3");
        assert_eq!(level_in(&c, 2, 64 * MIB, 2), "DRAM");
        let s = chiplet();
        // 256 MiB over 16 threads: beyond L2 per thread, within 16 of the 16 L3s.
        assert_eq!(level_in(&s, 128, 256 * MIB, 16), "L3");
        // The same over 2 threads only uses 2 L3 instances (64 MiB).
        assert_eq!(level_in(&s, 128, 256 * MIB, 2), "DRAM");
        assert_eq!(level_in(&[], 1, 4 * KIB, 1), "DRAM");
    }

    #[test]
    fn sweep_covers_four_kib_to_beyond_llc_two_per_octave() {
        let v = sweep_sizes(&small(), GIB);
        assert_eq!(v[0], 4 * KIB);
        assert_eq!(v[1], 6 * KIB);
        assert_eq!(*v.last().unwrap(), GIB);
        assert!(v.windows(2).all(|w| w[0] < w[1]));
        let v = sweep_sizes(&chiplet(), 0);
        assert_eq!(*v.last().unwrap(), 4 * GIB);
        // A shorter reach ends at its own multiple, or at the floor where that is higher.
        assert_eq!(*sweep_sizes_to(&chiplet(), 4, 0).last().unwrap(), 2 * GIB);
        assert_eq!(*sweep_sizes_to(&small(), 4, GIB).last().unwrap(), GIB);
    }

    #[test]
    fn past_twice_the_llc_the_sweep_keeps_one_point_per_octave() {
        // 32 MiB LLC: half-octaves up to 64 MiB, then 128, 256 … 1 GiB.
        let v = sweep_sizes(&small(), GIB);
        assert!(v.contains(&(48 * MIB)) && v.contains(&(64 * MIB)));
        let past: Vec<u64> = v.iter().copied().filter(|&s| s > 64 * MIB).collect();
        assert_eq!(past, [128 * MIB, 256 * MIB, 512 * MIB, GIB]);
        // 480 MiB LLC to 8 ×: 768 MiB is still a half-octave, then 1, 2 GiB and the 3.75 GiB top.
        let big = [cache(3, "unified", 480 * MIB, 1)];
        let v = sweep_sizes(&big, 256 * MIB);
        let tail: Vec<u64> = v.iter().copied().filter(|&s| s >= 512 * MIB).collect();
        assert_eq!(tail, [512 * MIB, 768 * MIB, GIB, 2 * GIB, 3840 * MIB]);
        // No cache known: two per octave all the way.
        let v = sweep_sizes(&[], 256 * MIB);
        assert!(v.contains(&(192 * MIB)));
    }
}

//! likwid-bench beside a bandwidth case (`--reference`): its `load`, `store`, `copy` and
//! `stream` (triad) kernels, matched by kernel, store kind (the `_mem` kernels use non-temporal
//! stores), ISA (`_avx` for 256-bit, `_avx512`), thread count and working set (`-W
//! N:<total>kB:<threads>`, the total over all arrays as hostbench's, in likwid's kB = 1000 B).
//! Both count bytes the STREAM way (no write-allocate). Only whole-array sequential streaming
//! has a likwid kernel: block-wise and random orders, scale, add and the classic rw do not.

use hostbench_core::model::Reference;
use hostbench_core::reference::{self as tools, Better, LIKWID_RUN_S};
use hostbench_core::BenchError;

use crate::bandwidth::{Block, Kernel, Point, Store};
use crate::kernels::Isa;
use crate::order::Pattern;

/// The likwid-bench test matching a point, if there is one.
pub fn likwid_kernel(p: &Point) -> Option<String> {
    if p.pattern != Pattern::Seq || p.block != Block::Whole {
        return None;
    }
    let nt = p.kernel.stores() && p.store == Store::NonTemporal;
    let base = match p.kernel {
        Kernel::Read => "load",
        Kernel::Write => "store",
        Kernel::Copy => "copy",
        Kernel::Triad => "stream",
        _ => return None,
    };
    let isa = match p.isa {
        Isa::Scalar if !nt => "",
        Isa::Avx2 => "_avx",
        Isa::Avx512 => "_avx512",
        // likwid's scalar non-temporal kernels are SSE; Arm's kernels are named otherwise.
        _ => return None,
    };
    Some(format!("{base}{}{isa}", if nt { "_mem" } else { "" }))
}

/// likwid-bench's `-i` (iterations per thread; each covers the thread's share of every array
/// once) for about [`LIKWID_RUN_S`] of streaming at `ours` B/s. Without `-i` likwid-bench finds
/// that count itself by running ever longer trials: on a DRAM-sized set that search took 13 of
/// its 18 s (6 GiB, 2 threads), three times the run it chose.
pub fn likwid_iterations(working_set: u64, ours: f64) -> u64 {
    let per_iteration = working_set.max(1) as f64 / ours.max(1.0);
    ((LIKWID_RUN_S / per_iteration).ceil() as u64).clamp(2, 1 << 30)
}

/// The arguments for a point whose arrays total `working_set` bytes, `iterations` per thread.
pub fn likwid_args(kernel: &str, working_set: u64, threads: usize, iterations: u64) -> Vec<String> {
    vec![
        "-t".into(),
        kernel.into(),
        "-W".into(),
        format!("N:{}kB:{threads}", working_set / 1000),
        "-i".into(),
        iterations.to_string(),
    ]
}

/// likwid-bench `runs` times, given `args` (from [`likwid_args`]), beside a figure of `ours`
/// B/s.
pub fn likwid_reference(args: &[String], runs: usize, ours: f64) -> Result<Reference, BenchError> {
    let version = tools::likwid_version()?;
    let values = tools::likwid_runs(args, runs, "MByte/s:")?;
    tools::reference(tools::LIKWID, version, &values, ours, Better::Higher)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(kernel: Kernel, store: Store, isa: Isa) -> Point {
        Point {
            kernel,
            pattern: Pattern::Seq,
            block: Block::Whole,
            working_set: 480_000_000,
            threads: 2,
            store,
            isa,
        }
    }

    #[test]
    fn kernels_match_by_kernel_store_and_isa() {
        let k = |kernel, store, isa| likwid_kernel(&point(kernel, store, isa));
        assert_eq!(
            k(Kernel::Triad, Store::NonTemporal, Isa::Avx512).as_deref(),
            Some("stream_mem_avx512")
        );
        assert_eq!(
            k(Kernel::Triad, Store::Temporal, Isa::Avx2).as_deref(),
            Some("stream_avx")
        );
        assert_eq!(
            k(Kernel::Copy, Store::NonTemporal, Isa::Avx2).as_deref(),
            Some("copy_mem_avx")
        );
        assert_eq!(
            k(Kernel::Read, Store::NonTemporal, Isa::Avx512).as_deref(),
            Some("load_avx512")
        );
        assert_eq!(
            k(Kernel::Write, Store::Temporal, Isa::Scalar).as_deref(),
            Some("store")
        );
        assert_eq!(k(Kernel::Write, Store::NonTemporal, Isa::Scalar), None);
        assert_eq!(k(Kernel::Scale, Store::Temporal, Isa::Avx2), None);
        let mut random = point(Kernel::Triad, Store::Temporal, Isa::Avx2);
        random.pattern = Pattern::Random;
        assert_eq!(likwid_kernel(&random), None);
        assert_eq!(
            likwid_args("stream_avx", 480_000_000, 2, 21),
            ["-t", "stream_avx", "-W", "N:480000kB:2", "-i", "21"]
        );
    }

    #[test]
    fn iterations_give_about_a_second_of_streaming() {
        // 6 GB at 48 GB/s: 0.125 s an iteration, 8 of them.
        assert_eq!(likwid_iterations(6_000_000_000, 48e9), 8);
        // An L1-sized set at 200 GB/s: tens of millions.
        assert_eq!(likwid_iterations(32_000, 200e9), 6_250_000);
        // Never below two, whatever the figure.
        assert_eq!(likwid_iterations(6_000_000_000, 1e6), 2);
        assert_eq!(likwid_iterations(6_000_000_000, 0.0), 2);
    }
}

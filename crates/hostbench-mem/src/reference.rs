//! likwid-bench beside a bandwidth case (`--reference`): its `load`, `store`, `copy` and
//! `stream` (triad) kernels, matched by kernel, store kind (the `_mem` kernels use non-temporal
//! stores), ISA (`_avx` for 256-bit, `_avx512`), thread count and working set (`-W
//! N:<total>kB:<threads>`, the total over all arrays as hostbench's, in likwid's kB = 1000 B).
//! Both count bytes the STREAM way (no write-allocate). Only whole-array sequential streaming
//! has a likwid kernel: block-wise and random orders, scale, add and the classic rw do not.

use hostbench_core::model::Reference;
use hostbench_core::reference::{self as tools, Better};
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

/// The arguments for a point whose arrays total `working_set` bytes.
pub fn likwid_args(kernel: &str, working_set: u64, threads: usize) -> Vec<String> {
    vec![
        "-t".into(),
        kernel.into(),
        "-W".into(),
        format!("N:{}kB:{threads}", working_set / 1000),
    ]
}

/// likwid-bench `runs` times beside a figure of `ours` B/s.
pub fn likwid_reference(
    kernel: &str,
    working_set: u64,
    threads: usize,
    runs: usize,
    ours: f64,
) -> Result<Reference, BenchError> {
    let version = tools::likwid_version()?;
    let values = tools::likwid_runs(&likwid_args(kernel, working_set, threads), runs, "MByte/s:")?;
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
            likwid_args("stream_avx", 480_000_000, 2),
            ["-t", "stream_avx", "-W", "N:480000kB:2"]
        );
    }
}

//! Side-by-side reference: likwid-bench's `peakflops*` kernels on the same thread count.
//!
//! `hostbench cpu --reference` runs the matching likwid-bench kernel right after each hostbench
//! case, so both see the same machine state, and stores its median in the record's `reference`
//! with the ratio hostbench / likwid. likwid's peakflops kernels stream one vector, so the working
//! set is kept L1-resident (16 kB per thread). likwid 5.2's `-s` option can collapse to ten
//! iterations, so its default one-second minimum runtime is used instead.

use hostbench_core::reference::{self as tools, Better};
use hostbench_core::{BenchError, Reference};

use crate::isa::{Dtype, Isa};

pub const TOOL: &str = "likwid-bench";

/// The likwid-bench test matching a hostbench (dtype, ISA), if there is one.
pub fn likwid_kernel(dtype: Dtype, isa: Isa) -> Option<&'static str> {
    Some(match (dtype, isa) {
        (Dtype::F64, Isa::Avx512) => "peakflops_avx512_fma",
        (Dtype::F32, Isa::Avx512) => "peakflops_sp_avx512_fma",
        (Dtype::F64, Isa::Avx2Fma) => "peakflops_avx_fma",
        (Dtype::F32, Isa::Avx2Fma) => "peakflops_sp_avx_fma",
        (Dtype::F64, Isa::Sse2) => "peakflops_sse",
        (Dtype::F32, Isa::Sse2) => "peakflops_sp_sse",
        (Dtype::F64, Isa::Scalar) => "peakflops",
        (Dtype::F32, Isa::Scalar) => "peakflops_sp",
        _ => return None,
    })
}

/// The command line used for (kernel, threads), for records and BENCHMARKS.md.
pub fn likwid_args(kernel: &str, threads: usize) -> Vec<String> {
    vec![
        "-t".into(),
        kernel.into(),
        "-W".into(),
        format!("N:{}kB:{threads}", 16 * threads),
    ]
}

/// likwid-bench's matching kernel beside a hostbench figure: `runs` runs, their median as the
/// reference, the ratio hostbench / likwid.
pub fn likwid_reference(
    dtype: Dtype,
    isa: Isa,
    threads: usize,
    runs: usize,
    hostbench_value: f64,
) -> Result<Reference, BenchError> {
    let kernel = likwid_kernel(dtype, isa).ok_or_else(|| {
        BenchError::unsupported(format!(
            "likwid-bench has no peakflops kernel for {dtype} {isa}"
        ))
    })?;
    let version = tools::likwid_version()?;
    let values = tools::likwid_runs(&likwid_args(kernel, threads), runs, "MFlops/s:")?;
    tools::reference(TOOL, version, &values, hostbench_value, Better::Higher)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_likwid_report() {
        let report = "Time:\t\t1.66e+00 sec\nMFlops/s:\t\t56674.69\nMByte/s:\t\t15113.25\n";
        assert_eq!(tools::likwid_figure(report, "MFlops/s:"), Some(56674.69e6));
        assert_eq!(tools::likwid_figure("no numbers here", "MFlops/s:"), None);
    }

    #[test]
    fn kernels_match_dtype_and_isa() {
        assert_eq!(
            likwid_kernel(Dtype::F64, Isa::Avx2Fma),
            Some("peakflops_avx_fma")
        );
        assert_eq!(
            likwid_kernel(Dtype::F32, Isa::Avx512),
            Some("peakflops_sp_avx512_fma")
        );
        assert_eq!(likwid_kernel(Dtype::I8, Isa::Avx2Fma), None);
        assert_eq!(
            likwid_args("peakflops", 2).join(" "),
            "-t peakflops -W N:32kB:2"
        );
    }
}

//! Side-by-side reference: likwid-bench's `peakflops*` kernels on the same thread count.
//!
//! `hostbench cpu --reference` runs the matching likwid-bench kernel right after each hostbench
//! case, so both see the same machine state, and stores its median in the record's `reference`
//! with the ratio hostbench / likwid. likwid's peakflops kernels stream one vector, so the working
//! set is kept L1-resident (16 kB per thread). likwid 5.2's `-s` option can collapse to ten
//! iterations, so `-i` is sized for about one second from a short run of a fixed count.

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

/// The command line for (kernel, threads), with `-i` once it is known, for records and
/// BENCHMARKS.md.
pub fn likwid_args(kernel: &str, threads: usize, iterations: Option<u64>) -> Vec<String> {
    let mut a = vec![
        "-t".into(),
        kernel.into(),
        "-W".into(),
        format!("N:{}kB:{threads}", 16 * threads),
    ];
    if let Some(i) = iterations {
        a.extend(["-i".into(), i.to_string()]);
    }
    a
}

/// Iterations of the short run that sizes `-i`: some 0.05 s on a 2-vCPU Zen 5 at 270 GFLOP/s.
const CALIBRATION_ITERATIONS: u64 = 100_000;

/// `-i` for about [`tools::LIKWID_RUN_S`] of `args`: a run of a fixed count first, timed by
/// likwid-bench itself ("Time:"), scaled up. That run costs likwid-bench's start-up (about 1 s)
/// where its own search for a count cost 4.7 s. A kernel slower than expected only runs longer.
fn likwid_iterations(args: &[String]) -> Result<u64, BenchError> {
    let mut probe = args.to_vec();
    probe.extend(["-i".into(), CALIBRATION_ITERATIONS.to_string()]);
    let secs = tools::likwid_read(&probe, "Time:", tools::likwid_seconds)?;
    let scaled = CALIBRATION_ITERATIONS as f64 * tools::LIKWID_RUN_S / secs;
    Ok((scaled.ceil() as u64).clamp(2, 1 << 40))
}

/// likwid-bench's matching kernel beside a hostbench figure: `runs` runs of about one second
/// each, their median as the reference, the ratio hostbench / likwid; and the command as run.
pub fn likwid_reference(
    dtype: Dtype,
    isa: Isa,
    threads: usize,
    runs: usize,
    hostbench_value: f64,
) -> (Result<Reference, BenchError>, String) {
    let Some(kernel) = likwid_kernel(dtype, isa) else {
        let why = format!("likwid-bench has no peakflops kernel for {dtype} {isa}");
        return (Err(BenchError::unsupported(why)), String::new());
    };
    let mut args = likwid_args(kernel, threads, None);
    let measured = (|| {
        let version = tools::likwid_version()?;
        args = likwid_args(kernel, threads, Some(likwid_iterations(&args)?));
        let values = tools::likwid_runs(&args, runs, "MFlops/s:")?;
        tools::reference(TOOL, version, &values, hostbench_value, Better::Higher)
    })();
    (measured, format!("likwid-bench {}", args.join(" ")))
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
            likwid_args("peakflops", 2, None).join(" "),
            "-t peakflops -W N:32kB:2"
        );
        assert_eq!(
            likwid_args("peakflops", 1, Some(7)).join(" "),
            "-t peakflops -W N:16kB:1 -i 7"
        );
        let report = "Cycles:\t\t123\nTime:\t\t5.859909e-02 sec\nIterations:\t\t200000\n";
        assert_eq!(tools::likwid_seconds(report), Some(5.859909e-02));
        assert_eq!(tools::likwid_seconds("Time:\t\t0 sec\n"), None);
    }
}

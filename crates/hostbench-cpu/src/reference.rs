//! Side-by-side reference: likwid-bench's `peakflops*` kernels on the same thread count.
//!
//! `hostbench cpu --reference` runs the matching likwid-bench kernel right after each hostbench
//! case, so both see the same machine state, and stores its median in the record's `reference`
//! with the ratio hostbench / likwid. likwid's peakflops kernels stream one vector, so the working
//! set is kept L1-resident (16 kB per thread). likwid 5.2's `-s` option can collapse to ten
//! iterations, so its default one-second minimum runtime is used instead.

use std::time::Duration;

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

/// A likwid-bench run must finish within its one-second minimum plus this much (pinning and
/// start-up take well under a second; a hang is cut off, not waited for).
const RUN_LIMIT: Duration = Duration::from_secs(60);

/// likwid-bench's version (`likwid-bench -v` → "likwid-bench -- Version 5.2.2").
pub fn likwid_version() -> Result<String, BenchError> {
    // Not installed is `Unsupported` (a note on the record), before any kernel is tried.
    tools::spawn(TOOL, &["-v".into()], false)?;
    Ok(tools::version(TOOL, &["-v"], |l| {
        l.split("Version").nth(1).map(|v| v.trim().to_string())
    }))
}

/// Parse the `MFlops/s:` line of likwid-bench's report into FLOP/s.
pub fn parse_mflops(report: &str) -> Option<f64> {
    report
        .lines()
        .find_map(|l| l.trim().strip_prefix("MFlops/s:"))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .map(|m| m * 1e6)
}

/// Run the matching likwid-bench kernel `runs` times; the median is the reference value.
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
    let version = likwid_version()?;
    let mut values = Vec::new();
    for _ in 0..runs.max(1) {
        let out = tools::run(TOOL, &likwid_args(kernel, threads), RUN_LIMIT)?;
        let v = parse_mflops(&out.stdout).ok_or_else(|| {
            BenchError::Failed(format!(
                "{TOOL} -t {kernel} gave no MFlops/s line: {}",
                out.stderr.lines().next().unwrap_or("no output")
            ))
        })?;
        values.push(v);
    }
    tools::reference(TOOL, version, &values, hostbench_value, Better::Higher)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_likwid_report() {
        let report = "Time:\t\t1.66e+00 sec\nMFlops/s:\t\t56674.69\nMByte/s:\t\t15113.25\n";
        assert_eq!(parse_mflops(report), Some(56674.69e6));
        assert_eq!(parse_mflops("no numbers here"), None);
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

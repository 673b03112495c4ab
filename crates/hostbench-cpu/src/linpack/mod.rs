//! HPL-style dense solve: LU with partial pivoting of a random `n × n` system, timed and checked
//! the way HPL does it.
//!
//! It is *HPL-style, not HPL*: one process on one machine, no MPI, no process grid and no
//! `HPL.dat` search, our own generator. What it keeps from HPL is what makes the figure
//! comparable with HPL and with an OpenBLAS `dgetrf` + `dgetrs` of the same order:
//!
//! - the operation count `2/3 n³ + 3/2 n²` (HPL's `HPL_pdtest.c`), divided by the wall time of
//!   the factorisation plus the solve only (generating the matrix and checking the answer are
//!   not timed);
//! - the scaled residual `‖Ax − b‖∞ / (ε (‖A‖∞ ‖x‖∞ + ‖b‖∞) n)`, computed against the original
//!   `A` and `b`, which must stay below 16 (HPL's default threshold).
//!
//! The matrix and right-hand side are uniform in `[-0.5, 0.5)`, drawn from a counter-based
//! splitmix64 stream, so a seed always gives the same system whatever the thread count.
//!
//! # Algorithm
//!
//! A right-looking blocked LU (panels of [`NB`](lu::NB) columns) with a look-ahead of one panel,
//! the scheme HPL and OpenBLAS use to hide the panel factorisation, which is latency bound:
//!
//! - In each step the *next* panel is brought up to date first (in pieces any thread may claim:
//!   on one thread this was as much work as the factorisation itself), then the panel team
//!   factors it while the other threads update the rest of the trailing matrix; the team joins
//!   them when it is done. The team is thread 0 alone below eight threads, and one thread per
//!   four workers (at most four) from eight on: on sixteen threads one thread factoring the
//!   panel was the critical path.
//!   The trailing update is cut into column chunks claimed from an atomic counter, so a thread
//!   slowed down by another process on a shared machine simply takes fewer chunks. The claims
//!   are guided: wide first, narrowing to 48 columns at the end of the step, so the threads
//!   (the panel team, which starts late, among them) reach the step's barrier together.
//! - The matrix is stored row-major, so a row interchange moves contiguous memory instead of
//!   touching one cache line per column. Row interchanges are applied as a gather driven by the
//!   panel's permutation, and never to earlier panels' `L` (the LINPACK `dgesl` convention; the
//!   forward substitution applies them as it goes).
//! - The panel is copied to a column-major scratch block and factored there: by faer's recursive
//!   partial-pivoting LU on one thread, by the team's own recursive LU (each member owning a
//!   share of the panel's rows) on several.
//! - The triangular solve `U₁₂ = L₁₁⁻¹ A₁₂` multiplies by the inverse of the unit lower
//!   triangle, formed once per panel, so it runs on the same micro-kernel as the trailing
//!   update (`A₂₂ −= L₂₁ U₁₂`), which is where nearly all the time goes.
//! - The micro-kernels are packed register-tile GEMM kernels, BLIS style: AVX-512 (24 × 8 tile)
//!   or AVX2 + FMA (8 × 6), chosen at run time, so the binary still runs on any x86-64. Without
//!   either (or off x86-64) the same blocked algorithm calls faer's `matmul` and triangular solve
//!   instead.
//! - The solve is blocked the same way, with the matrix–vector products split over the threads.
//! - Each worker is pinned to a CPU in the core crate's placement order (DESIGN.md §5); the
//!   calling thread only waits, so its own affinity is left alone.
//!
//! # Layout
//!
//! - `system`: the configuration and outcome, the generated `A` and `b` and their aligned
//!   buffers, the residual check, the sizing of `n` (from the measured FMA rate, a time budget
//!   and the memory available) and the run entry points;
//! - `micro`: the packed micro-kernels per ISA (AVX-512, AVX2 + FMA, the faer fallback) and the
//!   choice between them;
//! - `sync`: the poisonable barrier and the state the worker threads share;
//! - `panel`: the panel's LU with partial pivoting shared by a team of threads;
//! - `lu`: the blocked LU with look-ahead, the panel's copies and packing and the blocked
//!   solve;
//! - `mxp`: HPL-MxP, the low-precision LU without pivoting (bf16 or f32 update kernels) and
//!   its GMRES refinement in f64, on HPL-MxP's diagonally dominant matrix.

mod lu;
mod micro;
pub mod mxp;
pub mod openblas;
pub mod overhead;
mod panel;
pub mod run;
mod sync;
mod system;

pub use lu::NB;
pub use system::{
    choose_n, expected_seconds, memory_needed, n_for_memory, run, LinpackConfig, LinpackOutcome,
    Prepared, SizeChoice, SizeLimit, Sizing, BUDGET_MEMORY_SHARE, EXPECTED_OF_FMA_RATE,
};

/// Helpers shared by the submodules' tests.
#[cfg(test)]
mod test_support {
    use super::LinpackConfig;

    pub(super) fn cfg(n: usize, threads: usize) -> LinpackConfig {
        LinpackConfig {
            n,
            threads,
            seed: 7,
        }
    }

    pub(super) fn max_abs(v: impl IntoIterator<Item = f64>) -> f64 {
        v.into_iter().fold(0.0, |m, e| m.max(e.abs()))
    }
}

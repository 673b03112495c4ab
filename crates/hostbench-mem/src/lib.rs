//! hostbench-mem: memory bandwidth and latency.
//!
//! * `bandwidth` — STREAM's copy/scale/add/triad with STREAM's arithmetic, plus read, write and
//!   the classic block-wise read+write (`rw`), in sequential or random block order, any block size,
//!   temporal or non-temporal stores, SIMD chosen at run time; every sample validated.
//! * `latency` — a pointer chase over one random cycle of cache lines (Sattolo), with 4 KiB or
//!   transparent huge pages (verified), optional parallel chains, and the classic 1-byte
//!   sequential/random access latency.
//! * `sizing` — STREAM's ≥ 4 × LLC rule, the 1 GiB classic floor, and L1/L2/L3/DRAM labels.
//! * `peak` — the DRAM limit from DMI or the spec file.

pub mod buffer;
pub mod latency;
pub mod order;
pub mod sizing;

pub use buffer::{Pages, Region};
pub use order::{Pattern, Permutation};

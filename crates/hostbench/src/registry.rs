//! The one list of measuring subsystems, in the order `run` measures them. `run`, `--only` and
//! `--skip` (and their help), `info` and the fleet iterate it; adding a subsystem is its crate
//! plus one line here.

use hostbench_core::subsystem::{names, Subsystem};

pub static SUBSYSTEMS: [&dyn Subsystem; 6] = [
    &hostbench_cpu::Cpu,
    &hostbench_cpu::Linpack,
    &hostbench_mem::Mem,
    &hostbench_disk::Disk,
    &hostbench_net::Net,
    &hostbench_gpu::Gpu,
];

/// `--only`/`--skip` help, naming every registered subsystem (so the list cannot drift).
pub fn list_help(what: &str) -> String {
    format!("{what} (comma-separated): {}", names(&SUBSYSTEMS))
}

//! The NUMA matrix: bandwidth and latency from each node's CPUs to each node's memory.
//!
//! A two-socket server reads its own memory at one rate and the other socket's at a lower one,
//! and pays a longer latency for it; chiplet parts in NPS2/NPS4 or SNC modes and CXL or HBM
//! memory nodes make the matrix larger and its shape less obvious. Each cell places the work
//! explicitly instead of trusting first touch: the memory is bound to its node with
//! `mbind(MPOL_BIND)` (strict, so an exhausted node fails the cell rather than quietly spilling
//! to another), before any page is touched; the threads are pinned to the CPU node's CPUs.
//! After the first touch `move_pages` is asked where a sample of the pages really are, and the
//! record carries that share (`mem_node_share`): a binding the kernel did not honour is visible.
//!
//! * `bandwidth`: the `read` kernel of `mem.bandwidth` (every sample checksummed) on every
//!   allowed CPU of the CPU node, over a DRAM-sized working set on the memory node.
//! * `latency`: the `mem.latency` pointer chase (final pointers checked) on the CPU node's
//!   first CPU, over a DRAM-sized set on the memory node, huge pages.
//!
//! Nodes without CPUs (memory-only: CXL expanders, HBM in flat mode) are memory columns only;
//! nodes without memory are CPU rows only. A one-node host is a single cell, and the record says
//! so.

use std::sync::Mutex;
use std::time::Duration;

use hostbench_core::host::{numa_topology, NumaNode};
use hostbench_core::model::{Host, Metric, Work};
use hostbench_core::spec::Spec;
use hostbench_core::{affinity, parallel, BenchError, Case, Runner};
use serde_json::json;

use crate::bandwidth::{self, Placement, Point, Timing};
use crate::buffer::Pages;
use crate::latency::{self, chase_walker};
use crate::{sizing, Block, Isa, Kernel, Pattern, Store};

/// Benchmark id of every record this module produces.
pub const BENCHMARK: &str = "mem.numa";

hostbench_core::named_enum! {
    /// What a cell measures.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum NumaMetric("NUMA metric") {
        Bandwidth = "bandwidth" | "bw",
        Latency = "latency" | "lat",
    }
}

/// Plain configuration of the matrix.
#[derive(Debug, Clone)]
pub struct NumaConfig {
    /// Nodes to include (as CPU rows where they have CPUs, memory columns where they have
    /// memory); `None`: every node.
    pub nodes: Option<Vec<usize>>,
    pub metrics: Vec<NumaMetric>,
    /// Bandwidth working set (all arrays of all threads); `None`: the DRAM default.
    pub bandwidth_bytes: Option<u64>,
    /// The chase's working set.
    pub latency_bytes: u64,
    /// Target length of one sample.
    pub duration: Duration,
    pub seed: u64,
}

impl NumaConfig {
    pub fn for_host(host: &Host) -> Self {
        Self {
            nodes: None,
            metrics: NumaMetric::ALL.to_vec(),
            bandwidth_bytes: None,
            latency_bytes: crate::classic_latency_bytes(host),
            duration: Duration::from_millis(100),
            seed: 0x4E55_4D41,
        }
    }

    /// The CPU rows and memory columns on `topology`, or why the node list cannot be used.
    pub fn cells(&self, topology: &[NumaNode]) -> Result<(Vec<Row>, Vec<usize>), BenchError> {
        if let Some(nodes) = &self.nodes {
            if nodes.is_empty() {
                return Err(BenchError::invalid(format!(
                    "empty node list for {BENCHMARK}"
                )));
            }
            let have: Vec<String> = topology.iter().map(|n| n.id.to_string()).collect();
            if let Some(bad) = nodes.iter().find(|&&n| !topology.iter().any(|t| t.id == n)) {
                return Err(BenchError::invalid(format!(
                    "NUMA node {bad} does not exist (this host has node{} {})",
                    if have.len() == 1 { "" } else { "s" },
                    have.join(", ")
                )));
            }
        }
        let chosen = |n: &NumaNode| self.nodes.as_ref().is_none_or(|l| l.contains(&n.id));
        let allowed = affinity::allowed_cpus();
        let order = affinity::placement_order();
        let rows: Vec<Row> = topology
            .iter()
            .filter(|n| chosen(n))
            .filter_map(|n| {
                // The node's allowed CPUs, in placement order (one per core first).
                let cpus: Vec<usize> = order
                    .iter()
                    .copied()
                    .filter(|c| n.cpus.contains(c) && allowed.contains(c))
                    .collect();
                (!cpus.is_empty()).then_some(Row { node: n.id, cpus })
            })
            .collect();
        // A node whose memory size is unknown (0) is still offered: the binding will tell.
        let single = topology.len() == 1;
        let cols: Vec<usize> = topology
            .iter()
            .filter(|n| chosen(n) && (n.mem_bytes > 0 || single))
            .map(|n| n.id)
            .collect();
        if rows.is_empty() {
            return Err(BenchError::invalid(
                "none of the chosen NUMA nodes has a CPU this process may use",
            ));
        }
        if cols.is_empty() {
            return Err(BenchError::invalid(
                "none of the chosen NUMA nodes has memory",
            ));
        }
        Ok((rows, cols))
    }

    pub fn case_count(&self, topology: &[NumaNode]) -> usize {
        self.cells(topology)
            .map_or(0, |(r, c)| r.len() * c.len() * self.metrics.len())
    }
}

/// A CPU node: its id and the allowed CPUs the cell's threads run on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    pub node: usize,
    pub cpus: Vec<usize>,
}

/// Run the matrix through `runner`: CPU node × memory node × metric.
pub fn run_numa(
    runner: &mut Runner,
    cfg: &NumaConfig,
    host: &Host,
    spec: &Spec,
) -> Result<(), BenchError> {
    if cfg.metrics.is_empty() {
        return Err(BenchError::invalid(format!(
            "empty metric list for {BENCHMARK}"
        )));
    }
    let topology = numa_topology();
    let (rows, cols) = cfg.cells(&topology)?;
    let one_node = topology.len() == 1;
    if one_node {
        runner.note("mem.numa: this host has one NUMA node, so the matrix is a single cell");
    }
    runner.plan(rows.len() * cols.len() * cfg.metrics.len());
    for row in &rows {
        for &mem in &cols {
            for &metric in &cfg.metrics {
                let case = Case::new(
                    BENCHMARK,
                    match metric {
                        NumaMetric::Bandwidth => Metric::Throughput,
                        NumaMetric::Latency => Metric::Latency,
                    },
                    match metric {
                        NumaMetric::Bandwidth => "B/s",
                        NumaMetric::Latency => "s",
                    },
                )
                .work(Work::Memory)
                .param("cpu_node", row.node)
                .param("mem_node", mem)
                .param("metric", metric.name());
                let note = cell_note(row, mem, metric, one_node);
                match metric {
                    NumaMetric::Bandwidth => {
                        bandwidth_cell(runner, cfg, host, spec, &case, row, mem, &note)?
                    }
                    NumaMetric::Latency => latency_cell(runner, cfg, &case, row, mem, &note)?,
                }
            }
        }
    }
    Ok(())
}

fn cell_note(row: &Row, mem: usize, metric: NumaMetric, one_node: bool) -> String {
    let what = match metric {
        NumaMetric::Bandwidth => format!(
            "read bandwidth of {} thread(s) on node {}'s CPUs",
            row.cpus.len(),
            row.node
        ),
        NumaMetric::Latency => format!(
            "pointer-chase latency from CPU {} (node {})",
            row.cpus[0], row.node
        ),
    };
    let place = if one_node {
        "this host has one NUMA node: the matrix is this single cell (local memory)".to_string()
    } else if row.node == mem {
        "local memory".to_string()
    } else {
        format!("remote memory on node {mem}")
    };
    format!("{what}, memory bound to node {mem} (mbind); {place}")
}

#[allow(clippy::too_many_arguments)]
fn bandwidth_cell(
    runner: &mut Runner,
    cfg: &NumaConfig,
    host: &Host,
    spec: &Spec,
    case: &Case,
    row: &Row,
    mem: usize,
    note: &str,
) -> Result<(), BenchError> {
    let point = Point {
        kernel: Kernel::Read,
        pattern: Pattern::Seq,
        block: Block::Whole,
        working_set: cfg
            .bandwidth_bytes
            .unwrap_or_else(|| sizing::dram_working_set(&host.cpu.caches, 1)),
        threads: row.cpus.len(),
        store: Store::Temporal,
        isa: Isa::best(),
    };
    let case = case
        .clone()
        .param("threads", point.threads)
        .param("working_set_bytes", point.working_set);
    let timing = Timing {
        passes: None,
        duration: cfg.duration,
        pages: Pages::Huge,
        seed: cfg.seed,
        reference: None,
    };
    let place = Placement {
        cpus: Some(row.cpus.clone()),
        mem_node: Some(mem),
    };
    bandwidth::run_point_as(runner, &point, &timing, host, spec, &case, &place, &|rec| {
        rec.extra.insert("note".into(), json!(note));
    })
}

fn latency_cell(
    runner: &mut Runner,
    cfg: &NumaConfig,
    case: &Case,
    row: &Row,
    mem: usize,
    note: &str,
) -> Result<(), BenchError> {
    let cpu = row.cpus[0];
    let case = case
        .clone()
        .param("threads", 1)
        .param("working_set_bytes", cfg.latency_bytes);
    let pages = Pages::Huge;
    let built = parallel::run_pinned(
        1,
        &[cpu],
        |_| {
            let w = chase_walker(cfg.latency_bytes, pages, cfg.seed, Some(mem))?;
            let share = w.region().share_on_node(mem, 64);
            Ok((w, share))
        },
        |_| (),
    );
    let (walker, share) = match built.map(|mut t| t.results.pop()) {
        Ok(Some(b)) => b,
        Ok(None) => return runner.skip(&case, &BenchError::Failed("chase not built".into())),
        Err(e @ BenchError::InvalidInput(_)) => return Err(e),
        Err(e) => return runner.skip(&case, &e),
    };
    let walkers = [Mutex::new(walker)];
    let notes = latency::chase_notes(&walkers, pages)?;
    latency::measure(
        runner,
        &case,
        &walkers,
        &[cpu],
        1,
        cfg.duration,
        notes,
        &|rec| {
            rec.extra.insert("note".into(), json!(note));
            rec.extra.insert("cpu".into(), json!(cpu));
            if let Some(s) = share {
                rec.extra.insert("mem_node_share".into(), json!(s));
            }
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use hostbench_core::RunnerConfig;

    fn node(id: usize, cpus: Vec<usize>, mem_bytes: u64) -> NumaNode {
        NumaNode {
            id,
            cpus,
            mem_bytes,
        }
    }

    #[test]
    fn rows_need_allowed_cpus_and_columns_need_memory() {
        let host = hostbench_core::host::inventory();
        let allowed = affinity::allowed_cpus();
        let topo = vec![
            node(0, allowed.clone(), 1 << 30),
            node(1, vec![], 1 << 30),
            node(2, vec![1 << 19], 0),
        ];
        let cfg = NumaConfig::for_host(&host);
        let (rows, cols) = cfg.cells(&topo).unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].node, 0);
        assert_eq!(rows[0].cpus.len(), allowed.len());
        assert_eq!(cols, [0, 1]);
        assert_eq!(cfg.case_count(&topo), 4);

        let mut only = cfg.clone();
        only.nodes = Some(vec![1]);
        let e = only.cells(&topo).unwrap_err().to_string();
        assert!(e.contains("has a CPU"), "{e}");
        only.nodes = Some(vec![7]);
        let e = only.cells(&topo).unwrap_err().to_string();
        assert!(
            e.contains("NUMA node 7 does not exist (this host has nodes 0, 1, 2)"),
            "{e}"
        );
        only.nodes = Some(vec![]);
        assert!(only.cells(&topo).is_err());
    }

    #[test]
    fn this_host_gets_its_matrix_with_checked_placement() {
        let host = hostbench_core::host::inventory();
        let mut cfg = NumaConfig::for_host(&host);
        cfg.nodes = Some(vec![numa_topology()[0].id]);
        cfg.bandwidth_bytes = Some(8 * sizing::MIB);
        cfg.latency_bytes = 4 * sizing::MIB;
        cfg.duration = Duration::from_millis(5);
        let mut runner = Runner::new(RunnerConfig::quiet(2), host.clone());
        run_numa(&mut runner, &cfg, &host, &Spec::default()).unwrap();
        let result = runner.finish().unwrap();
        // A kernel without NUMA support skips the cells as unsupported; otherwise both metrics.
        if !result.skipped.is_empty() {
            assert!(
                result.skipped.iter().all(|s| s.reason.contains("NUMA")),
                "{:?}",
                result.skipped
            );
            return;
        }
        assert_eq!(result.records.len(), 2);
        for (rec, metric) in result.records.iter().zip(["bandwidth", "latency"]) {
            assert_eq!(rec.benchmark, BENCHMARK);
            assert_eq!(rec.param("metric").as_deref(), Some(metric));
            let keys: Vec<&str> = rec.params.keys().map(String::as_str).collect();
            assert_eq!(keys[..3], ["cpu_node", "mem_node", "metric"]);
            assert!(rec.value > 0.0);
            assert!(rec.extra["note"]
                .as_str()
                .unwrap()
                .contains("bound to node"));
            if let Some(s) = rec.extra.get("mem_node_share") {
                assert_eq!(s.as_f64(), Some(1.0));
            }
        }
        assert_eq!(result.records[0].unit, "B/s");
        assert_eq!(result.records[1].unit, "s");
    }
}

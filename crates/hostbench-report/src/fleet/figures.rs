//! The headline figures of a fleet report and how each is found in a node's records.
//!
//! Each figure is a benchmark id, the parameter values that select its records, and optionally a
//! size parameter whose largest value is kept (the DRAM point of a cache sweep). Of what remains,
//! the one-screen summary's rule (`export::headlines`) picks the figure: the best at the largest
//! concurrency. So a figure means the same on a node's summary and in the fleet report, and a
//! profile with more cases changes nothing here.
//!
//! The node figures come from each node's run.json; the network figures from the pair files of
//! the network phase (`net/<from>--<to>.json`), since a node's own run measures only loopback.

use hostbench_core::model::{Metric, Record};
use serde_json::{Map, Value};

use crate::export::headlines;

/// A selecting parameter value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Want {
    Str(&'static str),
    Num(f64),
}

impl Want {
    fn matches(self, v: &Value) -> bool {
        match self {
            Want::Str(s) => v.as_str() == Some(s),
            Want::Num(n) => v.as_f64() == Some(n),
        }
    }

    fn to_value(self) -> Value {
        match self {
            Want::Str(s) => Value::from(s),
            Want::Num(n) => Value::from(n),
        }
    }
}

/// Where a figure comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The node's own run.json.
    Node,
    /// The network phase's pair files, where the node is the client.
    Pairs,
}

#[derive(Debug, Clone, Copy)]
pub struct FigureSpec {
    pub id: &'static str,
    pub label: &'static str,
    pub benchmark: &'static str,
    pub select: &'static [(&'static str, Want)],
    /// Keep only the records at this parameter's largest value before the headline rule.
    pub at_largest: Option<&'static str>,
    pub source: Source,
    /// The net matrix's metric name, for the network figures.
    pub matrix_metric: Option<&'static str>,
}

impl FigureSpec {
    /// The selecting parameters as a JSON object (the figure's `params` in the document).
    pub fn params(&self) -> Map<String, Value> {
        self.select
            .iter()
            .map(|(k, w)| (k.to_string(), w.to_value()))
            .collect()
    }

    /// The headline record of this figure among `records`, if any.
    pub fn pick<'a>(&self, records: &'a [Record]) -> Option<&'a Record> {
        let mut recs: Vec<&Record> = records
            .iter()
            .filter(|r| r.benchmark == self.benchmark)
            // A figure is of the idle path: a round trip under load is another question.
            .filter(|r| !crate::table::is_under_load(r))
            .filter(|r| {
                self.select
                    .iter()
                    .all(|(k, w)| r.params.get(*k).is_some_and(|v| w.matches(v)))
            })
            .collect();
        if let Some(key) = self.at_largest {
            let size = |r: &Record| r.params.get(key).and_then(Value::as_f64);
            let largest = recs.iter().filter_map(|r| size(r)).fold(f64::MIN, f64::max);
            if largest > f64::MIN {
                recs.retain(|r| size(r) == Some(largest));
            }
        }
        // After the selection the records are one "what"; should a future parameter split them,
        // the best of the headlines stands for the node.
        let metric = recs.first()?.metric;
        let picked = headlines(&recs).into_iter();
        match metric {
            Metric::Throughput => picked.max_by(|a, b| a.value.total_cmp(&b.value)),
            Metric::Latency => picked.min_by(|a, b| a.value.total_cmp(&b.value)),
        }
    }
}

/// The fleet report's figures, in column order.
pub const FIGURES: [FigureSpec; 8] = [
    FigureSpec {
        id: "cpu_fp64",
        label: "CPU fp64 peak",
        benchmark: "cpu.flops",
        select: &[("dtype", Want::Str("f64"))],
        at_largest: None,
        source: Source::Node,
        matrix_metric: None,
    },
    FigureSpec {
        id: "linpack",
        label: "LINPACK",
        benchmark: "cpu.linpack",
        select: &[],
        at_largest: None,
        source: Source::Node,
        matrix_metric: None,
    },
    FigureSpec {
        id: "dram_triad",
        label: "DRAM triad",
        benchmark: "mem.bandwidth",
        select: &[("kernel", Want::Str("triad"))],
        at_largest: Some("working_set_bytes"),
        source: Source::Node,
        matrix_metric: None,
    },
    FigureSpec {
        id: "dram_latency",
        label: "DRAM latency",
        benchmark: "mem.latency",
        select: &[("pattern", Want::Str("chase"))],
        at_largest: Some("working_set_bytes"),
        source: Source::Node,
        matrix_metric: None,
    },
    FigureSpec {
        id: "disk_seq_read",
        label: "Disk seq read",
        benchmark: "disk.throughput",
        select: &[("op", Want::Str("read"))],
        at_largest: None,
        source: Source::Node,
        matrix_metric: None,
    },
    FigureSpec {
        id: "disk_4k_randread",
        label: "Disk 4K rand read",
        benchmark: "disk.iops",
        select: &[
            ("op", Want::Str("randread")),
            ("block_bytes", Want::Num(4096.0)),
        ],
        at_largest: None,
        source: Source::Node,
        matrix_metric: None,
    },
    FigureSpec {
        id: "net_tcp",
        label: "Net TCP to partners",
        benchmark: "net.throughput",
        select: &[
            ("proto", Want::Str("tcp")),
            ("direction", Want::Str("send")),
        ],
        at_largest: None,
        source: Source::Pairs,
        matrix_metric: Some("throughput"),
    },
    FigureSpec {
        id: "net_rtt",
        label: "Net TCP round trip",
        benchmark: "net.latency",
        select: &[("proto", Want::Str("tcp"))],
        at_largest: None,
        source: Source::Pairs,
        matrix_metric: Some("rtt"),
    },
];

/// The TCP throughput of a pair's other direction (`direction=recv`: the server sends to the
/// client), beside `net_tcp`'s `send`: with both, a pair gives two flows and a slow node's egress
/// can be told from its partner's ingress. Not a column of the report of its own.
pub const NET_TCP_RECV: FigureSpec = FigureSpec {
    id: "net_tcp_recv",
    label: "Net TCP from partners",
    benchmark: "net.throughput",
    select: &[
        ("proto", Want::Str("tcp")),
        ("direction", Want::Str("recv")),
    ],
    at_largest: None,
    source: Source::Pairs,
    matrix_metric: Some("throughput"),
};

/// `(value, unit, higher is better)` of each figure of `source` among `records`, in `FIGURES`
/// order (`None` for figures of the other source or not measured).
pub fn extract(records: &[Record], source: Source) -> Vec<Option<Measured>> {
    FIGURES
        .iter()
        .map(|f| {
            if f.source != source {
                return None;
            }
            f.measure(records)
        })
        .collect()
}

impl FigureSpec {
    /// The figure's value among `records`, if measured.
    pub fn measure(&self, records: &[Record]) -> Option<Measured> {
        self.pick(records).map(|r| Measured {
            value: r.value,
            unit: r.unit.clone(),
            higher_is_better: r.metric == Metric::Throughput,
        })
    }
}

/// One figure's value on one node (or pair).
#[derive(Debug, Clone, PartialEq)]
pub struct Measured {
    pub value: f64,
    pub unit: String,
    pub higher_is_better: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testdata::{record, synthetic_run};
    use serde_json::json;

    fn spec(id: &str) -> &'static FigureSpec {
        FIGURES.iter().find(|f| f.id == id).unwrap()
    }

    #[test]
    fn node_figures_of_the_synthetic_run() {
        let run = synthetic_run();
        let got = extract(&run.records, Source::Node);
        // cpu.flops f64 at 2 threads is the best at the largest concurrency.
        assert_eq!(got[0].as_ref().unwrap().value, 98e9);
        // No linpack, no triad in the fixture.
        assert!(got[1].is_none() && got[2].is_none());
        // mem.latency: the largest working set (256 MiB) is the DRAM figure, lower is better.
        let lat = got[3].as_ref().unwrap();
        assert_eq!((lat.value, lat.higher_is_better), (95e-9, false));
        assert_eq!(got[4].as_ref().unwrap().value, 1.9e9);
        // Network figures are not taken from a node's own (loopback) records.
        assert!(got[6].is_none() && got[7].is_none());
    }

    #[test]
    fn triad_is_taken_at_the_largest_working_set_not_in_cache() {
        let mk = |ws: u64, v: f64| {
            record(
                "mem.bandwidth",
                Metric::Throughput,
                "B/s",
                json!({"kernel": "triad", "working_set_bytes": ws, "threads": 2}),
                &[v],
            )
        };
        let recs = vec![mk(32 << 10, 400e9), mk(1 << 30, 30e9), mk(1 << 30, 44e9)];
        assert_eq!(spec("dram_triad").pick(&recs).unwrap().value, 44e9);
    }

    #[test]
    fn iops_needs_4k_random_reads() {
        let mk = |op: &str, block: u64, v: f64| {
            record(
                "disk.iops",
                Metric::Throughput,
                "IO/s",
                json!({"op": op, "block_bytes": block, "threads": 1, "iodepth": 32}),
                &[v],
            )
        };
        let recs = vec![mk("read", 1 << 20, 3500.0), mk("randread", 65536, 9e3)];
        assert!(spec("disk_4k_randread").pick(&recs).is_none());
        let recs = vec![mk("randread", 4096, 1.2e5), mk("read", 1 << 20, 3500.0)];
        assert_eq!(spec("disk_4k_randread").pick(&recs).unwrap().value, 1.2e5);
    }

    #[test]
    fn pair_figures() {
        let run = synthetic_run();
        let got = extract(&run.records, Source::Pairs);
        // TCP send at the largest stream count, best block; round trip of TCP.
        let tput = got[6].as_ref().unwrap();
        assert!(tput.higher_is_better && tput.unit == "bit/s");
        assert_eq!(got[7].as_ref().unwrap().value, 18e-6);
        assert!(got[0].is_none());
    }
}

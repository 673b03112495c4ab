//! The network subsystem for `hostbench run`, on loopback (a second host needs `hostbench net
//! client`): `standard` is TCP and UDP at 1 and all streams, TCP/UDP ping-pong, UDP round trips
//! at 10, 50 and 90 % of the searched capacity, and TCP_RR, UDP_RR and TCP_CRR rates, in
//! half-second samples (about half a minute); `quick` one stream each and no load curve or
//! transactions; `full` every direction, three block sizes, six loads over TCP and UDP and 1 and
//! 16 requests in flight; `classic` the assignment's matrix.

use std::time::Duration;

use hostbench_core::model::{Diagnosis, Record};
use hostbench_core::subsystem::{Profile, ReferenceTool, RunContext, Subsystem};
use hostbench_core::{BenchError, Phase, Runner};

use crate::{Direction, NetConfig, Target};

/// TCP/UDP throughput and ping-pong latency on loopback.
pub struct Net;

/// What a profile runs, before `--duration` and `--scale`.
pub fn profile_config(profile: Profile) -> NetConfig {
    let target = Target::Loopback { v6: false };
    let mut cfg = match profile {
        Profile::Classic => NetConfig::classic(target),
        _ => NetConfig {
            target,
            ..NetConfig::default()
        },
    };
    match profile {
        // The health probe: one loopback TCP stream, no latency, load or transaction cases.
        Profile::Check => {
            cfg.protos = vec![crate::Proto::Tcp];
            cfg.streams = vec![1];
            cfg.duration = Duration::from_millis(300);
            cfg.latency = false;
            cfg.loaded = false;
            cfg.transactions = false;
        }
        Profile::Quick => {
            cfg.streams = vec![1];
            cfg.duration = Duration::from_millis(300);
            cfg.loaded = false;
            cfg.transactions = false;
        }
        Profile::Standard => {
            if cfg.streams.len() > 2 {
                cfg.streams = vec![1, *cfg.streams.last().unwrap_or(&1)];
            }
            // Half a second holds some 40 000 loopback round trips and a thousand timed
            // messages under load: enough for a p99, and the three-minute run keeps its budget.
            cfg.duration = Duration::from_millis(500);
        }
        Profile::Full => {
            cfg.directions = vec![Direction::Send, Direction::Recv, Direction::Bidir];
            cfg.tcp_blocks = vec![1000, 32_000, crate::DEFAULT_TCP_BLOCK];
            cfg.pairs = vec![1, 2];
            cfg.loads = [0.1, 0.25, 0.5, 0.75, 0.9, 1.0]
                .into_iter()
                .map(crate::Load::Share)
                .collect();
            cfg.loaded_protos = vec![crate::Proto::Udp, crate::Proto::Tcp];
            cfg.outstanding = vec![1, 16];
        }
        Profile::Classic => {
            cfg.duration = Duration::from_secs(1);
            cfg.loaded = false;
            cfg.transactions = false;
        }
    }
    cfg
}

fn run_config(ctx: &RunContext<'_>) -> NetConfig {
    let mut cfg = profile_config(ctx.profile);
    cfg.duration = ctx.sample_length(cfg.duration);
    cfg.bytes = cfg.bytes.map(|b| ((b as f64 * ctx.scale) as u64).max(1));
    cfg.count = cfg.count.map(|c| ((c as f64 * ctx.scale) as u64).max(1));
    cfg.reference = ctx.reference;
    cfg
}

/// Cases `run_net` plans: throughput per protocol, direction, block and stream count (UDP's
/// block list may be the path MTU's default, one entry), latency per protocol, message size
/// and pair count, latency under load per protocol and load, and transactions.
pub fn case_count(cfg: &NetConfig) -> usize {
    let blocks = cfg
        .tcp_blocks
        .len()
        .max(cfg.udp_blocks.as_ref().map_or(1, Vec::len));
    let tp = cfg.protos.len() * cfg.directions.len() * blocks * cfg.streams.len();
    let lat = cfg.protos.len() * cfg.msg_sizes.len() * cfg.pairs.len();
    let loaded = cfg.loaded_protos.len() * cfg.loads.len();
    usize::from(cfg.throughput) * tp
        + usize::from(cfg.latency) * lat
        + usize::from(cfg.loaded) * loaded
        + crate::transactions::cases(cfg).len()
}

impl Subsystem for Net {
    fn name(&self) -> &'static str {
        "net"
    }

    fn summary(&self) -> &'static str {
        "TCP/UDP throughput, ping-pong round trips, round trips under load and transaction rates on loopback"
    }

    fn estimate(&self, ctx: &RunContext<'_>) -> Phase {
        let cfg = run_config(ctx);
        // Each sample also sets up its connections (a few ms on loopback).
        Phase::new(
            self.name(),
            case_count(&cfg),
            cfg.duration.as_secs_f64() + 0.02,
        )
    }

    fn run(&self, runner: &mut Runner, ctx: &RunContext<'_>) -> Result<(), BenchError> {
        crate::run_net(runner, &run_config(ctx), ctx.host, ctx.spec)
    }

    /// A latency under load whose paced sender fell behind names it.
    fn causes(&self, rec: &Record) -> Vec<Diagnosis> {
        crate::causes::sender_behind(rec).into_iter().collect()
    }

    fn reference_tools(&self) -> &'static [ReferenceTool] {
        &[
            ReferenceTool {
                name: "iperf3",
                package: "iperf3",
                serves: "net.throughput tcp/udp (same block, streams, direction, rate)",
                in_run: "the first TCP throughput case",
                also: "net client HOST --reference-port P against `iperf3 -s -p P` there",
            },
            ReferenceTool {
                name: "sockperf",
                package: "sockperf",
                serves: "net.latency tcp/udp ping-pong (same message size), and under load \
                         (sockperf ul at the same message rate and reply interval)",
                in_run: "the first TCP ping-pong case and the first latency-under-load case",
                also: "net client HOST --reference-port P against `sockperf sr -p P+1` there",
            },
        ]
    }
}

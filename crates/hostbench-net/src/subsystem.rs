//! The network subsystem for `hostbench run`, on loopback (a second host needs `hostbench net
//! client`): `standard` is TCP and UDP at 1 and all streams plus TCP/UDP ping-pong, about half a
//! minute; `quick` one stream each; `full` every direction and three block sizes; `classic` the
//! assignment's matrix.

use std::time::Duration;

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
        Profile::Quick => {
            cfg.streams = vec![1];
            cfg.duration = Duration::from_millis(300);
        }
        Profile::Standard => {
            if cfg.streams.len() > 2 {
                cfg.streams = vec![1, *cfg.streams.last().unwrap_or(&1)];
            }
            cfg.duration = Duration::from_secs(1);
        }
        Profile::Full => {
            cfg.directions = vec![Direction::Send, Direction::Recv, Direction::Bidir];
            cfg.tcp_blocks = vec![1000, 32_000, crate::DEFAULT_TCP_BLOCK];
            cfg.pairs = vec![1, 2];
        }
        Profile::Classic => cfg.duration = Duration::from_secs(1),
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
/// block list may be the path MTU's default, one entry), and latency per protocol, message size
/// and pair count.
pub fn case_count(cfg: &NetConfig) -> usize {
    let blocks = cfg
        .tcp_blocks
        .len()
        .max(cfg.udp_blocks.as_ref().map_or(1, Vec::len));
    let tp = cfg.protos.len() * cfg.directions.len() * blocks * cfg.streams.len();
    let lat = cfg.protos.len() * cfg.msg_sizes.len() * cfg.pairs.len();
    usize::from(cfg.throughput) * tp + usize::from(cfg.latency) * lat
}

impl Subsystem for Net {
    fn name(&self) -> &'static str {
        "net"
    }

    fn summary(&self) -> &'static str {
        "TCP/UDP throughput and ping-pong round trips on loopback"
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

    fn reference_tools(&self) -> &'static [ReferenceTool] {
        &[
            ReferenceTool {
                name: "iperf3",
                package: "iperf3",
                serves: "net.throughput tcp/udp (same block, streams, direction, rate)",
                how: "net loopback --reference; net client HOST --reference-port P against \
                      `iperf3 -s -p P` there",
            },
            ReferenceTool {
                name: "sockperf",
                package: "sockperf",
                serves: "net.latency tcp/udp ping-pong (same message size)",
                how: "net loopback --reference; net client HOST --reference-port P against \
                      `sockperf sr -p P+1` there",
            },
        ]
    }
}

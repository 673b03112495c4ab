//! The transactions section (`net.transactions`, transactions/s): netperf's TCP_RR with N
//! requests in flight per pair, UDP_RR, and TCP_CRR (a connection per transaction), over 1..N
//! pairs.
//!
//! A transaction is one request and its response, `--msg-size` bytes each (1 B by default, as
//! netperf's). The rate is the transactions every pair completed over the phase's wall time;
//! each transaction's time, from the request's write (or the `connect`) to its response (or the
//! server's close), goes into a histogram whose percentiles ride along. With N in flight that
//! time includes the wait behind the others: the rate rises, the time per transaction too.

use std::cell::RefCell;

use hostbench_core::histogram::LatencyHist;
use hostbench_core::model::{Metric, Work};
use hostbench_core::runner::{Case, Sample};
use hostbench_core::{BenchError, Runner};
use serde_json::json;

use crate::wire::{self, Direction, Proto, TestKind, TestSpec};
use crate::{kernel, kernel_extra, Ctx, Link, NetConfig};

hostbench_core::named_enum! {
    /// What a transaction is.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum TxMode("transaction mode") {
        /// Request/response on a connection kept open (netperf's TCP_RR / UDP_RR).
        Rr = "rr",
        /// TCP connect, request, response, close (netperf's TCP_CRR).
        Crr = "crr",
    }
}

/// One case of the section.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Tx {
    proto: Proto,
    mode: TxMode,
    msg: u64,
    pairs: u32,
    outstanding: u32,
}

/// The section's flags, checked before anything runs.
pub(crate) fn validate(cfg: &NetConfig) -> Result<(), BenchError> {
    if !cfg.transactions {
        return Ok(());
    }
    let bad = |m: String| Err(BenchError::invalid(m));
    if cfg.tx_modes.is_empty() {
        return bad("--tx-mode: no mode given".into());
    }
    if let Some(&o) = cfg
        .outstanding
        .iter()
        .find(|&&o| o == 0 || o > wire::MAX_OUTSTANDING)
    {
        return bad(format!(
            "--outstanding {o}: must be 1..={}",
            wire::MAX_OUTSTANDING
        ));
    }
    let tcp = cfg.protos.contains(&Proto::Tcp);
    if !tcp && cfg.tx_modes == [TxMode::Crr] {
        return bad("--tx-mode crr: connect-request-response is TCP only (--proto tcp)".into());
    }
    if !tcp && cfg.outstanding.iter().any(|&o| o > 1) {
        return bad(
            "--outstanding: UDP request/response keeps one request in flight (a lost datagram \
             would stall a window); use --proto tcp"
                .into(),
        );
    }
    for &m in &cfg.msg_sizes {
        if let Some(&o) = cfg
            .outstanding
            .iter()
            .find(|&&o| u64::from(o) * m > wire::MAX_IN_FLIGHT)
        {
            return bad(format!(
                "--outstanding {o} with --msg-size {m}: {} bytes in flight per pair exceeds the \
                 {} KiB the socket buffers are sure to hold (both ends write before they read)",
                u64::from(o) * m,
                wire::MAX_IN_FLIGHT >> 10
            ));
        }
    }
    Ok(())
}

/// Every case: TCP request/response at each outstanding count, UDP request/response with one
/// in flight, TCP connect-request-response; each message size and pair count.
pub(crate) fn cases(cfg: &NetConfig) -> Vec<Tx> {
    let mut out = Vec::new();
    if !cfg.transactions {
        return out;
    }
    for &mode in &cfg.tx_modes {
        for &proto in &cfg.protos {
            let outstanding: Vec<u32> = match (mode, proto) {
                (TxMode::Rr, Proto::Tcp) => cfg.outstanding.clone(),
                (TxMode::Rr, Proto::Udp) => vec![1],
                (TxMode::Crr, Proto::Tcp) => vec![1],
                (TxMode::Crr, Proto::Udp) => continue,
            };
            for &msg in &cfg.msg_sizes {
                for &pairs in &cfg.pairs {
                    for &o in &outstanding {
                        out.push(Tx {
                            proto,
                            mode,
                            msg,
                            pairs,
                            outstanding: o,
                        });
                    }
                }
            }
        }
    }
    out
}

/// Why no reference tool stands beside these records.
const NO_NETPERF: &str = "netperf (TCP_RR, TCP_CRR) is not in Debian's archive, so no reference \
    runs here; BENCHMARKS.md compares against scripts/reference/rr.c, an independent C version \
    of the same transactions";

pub(crate) fn case(
    runner: &mut Runner,
    ctx: &Ctx<'_>,
    link: &mut Link,
    t: Tx,
    with_reference: bool,
) -> Result<(), BenchError> {
    let cfg = ctx.cfg;
    let case = Case::new("net.transactions", Metric::Throughput, "transactions/s")
        .work(Work::Network)
        .param("proto", t.proto.name())
        .param("mode", t.mode.name())
        .param("pairs", t.pairs)
        .param("outstanding", t.outstanding)
        .param("block_bytes", t.msg)
        .param("target", ctx.target.clone());
    let test = TestSpec {
        kind: match t.mode {
            TxMode::Rr => TestKind::PingPong,
            TxMode::Crr => TestKind::Crr,
        },
        proto: t.proto,
        direction: Direction::Send,
        streams: t.pairs,
        block: t.msg as u32,
        duration_ms: Some(cfg.duration.as_millis().max(1) as u64),
        bytes: None,
        count: None,
        rate_bps: None,
        sockbuf: cfg.sockbuf,
        reply_every: None,
        outstanding: (t.outstanding > 1).then_some(t.outstanding),
    };
    let link = RefCell::new(link);
    let hists: RefCell<Vec<LatencyHist>> = RefCell::new(Vec::new());
    let time_wait: RefCell<(Option<u64>, Option<u64>)> = RefCell::new((None, None));
    link.borrow_mut().take_server_kernel();
    let before = kernel::Counters::read();
    runner.run_case_keeping(
        &case,
        || {
            let o = link.borrow_mut().run(&test)?;
            let h = o
                .rtt
                .ok_or_else(|| BenchError::Failed("no transaction times came back".into()))?;
            if o.rounds == 0 || h.count() == 0 {
                return Err(BenchError::Failed("no transaction completed".into()));
            }
            let s = |p: f64| h.percentile_ns(p) as f64 / 1e9;
            let mut sample = Sample::new(o.rounds as f64 / o.seconds.max(1e-9))
                .with("p50_s", s(50.0))
                .with("p99_s", s(99.0))
                .with("transactions", o.rounds as f64);
            if t.proto == Proto::Udp {
                sample = sample.with("lost_transactions", o.lost_rounds as f64);
            }
            if t.mode == TxMode::Crr {
                *time_wait.borrow_mut() = (crate::crr::time_wait(), o.server_time_wait);
            }
            hists.borrow_mut().push(h);
            Ok(sample)
        },
        |rec| {
            let server = link.borrow_mut().take_server_kernel();
            kernel_extra(rec, &before, ctx.remote().then_some(server));
            ctx.common(rec);
            let h = crate::merged(crate::measured(&hists.borrow(), rec));
            rec.extra
                .insert("transaction_time".into(), json!(h.summary()));
            let what = match t.mode {
                TxMode::Rr => format!(
                    "{}-byte request and response on one {} {} per pair, {} in flight",
                    t.msg,
                    t.proto.name().to_uppercase(),
                    if t.proto == Proto::Tcp {
                        "connection (TCP_NODELAY)"
                    } else {
                        "socket"
                    },
                    t.outstanding
                ),
                TxMode::Crr => format!(
                    "TCP connect, {}-byte request and response, server closes first, client \
                     reads to EOF and closes; one connection per transaction",
                    t.msg
                ),
            };
            rec.extra.insert(
                "measures".into(),
                json!(format!(
                    "transactions per second over {} pair(s): {what}; transaction_time from the \
                     request (or connect) to the response (or close)",
                    t.pairs
                )),
            );
            if t.mode == TxMode::Crr {
                let (here, server) = *time_wait.borrow();
                let mut tw = json!({
                    "here": here,
                    "note": "TCP sockets in TIME_WAIT after the last sample, from \
                             /proc/net/sockstat: `here` this namespace's (both ends on loopback), \
                             `server` the remote server's; the server closes first, so they pile \
                             up on its side, where every 4-tuple is distinct",
                });
                if ctx.remote() {
                    tw["server"] = json!(server);
                }
                rec.extra.insert("time_wait".into(), tw);
            }
            if with_reference {
                rec.warnings
                    .push(format!("reference not measured: {NO_NETPERF}"));
            }
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cases_skip_what_a_protocol_cannot_do() {
        let cfg = NetConfig {
            outstanding: vec![1, 8],
            pairs: vec![1, 2],
            ..NetConfig::default()
        };
        let c = cases(&cfg);
        // TCP rr: 2 outstanding × 2 pairs; UDP rr: 2 pairs; TCP crr: 2 pairs.
        assert_eq!(c.len(), 8);
        assert!(c
            .iter()
            .all(|t| t.proto == Proto::Tcp || (t.mode == TxMode::Rr && t.outstanding == 1)));
    }

    #[test]
    fn bad_transaction_flags_name_the_flag() {
        let udp_only = NetConfig {
            protos: vec![Proto::Udp],
            tx_modes: vec![TxMode::Crr],
            ..NetConfig::default()
        };
        let e = udp_only.validate().expect_err("crr over udp").to_string();
        assert!(e.contains("--tx-mode crr") && e.contains("TCP only"), "{e}");
        let window = NetConfig {
            outstanding: vec![64],
            msg_sizes: vec![4096],
            ..NetConfig::default()
        };
        let e = window
            .validate()
            .expect_err("too much in flight")
            .to_string();
        assert!(
            e.contains("--outstanding 64") && e.contains("--msg-size 4096"),
            "{e}"
        );
        let zero = NetConfig {
            outstanding: vec![0],
            ..NetConfig::default()
        };
        assert!(zero.validate().is_err());
    }
}

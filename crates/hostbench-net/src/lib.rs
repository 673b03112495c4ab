//! hostbench-net: network throughput and latency between a client and a `hostbench net server`,
//! or on loopback with both in one process.
//!
//! Records:
//! - `net.throughput` (bit/s): receiver-counted goodput of TCP or UDP bulk transfer, per
//!   protocol, block size, stream count and direction (send = client → server, recv, bidir);
//!   UDP records carry loss, reordering, duplicates and RFC 3550 jitter.
//! - `net.latency` (s): ping-pong round-trip time (RTT, not one-way) of small messages over TCP
//!   (TCP_NODELAY) or UDP, from an HDR histogram (p50/p90/p99/p99.9, min, max); with `load_bps`,
//!   the round trips of a paced stream's sampled messages while it loads the path, timed from
//!   each message's due time (`under_load`).
//! - `net.transactions` (transactions/s): TCP request/response with N requests in flight per
//!   pair, UDP request/response, and TCP connect-request-response-close (`transactions`).
//!
//! Each data stream is one OS thread, pinned by default (stream i of client and server on the
//! i-th CPU of the placement order, so on loopback a stream's two ends share a core and its
//! cache). The control protocol (`wire`, `auth`) is authenticated by a pre-shared token with a
//! fresh nonce per connection; see `server` for the admission and timeout rules. A server that
//! dies mid-run leaves the case it was serving with the samples that finished (a record marked
//! incomplete), and once a reconnect is refused the client stops trying (`peer`).
//!
//! This file is the crate's facade: configuration, address parsing and `pub use`; the driver
//! (`run_net`, each case, the UDP rate search, `serve`) is in `run.rs` (issue 53).

pub mod auth;
pub mod client;
pub mod crr;
pub mod kernel;
pub mod limit;
pub mod loaded;
pub mod reference;
pub mod server;
pub mod stream;
pub mod subsystem;
pub mod tcp;
pub mod udp;
pub mod wire;

mod causes;
mod peer;
mod run;
mod transactions;
mod under_load;

pub use transactions::TxMode;
pub use under_load::Load;

// The sibling modules (transactions, under_load, loaded) reach the driver's `Link`, `Ctx` and
// helpers by their crate-root paths, as before the move; not every item is used that way.
#[allow(unused_imports)]
pub(crate) use run::*;
pub use run::{run_net, serve};
pub use subsystem::Net;

use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

use hostbench_core::units::format_bytes_iec;
use hostbench_core::BenchError;

pub use auth::Token;
pub use client::{Client, ClientError, Outcome};
pub use server::{Server, ServerConfig, ServerHandle};
pub use wire::{Direction, Proto, TestKind, TestSpec};

/// iperf3's port, so firewall rules written for it fit (the protocols differ).
pub const DEFAULT_PORT: u16 = 5201;
/// Default TCP block (iperf3's `-l` default).
pub const DEFAULT_TCP_BLOCK: u64 = 128 << 10;
/// UDP datagrams default to the largest that fits the path MTU, capped here (iperf3 on loopback
/// uses the same 32 KiB).
pub const DEFAULT_UDP_BLOCK_CAP: u64 = 32 << 10;
/// Default UDP target rate per stream.
pub const DEFAULT_UDP_RATE: f64 = 1e9;

/// Whom to measure against.
#[derive(Debug, Clone, PartialEq)]
pub enum Target {
    /// A server started in this process on the loopback address.
    Loopback { v6: bool },
    /// A running `hostbench net server`.
    Remote { host: String, port: u16 },
}

impl Target {
    fn label(&self) -> String {
        match self {
            Target::Loopback { v6: false } => "loopback".into(),
            Target::Loopback { v6: true } => "loopback6".into(),
            Target::Remote { host, .. } => host.clone(),
        }
    }
}

/// UDP pacing.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum UdpRate {
    /// Payload bit/s per stream.
    PerStream(f64),
    /// As fast as the sender can go; flagged in the record.
    Unpaced,
    /// RFC 2544's throughput: the highest offered rate whose loss stays at or below `max_loss`
    /// (a fraction), found by a bounded binary search of short trials (see [`udp_search`]).
    Search { max_loss: f64 },
}

/// Default loss threshold of the UDP capacity search: 0.1 %.
pub const DEFAULT_MAX_LOSS: f64 = 0.001;

/// Paced trials of one search at most, after the unpaced probe: each halves the interval, so
/// eight reach 0.4 % of the probe's rate.
const SEARCH_TRIALS: usize = 8;

/// One trial's length: a tenth of the sample duration, at least 100 ms, so a whole search
/// costs about what one fixed-rate sample did.
fn trial_ms(sample: Duration) -> u64 {
    (sample.as_millis() as u64 / 10).max(100)
}

/// The search stops once the passing and failing rates are this close (relative).
const SEARCH_RESOLUTION: f64 = 0.02;

/// Below this offered rate the search gives up: nothing usable passes.
const SEARCH_FLOOR_BPS: f64 = 1e6;

/// Everything `net client` / `net loopback` measure.
#[derive(Debug, Clone)]
pub struct NetConfig {
    pub target: Target,
    pub token: Option<Token>,
    pub protos: Vec<Proto>,
    pub directions: Vec<Direction>,
    /// TCP write sizes.
    pub tcp_blocks: Vec<u64>,
    /// UDP datagram sizes; `None` = the path MTU's largest unfragmented payload (≤ 32 KiB).
    pub udp_blocks: Option<Vec<u64>>,
    pub streams: Vec<u32>,
    pub udp_rate: UdpRate,
    /// Throughput section.
    pub throughput: bool,
    /// Latency section.
    pub latency: bool,
    /// Ping-pong message sizes.
    pub msg_sizes: Vec<u64>,
    /// Concurrent ping-pong pairs.
    pub pairs: Vec<u32>,
    /// Length of one sample (time-based tests).
    pub duration: Duration,
    /// Amount-based throughput: bytes per sample per direction.
    pub bytes: Option<u64>,
    /// Count-based ping-pong: round trips per pair per sample.
    pub count: Option<u64>,
    pub sockbuf: Option<u32>,
    /// Pin stream threads (client and in-process server).
    pub pin: bool,
    /// Which cases run iperf3 / sockperf beside them and fill `reference` (the headline: the
    /// first TCP throughput case and the first TCP ping-pong).
    pub reference: hostbench_core::subsystem::ReferenceScope,
    /// Against a remote target, the port of the `iperf3 -s` running there (sockperf's server on
    /// the next port); loopback starts its own.
    pub reference_port: Option<u16>,
    /// How long a busy server is asked again (doubling waits) before the client gives up.
    pub connect_timeout: Duration,
    /// Latency-under-load section.
    pub loaded: bool,
    /// Its offered loads, each a case.
    pub loads: Vec<Load>,
    /// Its protocols.
    pub loaded_protos: Vec<Proto>,
    /// One message in this many asks for a reply; `None`: enough for about 2000 timed round
    /// trips a second, and at most 1 in 100 (sockperf's default).
    pub reply_every: Option<u32>,
    /// Transactions section.
    pub transactions: bool,
    pub tx_modes: Vec<TxMode>,
    /// Requests in flight per pair (TCP request/response).
    pub outstanding: Vec<u32>,
}

impl Default for NetConfig {
    fn default() -> Self {
        // One stream per CPU up to 8 (more streams than cores measures the scheduler).
        let cpus = hostbench_core::affinity::allowed_cpus().len();
        let streams = hostbench_core::parallel::thread_sweep(cpus.min(8))
            .into_iter()
            .map(|s| s as u32)
            .collect();
        Self {
            target: Target::Loopback { v6: false },
            token: None,
            protos: vec![Proto::Tcp, Proto::Udp],
            directions: vec![Direction::Send],
            tcp_blocks: vec![DEFAULT_TCP_BLOCK],
            udp_blocks: None,
            streams,
            udp_rate: UdpRate::Search {
                max_loss: DEFAULT_MAX_LOSS,
            },
            throughput: true,
            latency: true,
            msg_sizes: vec![1],
            pairs: vec![1],
            duration: Duration::from_secs(2),
            bytes: None,
            count: None,
            sockbuf: None,
            pin: true,
            reference: hostbench_core::subsystem::ReferenceScope::Off,
            reference_port: None,
            connect_timeout: Duration::from_secs(10),
            loaded: true,
            loads: vec![Load::Share(0.1), Load::Share(0.5), Load::Share(0.9)],
            loaded_protos: vec![Proto::Udp],
            reply_every: None,
            transactions: true,
            tx_modes: vec![TxMode::Rr, TxMode::Crr],
            outstanding: vec![1],
        }
    }
}

impl NetConfig {
    /// The classic assignment's matrix: TCP and UDP × 1 KB and 32 KB × 1, 2, 4, 8 streams, and
    /// 1-byte ping-pong.
    pub fn classic(target: Target) -> Self {
        Self {
            target,
            tcp_blocks: vec![1000, 32_000],
            udp_blocks: Some(vec![1000, 32_000]),
            streams: vec![1, 2, 4, 8],
            ..Self::default()
        }
    }

    /// Range checks, each naming the flag.
    pub fn validate(&self) -> Result<(), BenchError> {
        let bad = |m: String| Err(BenchError::invalid(m));
        for &b in &self.tcp_blocks {
            if b == 0 || b > u64::from(wire::MAX_TCP_BLOCK) {
                return bad(format!(
                    "--block {b}: a TCP block must be 1 B..{}",
                    format_bytes_iec(u64::from(wire::MAX_TCP_BLOCK))
                ));
            }
        }
        if self.protos.contains(&Proto::Udp) && self.throughput {
            for &b in self.udp_blocks.iter().flatten() {
                if b > u64::from(wire::MAX_UDP_BLOCK) {
                    return bad(format!(
                        "--block {b}: a UDP datagram carries at most {} bytes",
                        wire::MAX_UDP_BLOCK
                    ));
                }
                if b < udp::HEADER_BYTES as u64 {
                    return bad(format!(
                        "--block {b}: UDP throughput datagrams need at least {} bytes (session tag, sequence number, timestamp)",
                        udp::HEADER_BYTES
                    ));
                }
            }
        }
        for &m in &self.msg_sizes {
            let max = if self.protos.contains(&Proto::Udp) {
                u64::from(wire::MAX_UDP_BLOCK)
            } else {
                u64::from(wire::MAX_TCP_BLOCK)
            };
            if m == 0 || m > max {
                return bad(format!("--msg-size {m}: must be 1..={max} bytes"));
            }
        }
        for (flag, list) in [("streams", &self.streams), ("pairs", &self.pairs)] {
            if let Some(&s) = list.iter().find(|&&s| s == 0 || s > wire::MAX_STREAMS) {
                return bad(format!("--{flag} {s}: must be 1..={}", wire::MAX_STREAMS));
            }
        }
        if let UdpRate::PerStream(r) = self.udp_rate {
            if !(1000.0..=4e11).contains(&r) {
                return bad(format!(
                    "--rate {r}: must be 1 kbit/s..400 Gbit/s (or 0 for unpaced)"
                ));
            }
        }
        if let UdpRate::Search { max_loss } = self.udp_rate {
            if !(max_loss > 0.0 && max_loss < 1.0) {
                return bad(format!(
                    "--max-loss {}%: must be above 0 % and below 100 %",
                    max_loss * 100.0
                ));
            }
        }
        under_load::validate(self)?;
        transactions::validate(self)?;
        if self.duration.is_zero() || self.duration > wire::MAX_TEST {
            return bad("--duration: must be above zero and at most an hour".into());
        }
        if let Some(b) = self.sockbuf {
            if !(4096..=(512 << 20)).contains(&b) {
                return bad(format!("--sockbuf {b}: must be 4 KiB..512 MiB"));
            }
        }
        if self.reference != hostbench_core::subsystem::ReferenceScope::Off {
            match (&self.target, self.reference_port) {
                (Target::Loopback { v6: true }, _) => {
                    return bad("--reference starts iperf3 and sockperf on 127.0.0.1: use `net loopback` without --ipv6".into());
                }
                (Target::Remote { host, .. }, None) => {
                    return bad(format!(
                        "--reference against {host} needs --reference-port P: the port of `iperf3 -s -p P` running there (and `sockperf sr -p P+1` for ping-pong)"
                    ));
                }
                (Target::Remote { .. }, Some(p)) if reference::sockperf_port(p).is_none() => {
                    return bad(format!(
                        "--reference-port {p}: sockperf's server is on the next port, past 65535"
                    ));
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// Pin the calling data thread to the `i`-th CPU of `order` (best effort: placement is a hint,
/// not a requirement; an empty order leaves the thread to the scheduler).
pub(crate) fn pin(order: &[usize], i: usize) {
    if !order.is_empty() {
        let _ = hostbench_core::affinity::pin_current_thread(
            hostbench_core::affinity::cpu_for_thread(order, i),
        );
    }
}

/// Resolve `host` with `port`; an unresolvable name is the user's input error.
pub fn resolve(host: &str, port: u16) -> Result<SocketAddr, BenchError> {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    (bare, port)
        .to_socket_addrs()
        .map_err(|e| BenchError::invalid(format!("cannot resolve host '{host}': {e}")))?
        .next()
        .ok_or_else(|| BenchError::invalid(format!("host '{host}' has no address")))
}

/// Split `HOST[:PORT]` (IPv6 literals as `[::1]:5201` or bare `::1`).
pub fn split_host_port(text: &str, default_port: u16) -> Result<(String, u16), BenchError> {
    let t = text.trim();
    if t.is_empty() {
        return Err(BenchError::invalid("empty host"));
    }
    let bad_port = |p: &str| BenchError::invalid(format!("'{t}': bad port '{p}'"));
    if let Some(rest) = t.strip_prefix('[') {
        let (h, tail) = rest
            .split_once(']')
            .ok_or_else(|| BenchError::invalid(format!("'{t}': missing ']'")))?;
        let port = match tail.strip_prefix(':') {
            Some(p) => p.parse().map_err(|_| bad_port(p))?,
            None if tail.is_empty() => default_port,
            None => return Err(BenchError::invalid(format!("'{t}': junk after ']'"))),
        };
        return Ok((h.to_string(), port));
    }
    match t.rsplit_once(':') {
        // More than one colon and no brackets: a bare IPv6 address.
        Some((h, _)) if h.contains(':') => Ok((t.to_string(), default_port)),
        Some((h, p)) => Ok((h.to_string(), p.parse().map_err(|_| bad_port(p))?)),
        None => Ok((t.to_string(), default_port)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_port_forms() {
        assert_eq!(split_host_port("h", 5201).expect("h"), ("h".into(), 5201));
        assert_eq!(split_host_port("h:7", 5201).expect("h"), ("h".into(), 7));
        assert_eq!(
            split_host_port("[::1]:9", 5201).expect("v6"),
            ("::1".into(), 9)
        );
        assert_eq!(
            split_host_port("[::1]", 5201).expect("v6"),
            ("::1".into(), 5201)
        );
        assert_eq!(
            split_host_port("fe80::1", 5201).expect("v6"),
            ("fe80::1".into(), 5201)
        );
        assert!(split_host_port("h:x", 1).is_err());
        assert!(split_host_port("[::1", 1).is_err());
        assert!(split_host_port("", 1).is_err());
    }

    #[test]
    fn bad_configs_name_the_flag() {
        let ok = NetConfig::default();
        assert!(ok.validate().is_ok());
        let cases = [
            (
                NetConfig {
                    tcp_blocks: vec![0],
                    ..ok.clone()
                },
                "--block",
            ),
            (
                NetConfig {
                    udp_blocks: Some(vec![65_508]),
                    ..ok.clone()
                },
                "--block",
            ),
            (
                NetConfig {
                    udp_blocks: Some(vec![0]),
                    ..ok.clone()
                },
                "--block",
            ),
            (
                NetConfig {
                    streams: vec![0],
                    ..ok.clone()
                },
                "--streams",
            ),
            (
                NetConfig {
                    pairs: vec![200],
                    ..ok.clone()
                },
                "--pairs",
            ),
            (
                NetConfig {
                    msg_sizes: vec![0],
                    ..ok.clone()
                },
                "--msg-size",
            ),
            (
                NetConfig {
                    udp_rate: UdpRate::PerStream(1.0),
                    ..ok.clone()
                },
                "--rate",
            ),
        ];
        for (c, flag) in cases {
            let e = c.validate().expect_err(flag).to_string();
            assert!(e.contains(flag), "{e}");
        }
    }

    #[test]
    fn unresolvable_hosts_are_input_errors() {
        let e = resolve("no-such-host.invalid", 5201).expect_err("invalid TLD");
        assert!(matches!(e, BenchError::InvalidInput(_)), "{e:?}");
    }
}

//! The client side of a session: connect, authenticate both ways, run tests.
//!
//! One control connection carries every test of a `hostbench net client` run; each test opens
//! its own data connections (TCP, joined by the session cookie) or UDP sockets (joined by a
//! handshake datagram carrying the session tag), so one test's leftovers cannot leak into the
//! next one's counts.

use std::io;
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use hostbench_core::histogram::LatencyHist;

use crate::auth::{self, Token};
use crate::pin;
use crate::server::session_tag;
use crate::stream::Stop;
use crate::tcp;
use crate::udp;
use crate::wire::{
    self, Msg, Proto, ProtoError, Report, SentReport, StreamReport, TestKind, TestSpec,
};

/// Why a session or a test did not work.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// Could not reach or agree with the peer: the user's target is wrong (exit 2).
    #[error("{0}")]
    Peer(String),
    /// The session broke mid-test (the case fails; a new session may work).
    #[error("{0}")]
    Session(String),
    /// The test ran but failed on the data path or was refused by the server.
    #[error("{0}")]
    Test(String),
    /// Sender and receiver disagree: the measurement cannot be trusted.
    #[error("{0}")]
    Validation(String),
    /// The server turned the connection away for now (busy, or dropping connections during the
    /// handshake): worth retrying within the connect timeout.
    #[error("{0}")]
    Busy(String),
    /// Nothing listens at the server's address (connection refused): at the first connect the
    /// target is wrong; after a session broke, the server is gone (see `peer`).
    #[error("{0}")]
    Refused(String),
}

impl From<ProtoError> for ClientError {
    fn from(e: ProtoError) -> Self {
        ClientError::Session(format!("control connection: {e}"))
    }
}

/// A connected, authenticated session.
pub struct Client {
    ctl: TcpStream,
    server: SocketAddr,
    cookie: String,
    tag: u64,
    /// Pin data threads to these CPUs (empty: leave them to the scheduler).
    pub order: Vec<usize>,
    /// Silence on a data stream after which a test fails.
    pub data_timeout: Duration,
}

/// What one direction of a throughput test delivered, as its receiver counted it.
#[derive(Debug, Clone, Default)]
pub struct Flow {
    pub received: Vec<StreamReport>,
    pub sent: Vec<SentReport>,
}

impl Flow {
    /// Receiver goodput over all streams, bit/s: bytes after each stream's first read, over the
    /// span from the earliest first read to the latest last read (the first read's bytes
    /// arrived before the clock started, so they are left out).
    pub fn goodput_bps(&self) -> f64 {
        let first = self.received.iter().map(|r| r.first_ns).min().unwrap_or(0);
        let last = self.received.iter().map(|r| r.last_ns).max().unwrap_or(0);
        let bytes: u64 = self
            .received
            .iter()
            .map(|r| r.bytes.saturating_sub(r.first_chunk))
            .sum();
        if last <= first {
            return 0.0;
        }
        bytes as f64 * 8.0 / ((last - first) as f64 / 1e9)
    }

    pub fn bytes_received(&self) -> u64 {
        self.received.iter().map(|r| r.bytes).sum()
    }
    pub fn bytes_sent(&self) -> u64 {
        self.sent.iter().map(|s| s.bytes).sum()
    }
    pub fn datagrams_sent(&self) -> u64 {
        self.sent.iter().map(|s| s.datagrams).sum()
    }
    pub fn datagrams_received(&self) -> u64 {
        self.received.iter().map(|r| r.datagrams).sum()
    }
    /// Datagrams sent and never received (UDP).
    pub fn lost(&self) -> u64 {
        self.datagrams_sent()
            .saturating_sub(self.datagrams_received())
    }
    /// Mean RFC 3550 jitter over the streams, seconds.
    pub fn jitter_s(&self) -> f64 {
        let n = self.received.len().max(1) as f64;
        self.received.iter().map(|r| r.jitter_s).sum::<f64>() / n
    }
    fn sum(&self, f: impl Fn(&StreamReport) -> u64) -> u64 {
        self.received.iter().map(f).sum()
    }
    pub fn out_of_order(&self) -> u64 {
        self.sum(|r| r.out_of_order)
    }
    pub fn duplicates(&self) -> u64 {
        self.sum(|r| r.duplicates)
    }
    pub fn gaps(&self) -> u64 {
        self.sum(|r| r.gaps)
    }
}

/// A finished test.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Client → server, counted by the server.
    pub upstream: Option<Flow>,
    /// Server → client, counted by the client.
    pub downstream: Option<Flow>,
    /// Ping-pong round trips over all pairs.
    pub rtt: Option<LatencyHist>,
    /// The server's kernel counter deltas over the test (its own namespace).
    pub server_kernel: std::collections::BTreeMap<String, u64>,
    pub rounds: u64,
    pub lost_rounds: u64,
    /// Wall time of the ping-pong phase.
    pub seconds: f64,
    /// Under load: the round trips and the schedule kept, over every stream (the load stream
    /// itself, as the server counted it, is `upstream`).
    pub load: Option<crate::loaded::LoadReport>,
    /// Connect-request-response: TCP sockets in TIME_WAIT in the server's namespace at the end.
    pub server_time_wait: Option<u64>,
}

impl Outcome {
    /// The directions that ran, each as its receiver counted it.
    pub fn flows(&self) -> impl Iterator<Item = &Flow> {
        [&self.upstream, &self.downstream].into_iter().flatten()
    }
    /// Datagrams sent over every direction (UDP).
    pub fn datagrams_sent(&self) -> u64 {
        self.flows().map(Flow::datagrams_sent).sum()
    }
    /// Datagrams sent and never received over every direction (UDP).
    pub fn lost(&self) -> u64 {
        self.flows().map(Flow::lost).sum()
    }
    /// Lost over sent datagrams.
    pub fn lost_fraction(&self) -> f64 {
        self.lost() as f64 / self.datagrams_sent().max(1) as f64
    }
    /// Mean RFC 3550 jitter over the directions, seconds.
    pub fn jitter_s(&self) -> f64 {
        let n = self.flows().count().max(1) as f64;
        self.flows().map(Flow::jitter_s).sum::<f64>() / n
    }
}

/// The error for a handshake reply that is not the one expected: the server's own refusal
/// reason when it refused, else what it sent instead.
fn unexpected(server: SocketAddr, expected: &str, reply: Msg) -> ClientError {
    if let Msg::Refused { reason, busy: true } = &reply {
        return ClientError::Busy(format!("{server} is busy: {reason}"));
    }
    ClientError::Peer(match reply {
        Msg::Refused { reason, .. } => format!("{server} refused: {reason}"),
        other => format!(
            "{server}: handshake failed: expected {expected}, got {}",
            other.name()
        ),
    })
}

/// A server shedding a flood may close a connection before its first answer, without a word:
/// that, like a "busy" refusal, is worth another try, unlike a wrong answer.
fn shed(server: SocketAddr, e: ProtoError) -> Result<ClientError, ProtoError> {
    use std::io::ErrorKind as K;
    let gone = match &e {
        ProtoError::Closed => true,
        ProtoError::Io(io) => matches!(
            io.kind(),
            K::ConnectionReset | K::ConnectionAborted | K::BrokenPipe | K::UnexpectedEof
        ),
        _ => false,
    };
    if gone {
        Ok(ClientError::Busy(format!(
            "{server} closed the connection before answering ({e}): busy or dropping connections"
        )))
    } else {
        Err(e)
    }
}

impl Client {
    /// Connect and authenticate. With a token the server must prove it holds the same one.
    pub fn connect(
        server: SocketAddr,
        token: Option<&Token>,
        timeout: Duration,
    ) -> Result<Self, ClientError> {
        let peer = |m: String| ClientError::Peer(m);
        let mut ctl = TcpStream::connect_timeout(&server, timeout).map_err(|e| {
            let m = format!("cannot connect to {server}: {e}");
            if e.kind() == io::ErrorKind::ConnectionRefused {
                ClientError::Refused(m)
            } else {
                peer(m)
            }
        })?;
        ctl.set_nodelay(true)
            .map_err(|e| peer(format!("{server}: {e}")))?;
        let handshake = |e: ProtoError| peer(format!("{server}: handshake failed: {e}"));
        let client_nonce = auth::random_bytes().map_err(|e| peer(e.to_string()))?;
        wire::write_msg(
            &mut ctl,
            &Msg::Hello {
                client_nonce: auth::hex(&client_nonce),
                software: format!("hostbench {}", env!("CARGO_PKG_VERSION")),
            },
        )
        .map_err(|e| shed(server, e).unwrap_or_else(handshake))?;
        let reply = wire::read_msg(&mut ctl, timeout, "the server's challenge")
            .map_err(|e| shed(server, e).unwrap_or_else(handshake))?;
        let (server_nonce, required) = match reply {
            Msg::Challenge {
                server_nonce,
                auth_required,
            } => (server_nonce, auth_required),
            other => return Err(unexpected(server, "challenge", other)),
        };
        let sn = auth::unhex(&server_nonce)
            .filter(|n| n.len() == auth::NONCE_BYTES)
            .ok_or_else(|| peer(format!("{server}: malformed server nonce")))?;
        let mac = match (required, token) {
            (true, None) => {
                return Err(peer(format!(
                    "{server} requires a token: pass the server's --token-file"
                )))
            }
            (_, Some(t)) => t.client_mac(&sn, &client_nonce),
            (false, None) => String::new(),
        };
        wire::write_msg(&mut ctl, &Msg::Auth { mac }).map_err(handshake)?;
        let reply = wire::read_msg(&mut ctl, timeout, "the server's welcome").map_err(handshake)?;
        let (cookie, server_mac) = match reply {
            Msg::Welcome { cookie, server_mac } => (cookie, server_mac),
            other => return Err(unexpected(server, "welcome", other)),
        };
        let cookie_bytes = auth::unhex(&cookie)
            .filter(|c| c.len() == auth::NONCE_BYTES)
            .ok_or_else(|| peer(format!("{server}: malformed session cookie")))?;
        if let Some(t) = token {
            if required && !t.verify_server(&client_nonce, &sn, &cookie_bytes, &server_mac) {
                return Err(peer(format!(
                    "{server} could not prove it holds the token: not the server you meant"
                )));
            }
            if !required {
                // Our token proves nothing about a server that asked for none; say so once.
                eprintln!(
                    "warning: {server} does not require a token (started without --token-file)"
                );
            }
        }
        Ok(Self {
            tag: session_tag(&cookie_bytes),
            ctl,
            server,
            cookie,
            order: Vec::new(),
            data_timeout: Duration::from_secs(10),
        })
    }

    pub fn server(&self) -> SocketAddr {
        self.server
    }

    /// End the session politely.
    pub fn close(mut self) {
        let _ = wire::write_msg(&mut self.ctl, &Msg::Bye {});
    }

    fn ready(&mut self, within: Duration) -> Result<(Vec<u16>, Option<u16>), ClientError> {
        reply(&mut self.ctl, within, "ready", |m| match m {
            Msg::Ready {
                udp_ports,
                tcp_port,
            } => Ok((udp_ports, tcp_port)),
            other => Err(other),
        })
    }

    fn go(&mut self, within: Duration) -> Result<(), ClientError> {
        reply(&mut self.ctl, within, "go", |m| match m {
            Msg::Go {} => Ok(()),
            other => Err(other),
        })
    }

    /// Run one test to completion.
    pub fn run(&mut self, spec: &TestSpec) -> Result<Outcome, ClientError> {
        spec.validate().map_err(ClientError::Test)?;
        wire::write_msg(&mut self.ctl, &Msg::Test { spec: spec.clone() })?;
        let (ports, tcp_port) = self.ready(Duration::from_secs(10))?;
        match (spec.proto, spec.kind) {
            (Proto::Tcp, TestKind::Crr) => self.run_crr(spec, tcp_port),
            (Proto::Tcp, _) => self.run_tcp(spec),
            (Proto::Udp, _) => self.run_udp(spec, &ports),
        }
    }

    /// Connect-request-response: each pair's thread opens a connection per transaction to the
    /// port the server opened for the test.
    fn run_crr(&mut self, spec: &TestSpec, port: Option<u16>) -> Result<Outcome, ClientError> {
        let port = port.ok_or_else(|| {
            ClientError::Session("the server named no port for the connections".into())
        })?;
        let mut addr = self.server;
        addr.set_port(port);
        self.go(Duration::from_secs(10))?;
        let (tag, block, order, idle) = (
            self.tag,
            spec.block as usize,
            &self.order,
            self.data_timeout,
        );
        let t0 = Instant::now();
        let results: Vec<io::Result<(u64, LatencyHist)>> = std::thread::scope(|sc| {
            let handles: Vec<_> = (0..spec.streams)
                .map(|i| {
                    let stop = spec.stop(i);
                    sc.spawn(move || {
                        pin(order, i as usize);
                        let mut h = LatencyHist::new();
                        crate::crr::client(addr, tag, block, stop, idle, &mut h).map(|n| (n, h))
                    })
                })
                .collect();
            handles.into_iter().map(join).collect()
        });
        let secs = t0.elapsed().as_secs_f64();
        wire::write_msg(&mut self.ctl, &Msg::SenderDone { sent: vec![] })?;
        let report = read_report(&mut self.ctl, spec.end_within());
        let results = results
            .into_iter()
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| ClientError::Test(format!("transactions: {e}")))?;
        let mut report = report?;
        let mut out = Outcome {
            server_kernel: std::mem::take(&mut report.kernel),
            server_time_wait: report.time_wait,
            seconds: secs,
            ..Outcome::default()
        };
        let mut h = LatencyHist::new();
        for (n, hist) in &results {
            out.rounds += n;
            h.merge(hist);
        }
        let served: u64 = report.echoed.iter().sum();
        if served != out.rounds {
            return Err(ClientError::Validation(format!(
                "the server answered {served} connections, the client completed {} transactions",
                out.rounds
            )));
        }
        out.rtt = Some(h);
        Ok(out)
    }

    fn open_data(&self, index: u32, spec: &TestSpec) -> Result<TcpStream, ClientError> {
        let mut s = TcpStream::connect_timeout(&self.server, Duration::from_secs(5))
            .map_err(|e| ClientError::Test(format!("data connection to {}: {e}", self.server)))?;
        let _ = s.set_nodelay(true);
        if let Some(b) = spec.sockbuf {
            let r = socket2::SockRef::from(&s);
            let _ = r.set_send_buffer_size(b as usize);
            let _ = r.set_recv_buffer_size(b as usize);
        }
        wire::write_msg(
            &mut s,
            &Msg::Data {
                cookie: self.cookie.clone(),
                stream: index,
            },
        )
        .map_err(|e| ClientError::Test(format!("data connection: {e}")))?;
        let _ = s.set_write_timeout(Some(self.data_timeout));
        Ok(s)
    }

    fn run_tcp(&mut self, spec: &TestSpec) -> Result<Outcome, ClientError> {
        let (up, down) = spec.stream_counts();
        let socks = (0..up + down)
            .map(|i| self.open_data(i, spec))
            .collect::<Result<Vec<_>, _>>()?;
        self.go(Duration::from_secs(10))?;
        let (ups, downs) = socks.split_at(up as usize);
        let block = spec.block as usize;
        let (order, idle) = (&self.order, self.data_timeout);
        let t0 = Instant::now();
        let kind = spec.kind;
        let outstanding = spec.outstanding.unwrap_or(1) as usize;
        let (tag, rate, every) = (
            self.tag,
            spec.rate_bps.unwrap_or(1e6),
            spec.reply_every.unwrap_or(1),
        );
        let mut out = Outcome::default();
        let (sent, received, pings) = std::thread::scope(|sc| {
            let senders: Vec<_> = ups
                .iter()
                .enumerate()
                .map(|(i, s)| {
                    let stop = spec.stop(i as u32);
                    sc.spawn(move || {
                        pin(order, i);
                        match kind {
                            TestKind::Throughput => {
                                tcp::send(s, block, stop).map(|r| (r, Done::Sent))
                            }
                            TestKind::PingPong | TestKind::Crr => {
                                let mut h = LatencyHist::new();
                                tcp::ping_pong(s, block, outstanding, stop, idle, &mut h).map(
                                    |rounds| {
                                        (
                                            SentReport {
                                                bytes: rounds,
                                                datagrams: 0,
                                            },
                                            Done::Rtt(h),
                                        )
                                    },
                                )
                            }
                            TestKind::UnderLoad => {
                                let until = stop_time(stop);
                                crate::loaded::drive(
                                    crate::loaded::Conn::Tcp(s),
                                    tag,
                                    block,
                                    rate,
                                    every,
                                    until,
                                    idle,
                                )
                                .map(|r| (r.sent_report(), Done::Load(Box::new(r))))
                            }
                        }
                    })
                })
                .collect();
            let receivers: Vec<_> = downs
                .iter()
                .enumerate()
                .map(|(i, s)| {
                    sc.spawn(move || {
                        // Downstream receivers sit beside the senders' CPUs in bidir tests.
                        pin(order, i + up as usize);
                        tcp::receive(s, block, t0, idle)
                    })
                })
                .collect();
            let sent: Vec<_> = senders.into_iter().map(join).collect();
            let received: Vec<_> = receivers.into_iter().map(join).collect();
            let pp_secs = t0.elapsed().as_secs_f64();
            (sent, received, pp_secs)
        });
        let sent = sent.into_iter().collect::<Result<Vec<_>, _>>();
        let received = received.into_iter().collect::<Result<Vec<_>, _>>();
        // The server's report comes even when our side failed; read it so the session stays in
        // step, then report our own failure first.
        let report = read_report(&mut self.ctl, spec.end_within());
        let sent = sent.map_err(|e| ClientError::Test(format!("sending: {e}")))?;
        let received = received.map_err(|e| ClientError::Test(format!("receiving: {e}")))?;
        let mut report = report?;
        out.server_kernel = std::mem::take(&mut report.kernel);
        match kind {
            TestKind::UnderLoad => {
                let flow = Flow {
                    received: report.received,
                    sent: sent.iter().map(|(s, _)| *s).collect(),
                };
                if flow.datagrams_received() != flow.datagrams_sent() {
                    return Err(ClientError::Validation(format!(
                        "the server read {} messages, the client sent {}",
                        flow.datagrams_received(),
                        flow.datagrams_sent()
                    )));
                }
                let load = merge_loads(sent.into_iter().map(|(_, d)| d));
                let replied: u64 = report.echoed.iter().sum();
                if replied != load.replies {
                    return Err(ClientError::Validation(format!(
                        "the server wrote {replied} replies, the client read {}",
                        load.replies
                    )));
                }
                out.upstream = Some(flow);
                out.load = Some(load);
            }
            TestKind::PingPong | TestKind::Crr => {
                let mut h = LatencyHist::new();
                for (s, done) in &sent {
                    out.rounds += s.bytes;
                    if let Done::Rtt(hist) = done {
                        h.merge(hist);
                    }
                }
                let echoed: u64 = report.echoed.iter().sum();
                if echoed != out.rounds {
                    return Err(ClientError::Validation(format!(
                        "the server echoed {echoed} messages, the client completed {} round trips",
                        out.rounds
                    )));
                }
                out.rtt = Some(h);
                out.seconds = pings;
            }
            TestKind::Throughput => {
                if up > 0 {
                    let flow = Flow {
                        received: report.received,
                        sent: sent.into_iter().map(|(s, _)| s).collect(),
                    };
                    check_tcp_totals(&flow, "client → server")?;
                    out.upstream = Some(flow);
                }
                if down > 0 {
                    let flow = Flow {
                        received,
                        sent: report.sent,
                    };
                    check_tcp_totals(&flow, "server → client")?;
                    out.downstream = Some(flow);
                }
            }
        }
        Ok(out)
    }

    fn run_udp(&mut self, spec: &TestSpec, ports: &[u16]) -> Result<Outcome, ClientError> {
        let (up, down) = spec.stream_counts();
        let (up, down) = (up as usize, down as usize);
        if ports.len() != up + down {
            return Err(ClientError::Session(format!(
                "server offered {} UDP ports for {} streams",
                ports.len(),
                up + down
            )));
        }
        let bind_ip: SocketAddr = match self.server {
            SocketAddr::V4(_) => SocketAddr::from(([0, 0, 0, 0], 0)),
            SocketAddr::V6(_) => SocketAddr::from(([0u16; 8], 0)),
        };
        let buf = spec
            .sockbuf
            .map(|b| b as usize)
            .unwrap_or(udp::DEFAULT_RCVBUF);
        let mut socks: Vec<UdpSocket> = Vec::with_capacity(ports.len());
        for &p in ports {
            let (s, _) = udp::bind(bind_ip, buf)
                .map_err(|e| ClientError::Test(format!("UDP socket: {e}")))?;
            let mut to = self.server;
            to.set_port(p);
            udp::hello(&s, to, self.tag, Duration::from_secs(5))
                .map_err(|e| ClientError::Test(format!("UDP handshake: {e}")))?;
            socks.push(s);
        }
        self.go(Duration::from_secs(10))?;
        let (ups, downs) = socks.split_at(up);
        let (tag, block, rate) = (self.tag, spec.block as usize, spec.rate_bps);
        let every = spec.reply_every.unwrap_or(1);
        let (order, wait) = (&self.order, Duration::from_millis(500));
        let t0 = Instant::now();
        let done = AtomicBool::new(false);
        let kind = spec.kind;
        let mut out = Outcome::default();
        let ctl = &mut self.ctl;
        let res = std::thread::scope(|sc| -> Result<_, ClientError> {
            let done = &done;
            let receivers: Vec<_> = downs
                .iter()
                .enumerate()
                .map(|(i, s)| {
                    sc.spawn(move || {
                        pin(order, i + up);
                        udp::receive(s, tag, block, t0, done, udp::DRAIN, Duration::from_secs(10))
                    })
                })
                .collect();
            let senders: Vec<_> =
                ups.iter()
                    .enumerate()
                    .map(|(i, s)| {
                        let stop = spec.stop(i as u32);
                        sc.spawn(move || {
                            pin(order, i);
                            match kind {
                                TestKind::Throughput => udp::send(s, tag, block, rate, stop, t0)
                                    .map(|r| (r, Done::Sent, 0)),
                                TestKind::PingPong | TestKind::Crr => {
                                    let mut h = LatencyHist::new();
                                    udp::ping_pong(s, block, stop, wait, &mut h).map(
                                        |(rounds, lost)| {
                                            (
                                                SentReport {
                                                    bytes: rounds,
                                                    datagrams: 0,
                                                },
                                                Done::Rtt(h),
                                                lost,
                                            )
                                        },
                                    )
                                }
                                TestKind::UnderLoad => crate::loaded::drive(
                                    crate::loaded::Conn::Udp(s),
                                    tag,
                                    block,
                                    rate.unwrap_or(1e6),
                                    every,
                                    stop_time(stop),
                                    Duration::from_millis(500),
                                )
                                .map(|r| (r.sent_report(), Done::Load(Box::new(r)), 0)),
                            }
                        })
                    })
                    .collect();
            let sent: Vec<_> = senders.into_iter().map(join).collect();
            let secs = t0.elapsed().as_secs_f64();
            let sent_reports: Vec<SentReport> = sent
                .iter()
                .map(|r| r.as_ref().map(|x| x.0).unwrap_or_default())
                .collect();
            if up > 0 {
                wire::write_msg(ctl, &Msg::SenderDone { sent: sent_reports })?;
            }
            let report = read_report(ctl, spec.end_within());
            done.store(true, Ordering::Release);
            let received: Vec<_> = receivers.into_iter().map(join).collect();
            Ok((sent, received, report, secs))
        })?;
        let (sent, received, report, secs) = res;
        let sent = sent
            .into_iter()
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| ClientError::Test(format!("sending: {e}")))?;
        let received = received
            .into_iter()
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| ClientError::Test(format!("receiving: {e}")))?;
        let mut report = report?;
        out.server_kernel = std::mem::take(&mut report.kernel);
        match kind {
            TestKind::UnderLoad => {
                let flow = Flow {
                    received: report.received,
                    sent: sent.iter().map(|(s, _, _)| *s).collect(),
                };
                let load = merge_loads(sent.into_iter().map(|(_, d, _)| d));
                let replied: u64 = report.echoed.iter().sum();
                if flow.datagrams_received() > flow.datagrams_sent() || load.replies > replied {
                    return Err(ClientError::Validation(format!(
                        "the server counted {} messages and sent {replied} replies; the client \
                         sent {} and read {} replies",
                        flow.datagrams_received(),
                        flow.datagrams_sent(),
                        load.replies
                    )));
                }
                out.upstream = Some(flow);
                out.load = Some(load);
            }
            TestKind::PingPong | TestKind::Crr => {
                let mut h = LatencyHist::new();
                for (s, done, lost) in &sent {
                    out.rounds += s.bytes;
                    out.lost_rounds += lost;
                    if let Done::Rtt(hist) = done {
                        h.merge(hist);
                    }
                }
                out.rtt = Some(h);
                out.seconds = secs;
            }
            TestKind::Throughput => {
                if up > 0 {
                    out.upstream = Some(Flow {
                        received: report.received,
                        sent: sent.into_iter().map(|(s, _, _)| s).collect(),
                    });
                }
                if down > 0 {
                    out.downstream = Some(Flow {
                        received,
                        sent: report.sent,
                    });
                }
                for f in [&out.upstream, &out.downstream].into_iter().flatten() {
                    if f.datagrams_received() > f.datagrams_sent() {
                        return Err(ClientError::Validation(format!(
                            "received {} datagrams but only {} were sent",
                            f.datagrams_received(),
                            f.datagrams_sent()
                        )));
                    }
                }
            }
        }
        Ok(out)
    }
}

/// What a client data thread brings back beside its send count.
enum Done {
    Sent,
    Rtt(LatencyHist),
    Load(Box<crate::loaded::LoadReport>),
}

/// The reports of every stream under load, merged.
fn merge_loads(done: impl Iterator<Item = Done>) -> crate::loaded::LoadReport {
    let mut all = crate::loaded::LoadReport::default();
    for d in done {
        if let Done::Load(r) = d {
            all.merge(&r);
        }
    }
    all
}

/// A test under load always runs for a duration (`TestSpec::validate`).
fn stop_time(stop: Stop) -> Instant {
    match stop {
        Stop::At(t) => t,
        Stop::Bytes(_) | Stop::Count(_) => Instant::now(),
    }
}

fn join<T>(h: std::thread::ScopedJoinHandle<'_, io::Result<T>>) -> io::Result<T> {
    h.join()
        .unwrap_or_else(|_| Err(io::Error::other("a data thread panicked")))
}

/// Read the next control message, which must be `what` (picked by `pick`) or a failure.
fn reply<T>(
    ctl: &mut TcpStream,
    within: Duration,
    what: &'static str,
    pick: impl FnOnce(Msg) -> Result<T, Msg>,
) -> Result<T, ClientError> {
    match pick(wire::read_msg(ctl, within, what)?) {
        Ok(v) => Ok(v),
        Err(Msg::Failed { reason }) => Err(ClientError::Test(format!("server: {reason}"))),
        Err(other) => Err(ProtoError::Unexpected {
            expected: what,
            got: other.name().into(),
        }
        .into()),
    }
}

fn read_report(ctl: &mut TcpStream, within: Duration) -> Result<Report, ClientError> {
    reply(ctl, within, "report", |m| match m {
        Msg::Report { report } => Ok(report),
        other => Err(other),
    })
}

/// TCP is reliable and the test ends on the data path, so the receiver must have counted
/// exactly what the sender wrote.
fn check_tcp_totals(flow: &Flow, dir: &str) -> Result<(), ClientError> {
    let (s, r) = (flow.bytes_sent(), flow.bytes_received());
    if s != r {
        return Err(ClientError::Validation(format!(
            "{dir}: {s} bytes sent but {r} received"
        )));
    }
    Ok(())
}

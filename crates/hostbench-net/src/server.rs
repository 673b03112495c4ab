//! `hostbench net server`: accepts control sessions, authenticates them, admits a bounded number,
//! and runs each test's server side.
//!
//! Every connection starts with one frame read under a short deadline: `Hello` opens a control
//! session, `Data` joins a data stream to an admitted session by its cookie, anything else is
//! dropped. Connections still in their handshake are capped ([`MAX_PENDING`]), so a flood of idle
//! sockets cannot exhaust threads, and so is each source address's share of them
//! ([`MAX_PENDING_PER_ADDR`]): a port scanner or a stuck client holding hundreds of idle
//! connections takes a few handshake slots, never all of them, and a client from any other
//! address is served at once. A connection over either cap is answered `Refused { busy }` with
//! the reason (not silently reset), which the client retries with backoff within its connect
//! timeout. Admitted sessions are capped by `max_sessions` and a client beyond that gets
//! `Refused { busy }` too. A session ends when its client says `Bye`, closes, or
//! stays silent past the idle timeout, and its slot is freed by a guard whatever the reason.
//! Malformed input ends only the connection that sent it.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv6Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use hostbench_core::BenchError;

use crate::auth::{self, Token};
use crate::pin;
use crate::tcp;
use crate::udp;
use crate::wire::{
    self, Deadlined, Msg, Proto, ProtoError, Report, SentReport, StreamReport, TestKind, TestSpec,
};

/// Connections allowed in their handshake at once.
pub const MAX_PENDING: usize = 64;

/// Connections one source address may have in their handshake at once: the rest of
/// [`MAX_PENDING`] stays free for every other address.
pub const MAX_PENDING_PER_ADDR: usize = 8;

/// Refusals being written at once; beyond this a flood's connections are simply closed.
const MAX_REFUSING: usize = 256;

/// How the server runs.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub bind: SocketAddr,
    pub token: Option<Token>,
    pub max_sessions: usize,
    /// Stop after the first session ends (iperf3's `-1`).
    pub once: bool,
    /// Deadline for a connection's first frame and for the authentication reply.
    pub handshake_timeout: Duration,
    /// Deadline for the next request of an idle session.
    pub idle_timeout: Duration,
    /// Deadline for silence on a data stream during a test.
    pub data_timeout: Duration,
    /// Pin data threads (stream i on the i-th CPU of the placement order).
    pub order: Vec<usize>,
    /// Log sessions to stderr.
    pub log: bool,
}

impl ServerConfig {
    pub fn new(bind: SocketAddr) -> Self {
        Self {
            bind,
            token: None,
            max_sessions: 1,
            once: false,
            handshake_timeout: Duration::from_secs(5),
            idle_timeout: Duration::from_secs(120),
            data_timeout: Duration::from_secs(10),
            order: Vec::new(),
            log: false,
        }
    }
}

type DataConn = (u32, TcpStream);

struct Shared {
    cfg: ServerConfig,
    sessions: Mutex<HashMap<String, Sender<DataConn>>>,
    pending: AtomicUsize,
    /// Connections in their handshake per source address.
    pending_by_addr: Mutex<HashMap<IpAddr, usize>>,
    /// Refusal threads alive.
    refusing: AtomicUsize,
    stop: AtomicBool,
    local: SocketAddr,
}

/// A bound, not yet serving server.
pub struct Server {
    listener: TcpListener,
    shared: Arc<Shared>,
}

/// A server serving on its own thread (the loopback mode and tests); dropped = stopped.
pub struct ServerHandle {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl ServerHandle {
    pub fn local_addr(&self) -> SocketAddr {
        self.shared.local
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        wake(self.shared.local);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Unblock `accept` by connecting to ourselves.
fn wake(local: SocketAddr) {
    let mut addr = local;
    if addr.ip().is_unspecified() {
        addr.set_ip(match addr {
            SocketAddr::V4(_) => IpAddr::from([127, 0, 0, 1]),
            SocketAddr::V6(_) => IpAddr::V6(Ipv6Addr::LOCALHOST),
        });
    }
    let _ = TcpStream::connect_timeout(&addr, Duration::from_millis(200));
}

impl Server {
    /// Bind the control port. A port in use or an address not on this host is the user's input
    /// error, named in one line.
    pub fn bind(cfg: ServerConfig) -> Result<Self, BenchError> {
        let addr = cfg.bind;
        let listener = listen(addr)
            .map_err(|e| BenchError::invalid(format!("cannot listen on {addr}: {e}")))?;
        let local = listener
            .local_addr()
            .map_err(|e| BenchError::Failed(format!("listener address: {e}")))?;
        Ok(Self {
            listener,
            shared: Arc::new(Shared {
                cfg,
                sessions: Mutex::new(HashMap::new()),
                pending: AtomicUsize::new(0),
                pending_by_addr: Mutex::new(HashMap::new()),
                refusing: AtomicUsize::new(0),
                stop: AtomicBool::new(false),
                local,
            }),
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.shared.local
    }

    /// Serve on a background thread.
    pub fn spawn(self) -> ServerHandle {
        let shared = self.shared.clone();
        let thread = std::thread::Builder::new()
            .name("hb-net-server".into())
            .spawn(move || self.serve())
            .ok();
        ServerHandle { shared, thread }
    }

    /// Accept connections until stopped (or, with `once`, until the first session ends).
    pub fn serve(self) {
        for conn in self.listener.incoming() {
            if self.shared.stop.load(Ordering::Acquire) {
                break;
            }
            let Ok(stream) = conn else { continue };
            let ip = stream.peer_addr().ok().map(|a| a.ip());
            if let Err(reason) = self.shared.admit(ip) {
                refuse_busy(&self.shared, stream, reason);
                continue;
            }
            let shared = self.shared.clone();
            let spawned = std::thread::Builder::new()
                .name("hb-net-conn".into())
                .spawn(move || handle(shared, stream, ip));
            if spawned.is_err() {
                self.shared.release(ip);
            }
        }
    }
}

impl Shared {
    /// Take a handshake slot for a connection from `ip`, or say why there is none.
    fn admit(&self, ip: Option<IpAddr>) -> Result<(), String> {
        let Ok(mut by_addr) = self.pending_by_addr.lock() else {
            return Err("server busy: internal state poisoned".into());
        };
        if let Some(ip) = ip {
            let n = by_addr.get(&ip).copied().unwrap_or(0);
            if n >= MAX_PENDING_PER_ADDR {
                return Err(format!(
                    "server busy: {n} connections from {ip} are still in their handshake (at most \
                     {MAX_PENDING_PER_ADDR} per address); idle ones time out after {} s",
                    self.cfg.handshake_timeout.as_secs_f64()
                ));
            }
        }
        let total = self.pending.fetch_add(1, Ordering::AcqRel);
        if total >= MAX_PENDING {
            self.pending.fetch_sub(1, Ordering::AcqRel);
            return Err(format!(
                "server busy: {total} connections are in their handshake (at most {MAX_PENDING})"
            ));
        }
        if let Some(ip) = ip {
            *by_addr.entry(ip).or_insert(0) += 1;
        }
        Ok(())
    }

    /// Give back the handshake slot `admit` took.
    fn release(&self, ip: Option<IpAddr>) {
        self.pending.fetch_sub(1, Ordering::AcqRel);
        if let (Some(ip), Ok(mut by_addr)) = (ip, self.pending_by_addr.lock()) {
            if let Some(n) = by_addr.get_mut(&ip) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    by_addr.remove(&ip);
                }
            }
        }
    }
}

/// Tell a connection over the handshake caps why it is turned away, on a short-lived thread:
/// write the refusal, stop writing, and read until the peer closes (briefly), so the peer's
/// `Hello` does not arrive at a closed socket and turn the refusal into a reset. Past
/// `MAX_REFUSING` refusals at once the connection is just closed.
fn refuse_busy(shared: &Arc<Shared>, mut stream: TcpStream, reason: String) {
    if shared.refusing.fetch_add(1, Ordering::AcqRel) >= MAX_REFUSING {
        shared.refusing.fetch_sub(1, Ordering::AcqRel);
        return;
    }
    let owner = shared.clone();
    let spawned = std::thread::Builder::new()
        .name("hb-net-refuse".into())
        .spawn(move || {
            let linger = Duration::from_millis(500);
            let _ = stream.set_write_timeout(Some(linger));
            let _ = stream.set_read_timeout(Some(linger));
            if refuse(&mut stream, reason, true).is_ok() {
                let _ = stream.shutdown(std::net::Shutdown::Write);
                let mut sink = [0u8; 512];
                let end = Instant::now() + linger;
                while Instant::now() < end && matches!(stream.read(&mut sink), Ok(n) if n > 0) {}
            }
            owner.refusing.fetch_sub(1, Ordering::AcqRel);
        });
    if spawned.is_err() {
        shared.refusing.fetch_sub(1, Ordering::AcqRel);
    }
}

fn listen(addr: SocketAddr) -> io::Result<TcpListener> {
    listen_with(addr, 128)
}

/// A TCP listener on `addr` with `backlog` (the control port's, and a connect-request-response
/// test's port).
pub(crate) fn listen_with(addr: SocketAddr, backlog: i32) -> io::Result<TcpListener> {
    let s = socket2::Socket::new(
        socket2::Domain::for_address(addr),
        socket2::Type::STREAM,
        Some(socket2::Protocol::TCP),
    )?;
    // Restarting a server must not wait out TIME_WAIT; a live listener still makes bind fail.
    s.set_reuse_address(true)?;
    if addr.is_ipv6() && addr.ip().is_unspecified() {
        let _ = s.set_only_v6(false);
    }
    s.bind(&addr.into())?;
    s.listen(backlog)?;
    Ok(s.into())
}

/// Gives back the handshake slot once, whenever the handshake phase ends.
struct Pending<'a>(&'a Shared, Option<IpAddr>, bool);

impl Pending<'_> {
    fn done(&mut self) {
        if !self.2 {
            self.2 = true;
            self.0.release(self.1);
        }
    }
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        self.done();
    }
}

/// Frees an admitted session's slot however the session ends.
struct Slot<'a> {
    shared: &'a Shared,
    cookie: String,
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        if let Ok(mut s) = self.shared.sessions.lock() {
            s.remove(&self.cookie);
        }
        if self.shared.cfg.once {
            self.shared.stop.store(true, Ordering::Release);
            wake(self.shared.local);
        }
    }
}

fn log(shared: &Shared, peer: &str, what: &str) {
    if shared.cfg.log {
        eprintln!("hostbench net server: {peer}: {what}");
    }
}

fn handle(shared: Arc<Shared>, mut stream: TcpStream, ip: Option<IpAddr>) {
    let peer = stream
        .peer_addr()
        .map(|a| a.to_string())
        .unwrap_or_else(|_| "?".into());
    let mut pending = Pending(&shared, ip, false);
    let _ = stream.set_nodelay(true);
    // A peer that stops reading must not park a server thread in write() either.
    let _ = stream.set_write_timeout(Some(
        shared.cfg.handshake_timeout.max(Duration::from_secs(5)),
    ));
    let local_ip = match stream.local_addr() {
        Ok(a) => a.ip(),
        Err(_) => return,
    };
    let first = wire::read_msg(&mut stream, shared.cfg.handshake_timeout, "hello");
    if let Ok(Msg::Data {
        cookie,
        stream: idx,
    }) = first
    {
        pending.done();
        let tx = shared
            .sessions
            .lock()
            .ok()
            .and_then(|s| s.get(&cookie).cloned());
        match tx {
            Some(tx) => {
                let _ = tx.send((idx, stream));
            }
            None => log(
                &shared,
                &peer,
                "data connection with an unknown cookie dropped",
            ),
        }
        return;
    }
    let outcome = converse(&shared, &mut stream, first, local_ip, &mut pending);
    log(&shared, &peer, &outcome);
}

/// Everything after a connection's first frame, when it is not a data stream: the handshake and
/// the session. Generic over the stream so the fuzzer can drive it from memory.
fn converse<S: Read + Write + Deadlined>(
    shared: &Shared,
    stream: &mut S,
    first: Result<Msg, ProtoError>,
    local_ip: IpAddr,
    pending: &mut Pending<'_>,
) -> String {
    match first {
        Ok(Msg::Hello { client_nonce, .. }) => {
            match control(shared, stream, &client_nonce, local_ip, pending) {
                Ok(()) => "session ended".into(),
                Err(e) => format!("session ended: {e}"),
            }
        }
        Ok(other) => {
            let _ = refuse(
                stream,
                format!("expected hello, got {}", other.name()),
                false,
            );
            format!("dropped: sent {} first", other.name())
        }
        Err(e) => {
            // A bad version gets told why; other garbage just gets closed.
            if let ProtoError::Version(_) = e {
                let _ = refuse(stream, e.to_string(), false);
            }
            format!("dropped: {e}")
        }
    }
}

impl Server {
    /// Run one connection's worth of bytes through the same handshake and session code a
    /// socket gets, and return what the server wrote back. For the fuzzer: the input ends where
    /// a real peer would have closed.
    pub fn converse_bytes(&self, input: &[u8]) -> Vec<u8> {
        let mut conn = MemConn {
            input: io::Cursor::new(input),
            output: Vec::new(),
        };
        self.shared.pending.fetch_add(1, Ordering::AcqRel);
        let mut pending = Pending(&self.shared, None, false);
        let first = wire::read_msg(&mut conn, self.shared.cfg.handshake_timeout, "hello");
        if !matches!(first, Ok(Msg::Data { .. })) {
            let ip = self.shared.local.ip();
            converse(&self.shared, &mut conn, first, ip, &mut pending);
        }
        conn.output
    }
}

/// An in-memory connection: reads from a fixed input, collects writes.
struct MemConn<'a> {
    input: io::Cursor<&'a [u8]>,
    output: Vec<u8>,
}

impl Read for MemConn<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.input.read(buf)
    }
}

impl Write for MemConn<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.output.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Deadlined for MemConn<'_> {
    fn set_read_deadline(&mut self, _: Option<Duration>) -> io::Result<()> {
        Ok(())
    }
}

fn refuse(stream: &mut impl Write, reason: String, busy: bool) -> Result<(), ProtoError> {
    wire::write_msg(stream, &Msg::Refused { reason, busy })
}

fn control<S: Read + Write + Deadlined>(
    shared: &Shared,
    stream: &mut S,
    client_nonce_hex: &str,
    local_ip: IpAddr,
    pending: &mut Pending<'_>,
) -> Result<(), ProtoError> {
    let cfg = &shared.cfg;
    let Some(client_nonce) = auth::unhex(client_nonce_hex).filter(|n| n.len() == auth::NONCE_BYTES)
    else {
        refuse(stream, "malformed client nonce".into(), false)?;
        return Err(ProtoError::Malformed("client nonce".into()));
    };
    let server_nonce =
        auth::random_bytes().map_err(|e| ProtoError::Io(io::Error::other(e.to_string())))?;
    wire::write_msg(
        stream,
        &Msg::Challenge {
            server_nonce: auth::hex(&server_nonce),
            auth_required: cfg.token.is_some(),
        },
    )?;
    let mac = crate::expect_msg!(
        wire::read_msg(stream, cfg.handshake_timeout, "auth")?, "auth",
        Msg::Auth { mac } => mac
    )?;
    if let Some(token) = &cfg.token {
        if !token.verify_client(&server_nonce, &client_nonce, &mac) {
            refuse(stream, "authentication failed: wrong token".into(), false)?;
            return Err(ProtoError::Malformed("authentication failed".into()));
        }
    }
    let cookie_bytes =
        auth::random_bytes().map_err(|e| ProtoError::Io(io::Error::other(e.to_string())))?;
    let cookie = auth::hex(&cookie_bytes);
    let (tx, rx) = mpsc::channel::<DataConn>();
    {
        let Ok(mut sessions) = shared.sessions.lock() else {
            return Err(ProtoError::Malformed("session table poisoned".into()));
        };
        if sessions.len() >= cfg.max_sessions || shared.stop.load(Ordering::Acquire) {
            let n = sessions.len();
            drop(sessions);
            refuse(
                stream,
                format!(
                    "server busy: {n} session(s) running (limit {}); try again later",
                    cfg.max_sessions
                ),
                true,
            )?;
            return Ok(());
        }
        sessions.insert(cookie.clone(), tx);
    }
    let _slot = Slot {
        shared,
        cookie: cookie.clone(),
    };
    pending.done();
    let server_mac = cfg
        .token
        .as_ref()
        .map(|t| t.server_mac(&client_nonce, &server_nonce, &cookie_bytes))
        .unwrap_or_default();
    wire::write_msg(stream, &Msg::Welcome { cookie, server_mac })?;
    let tag = session_tag(&cookie_bytes);
    loop {
        let msg = wire::read_msg(stream, cfg.idle_timeout, "the next request")?;
        match msg {
            Msg::Test { spec } => {
                if let Err(why) = spec.validate() {
                    wire::write_msg(
                        stream,
                        &Msg::Failed {
                            reason: format!("test refused: {why}"),
                        },
                    )?;
                    continue;
                }
                let before = crate::kernel::Counters::read();
                match run_test(cfg, stream, &spec, &rx, tag, local_ip) {
                    Ok(mut report) => {
                        report.kernel = crate::kernel::Counters::read().since(&before);
                        wire::write_msg(stream, &Msg::Report { report })?
                    }
                    Err(TestFail::Control(e)) => return Err(e),
                    Err(TestFail::Data(reason)) => {
                        wire::write_msg(stream, &Msg::Failed { reason })?
                    }
                }
            }
            Msg::Bye {} => return Ok(()),
            other => {
                let reason = format!("unexpected {} outside a test", other.name());
                let _ = wire::write_msg(
                    stream,
                    &Msg::Failed {
                        reason: reason.clone(),
                    },
                );
                return Err(ProtoError::Malformed(reason));
            }
        }
    }
}

/// Datagrams carry the first 8 bytes of the session cookie, so stray or forged traffic from
/// another source does not count.
pub fn session_tag(cookie: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&cookie[..8]);
    u64::from_le_bytes(w)
}

/// A test that could not finish: either the control connection broke (the session ends) or
/// the data path failed (the client is told why and may try another test).
enum TestFail {
    Control(ProtoError),
    Data(String),
}

impl From<ProtoError> for TestFail {
    fn from(e: ProtoError) -> Self {
        TestFail::Control(e)
    }
}

fn data_err(what: &str) -> impl Fn(io::Error) -> TestFail + '_ {
    move |e| TestFail::Data(format!("{what}: {e}"))
}

/// Wait for `n` data connections with indices 0..n.
fn collect_streams(
    rx: &Receiver<DataConn>,
    n: u32,
    within: Duration,
) -> Result<Vec<TcpStream>, TestFail> {
    let deadline = Instant::now() + within;
    let mut slots: Vec<Option<TcpStream>> = (0..n).map(|_| None).collect();
    let mut got = 0;
    while got < n {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok((i, s)) if i < n && slots[i as usize].is_none() => {
                slots[i as usize] = Some(s);
                got += 1;
            }
            Ok((i, _)) => return Err(TestFail::Data(format!("unexpected data stream {i}"))),
            Err(RecvTimeoutError::Timeout) | Err(RecvTimeoutError::Disconnected) => {
                return Err(TestFail::Data(format!(
                    "only {got} of {n} data connections arrived"
                )))
            }
        }
    }
    Ok(slots.into_iter().flatten().collect())
}

fn run_test<S: Read + Write + Deadlined>(
    cfg: &ServerConfig,
    ctl: &mut S,
    spec: &TestSpec,
    rx: &Receiver<DataConn>,
    tag: u64,
    local_ip: IpAddr,
) -> Result<Report, TestFail> {
    // Connections left over from an aborted test must not be taken for this one's.
    while rx.try_recv().is_ok() {}
    match (spec.proto, spec.kind) {
        (Proto::Tcp, TestKind::Crr) => run_crr(cfg, ctl, spec, tag, local_ip),
        (Proto::Tcp, _) => run_tcp(cfg, ctl, spec, rx, tag),
        (Proto::Udp, _) => run_udp(cfg, ctl, spec, tag, local_ip),
    }
}

/// Wait for the client's word that its side of `spec` is done.
fn sender_done<S: Read + Write + Deadlined>(
    ctl: &mut S,
    spec: &TestSpec,
) -> Result<(), ProtoError> {
    wire::read_msg(ctl, spec.end_within(), "the client's end of test")
        .and_then(|m| crate::expect_msg!(m, "sender_done", Msg::SenderDone { .. } => ()))
}

/// What one server TCP stream did.
enum TcpDone {
    Received(StreamReport),
    /// Ping-pong: bytes echoed.
    Echoed(u64),
    /// Under load: messages read and replies written.
    Reflected(u64, u64),
}

/// Connect-request-response: a listening port for the test's connections, one accepting thread
/// per pair, until the client says it is done.
fn run_crr<S: Read + Write + Deadlined>(
    cfg: &ServerConfig,
    ctl: &mut S,
    spec: &TestSpec,
    tag: u64,
    local_ip: IpAddr,
) -> Result<Report, TestFail> {
    let listener = crate::crr::listen(local_ip).map_err(data_err("test port"))?;
    let port = listener.local_addr().map_err(data_err("test port"))?.port();
    wire::write_msg(
        ctl,
        &Msg::Ready {
            udp_ports: vec![],
            tcp_port: Some(port),
        },
    )?;
    let done = AtomicBool::new(false);
    let (block, order) = (spec.block as usize, &cfg.order);
    std::thread::scope(|sc| -> Result<Report, TestFail> {
        let (done, listener) = (&done, &listener);
        let handles: Vec<_> = (0..spec.streams as usize)
            .map(|i| {
                sc.spawn(move || {
                    pin(order, i);
                    crate::crr::serve(listener, tag, block, done)
                })
            })
            .collect();
        let ended = wire::write_msg(ctl, &Msg::Go {}).and_then(|_| sender_done(ctl, spec));
        done.store(true, Ordering::Release);
        crate::crr::wake(listener, handles.len());
        let mut report = Report::default();
        let mut err = None;
        for h in handles {
            match h.join() {
                Ok(Ok(s)) => report.echoed.push(s.served),
                Ok(Err(e)) => err = Some(format!("accepting: {e}")),
                Err(_) => err = Some("an accepting thread panicked".into()),
            }
        }
        ended?;
        report.time_wait = crate::crr::time_wait();
        match err {
            Some(e) => Err(TestFail::Data(e)),
            None => Ok(report),
        }
    })
}

fn run_tcp<S: Read + Write + Deadlined>(
    cfg: &ServerConfig,
    ctl: &mut S,
    spec: &TestSpec,
    rx: &Receiver<DataConn>,
    tag: u64,
) -> Result<Report, TestFail> {
    let (inbound, outbound) = spec.stream_counts();
    wire::write_msg(
        ctl,
        &Msg::Ready {
            udp_ports: vec![],
            tcp_port: None,
        },
    )?;
    let mut socks = collect_streams(rx, inbound + outbound, cfg.handshake_timeout)?;
    for s in &socks {
        if let Some(b) = spec.sockbuf {
            let s2 = socket2::SockRef::from(s);
            let _ = s2.set_send_buffer_size(b as usize);
            let _ = s2.set_recv_buffer_size(b as usize);
        }
        let _ = s.set_write_timeout(Some(cfg.data_timeout));
    }
    let outs: Vec<TcpStream> = socks.split_off(inbound as usize);
    let block = spec.block as usize;
    let t0 = Instant::now();
    let idle = cfg.data_timeout;
    let kind = spec.kind;
    let order = &cfg.order;
    let every = spec.reply_every.unwrap_or(1);
    let report = std::thread::scope(|sc| -> Result<Report, TestFail> {
        let receivers: Vec<_> = socks
            .into_iter()
            .enumerate()
            .map(|(i, s)| {
                sc.spawn(move || {
                    pin(order, i);
                    match kind {
                        TestKind::Throughput => {
                            tcp::receive(&s, block, t0, idle).map(TcpDone::Received)
                        }
                        TestKind::PingPong | TestKind::Crr => {
                            tcp::echo(&s, block, idle).map(TcpDone::Echoed)
                        }
                        TestKind::UnderLoad => {
                            crate::loaded::reflect_tcp(&s, tag, block, every, idle)
                                .map(|(m, r)| TcpDone::Reflected(m, r))
                        }
                    }
                })
            })
            .collect();
        wire::write_msg(ctl, &Msg::Go {})?;
        let senders: Vec<_> = outs
            .into_iter()
            .enumerate()
            .map(|(i, s)| {
                let stop = spec.stop(i as u32);
                // Same CPU as the client's receiver of this stream (see `Client::run_tcp`).
                let cpu_slot = i + inbound as usize;
                sc.spawn(move || {
                    pin(order, cpu_slot);
                    tcp::send(&s, block, stop)
                })
            })
            .collect();
        let mut report = Report::default();
        for h in receivers {
            match h
                .join()
                .map_err(|_| TestFail::Data("a receive thread panicked".into()))?
            {
                Ok(TcpDone::Received(r)) => report.received.push(r),
                Ok(TcpDone::Echoed(echoed)) => report.echoed.push(echoed / block.max(1) as u64),
                Ok(TcpDone::Reflected(messages, replies)) => {
                    report.received.push(StreamReport {
                        bytes: messages * block as u64,
                        datagrams: messages,
                        ..StreamReport::default()
                    });
                    report.echoed.push(replies);
                }
                Err(e) => return Err(data_err("receiving")(e)),
            }
        }
        for h in senders {
            let r = h
                .join()
                .map_err(|_| TestFail::Data("a send thread panicked".into()))?
                .map_err(data_err("sending"))?;
            report.sent.push(r);
        }
        Ok(report)
    })?;
    Ok(report)
}

/// One server UDP socket's part of a test.
#[derive(Clone, Copy)]
enum UdpRole {
    Receive,
    Send,
    Echo,
    /// Under load: count the stream, return the messages that ask for a reply.
    Reflect,
}

enum UdpDone {
    Received(StreamReport),
    Sent(SentReport),
    Echoed(u64),
    Reflected(StreamReport, u64),
}

fn run_udp<S: Read + Write + Deadlined>(
    cfg: &ServerConfig,
    ctl: &mut S,
    spec: &TestSpec,
    tag: u64,
    local_ip: IpAddr,
) -> Result<Report, TestFail> {
    let n = spec.streams as usize;
    let mut roles = Vec::new();
    match spec.kind {
        TestKind::PingPong | TestKind::Crr => roles.extend(std::iter::repeat_n(UdpRole::Echo, n)),
        TestKind::UnderLoad => roles.extend(std::iter::repeat_n(UdpRole::Reflect, n)),
        TestKind::Throughput => {
            if spec.direction.client_sends() {
                roles.extend(std::iter::repeat_n(UdpRole::Receive, n));
            }
            if spec.direction.server_sends() {
                roles.extend(std::iter::repeat_n(UdpRole::Send, n));
            }
        }
    }
    let buf = spec
        .sockbuf
        .map(|b| b as usize)
        .unwrap_or(udp::DEFAULT_RCVBUF);
    let mut socks: Vec<UdpSocket> = Vec::with_capacity(roles.len());
    for _ in &roles {
        let (s, _) =
            udp::bind(SocketAddr::new(local_ip, 0), buf).map_err(data_err("UDP socket"))?;
        socks.push(s);
    }
    let ports = socks
        .iter()
        .map(|s| s.local_addr().map(|a| a.port()))
        .collect::<io::Result<Vec<u16>>>()
        .map_err(data_err("UDP socket"))?;
    wire::write_msg(
        ctl,
        &Msg::Ready {
            udp_ports: ports,
            tcp_port: None,
        },
    )?;
    let t0 = Instant::now();
    let start = AtomicBool::new(false);
    let abort = AtomicBool::new(false);
    let done = AtomicBool::new(false);
    let (hello_tx, hello_rx) = mpsc::channel::<Result<(), String>>();
    let block = spec.block as usize;
    let (order, hs, idle) = (&cfg.order, cfg.handshake_timeout, cfg.data_timeout);
    std::thread::scope(|sc| -> Result<Report, TestFail> {
        let (start, abort, done) = (&start, &abort, &done);
        let handles: Vec<_> = socks
            .iter()
            .zip(roles.iter().copied())
            .enumerate()
            .map(|(i, (sock, role))| {
                let hello_tx = hello_tx.clone();
                let stream_i = i % n;
                sc.spawn(move || -> io::Result<UdpDone> {
                    // Socket i pairs with the client's socket i, pinned to the same CPU slot.
                    pin(order, i);
                    let ok = udp::accept_hello(sock, tag, hs).map(|_| ());
                    let _ = hello_tx.send(ok.as_ref().map(|_| ()).map_err(|e| e.to_string()));
                    ok?;
                    match role {
                        UdpRole::Receive => {
                            udp::receive(sock, tag, block, t0, done, udp::DRAIN, idle)
                                .map(UdpDone::Received)
                        }
                        UdpRole::Echo => udp::echo(sock, block, done).map(UdpDone::Echoed),
                        UdpRole::Reflect => crate::loaded::reflect_udp(
                            sock,
                            tag,
                            block,
                            spec.reply_every.unwrap_or(1),
                            t0,
                            done,
                        )
                        .map(|(r, n)| UdpDone::Reflected(r, n)),
                        UdpRole::Send => {
                            while !start.load(Ordering::Acquire) {
                                if abort.load(Ordering::Acquire) {
                                    return Ok(UdpDone::Sent(SentReport::default()));
                                }
                                std::thread::sleep(Duration::from_micros(200));
                            }
                            let stop = spec.stop(stream_i as u32);
                            udp::send(sock, tag, block, spec.rate_bps, stop, t0).map(UdpDone::Sent)
                        }
                    }
                })
            })
            .collect();
        drop(hello_tx);
        let mut failure = None;
        for _ in 0..handles.len() {
            match hello_rx.recv_timeout(hs + Duration::from_secs(1)) {
                Ok(Ok(())) => {}
                Ok(Err(e)) => failure = Some(e),
                Err(_) => failure = Some("UDP handshake timed out".into()),
            }
        }
        let finish = |handles: Vec<std::thread::ScopedJoinHandle<'_, io::Result<UdpDone>>>| {
            let mut report = Report::default();
            let mut err = None;
            for h in handles {
                match h.join() {
                    Ok(Ok(UdpDone::Received(r))) => report.received.push(r),
                    Ok(Ok(UdpDone::Sent(s))) => report.sent.push(s),
                    Ok(Ok(UdpDone::Echoed(e))) => report.echoed.push(e),
                    Ok(Ok(UdpDone::Reflected(r, n))) => {
                        report.received.push(r);
                        report.echoed.push(n);
                    }
                    Ok(Err(e)) => err = Some(e.to_string()),
                    Err(_) => err = Some("a UDP thread panicked".into()),
                }
            }
            (report, err)
        };
        if let Some(e) = failure {
            abort.store(true, Ordering::Release);
            done.store(true, Ordering::Release);
            let _ = finish(handles);
            return Err(TestFail::Data(e));
        }
        let go = wire::write_msg(ctl, &Msg::Go {});
        start.store(true, Ordering::Release);
        let client_sends = spec.kind != TestKind::Throughput || spec.direction.client_sends();
        let ended = if go.is_ok() && client_sends {
            sender_done(ctl, spec)
        } else {
            go
        };
        done.store(true, Ordering::Release);
        let (report, err) = finish(handles);
        ended?;
        match err {
            Some(e) => Err(TestFail::Data(e)),
            None => Ok(report),
        }
    })
}

#[cfg(test)]
mod tests;

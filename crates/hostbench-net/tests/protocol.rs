//! The control protocol against a real server on loopback: every test kind, authentication
//! (right token, wrong token, a replayed handshake), admission (busy), a client vanishing
//! mid-test, and a fuzzed flood of malformed input after which a good client is still served.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use hostbench_net::auth::{self, Token};
use hostbench_net::wire::{self, Msg, TestSpec};
use hostbench_net::{
    Client, ClientError, Direction, Proto, Server, ServerConfig, ServerHandle, TestKind,
};

fn token() -> Token {
    Token::from_bytes(b"a shared secret for tests")
}

fn server_with(token: Option<Token>, max_sessions: usize) -> ServerHandle {
    let mut cfg = ServerConfig::new("127.0.0.1:0".parse().expect("addr"));
    cfg.token = token;
    cfg.max_sessions = max_sessions;
    cfg.handshake_timeout = Duration::from_secs(2);
    Server::bind(cfg).expect("bind").spawn()
}

fn spec(kind: TestKind, proto: Proto, direction: Direction, streams: u32, block: u32) -> TestSpec {
    TestSpec {
        kind,
        proto,
        direction,
        streams,
        block,
        duration_ms: Some(150),
        bytes: None,
        count: None,
        rate_bps: (proto == Proto::Udp && kind == TestKind::Throughput
            || kind == TestKind::UnderLoad)
            .then_some(200e6),
        sockbuf: None,
        reply_every: (kind == TestKind::UnderLoad).then_some(10),
        outstanding: None,
    }
}

#[test]
fn every_test_kind_runs_in_one_authenticated_session() {
    let srv = server_with(Some(token()), 1);
    let mut c =
        Client::connect(srv.local_addr(), Some(&token()), Duration::from_secs(5)).expect("connect");
    for proto in [Proto::Tcp, Proto::Udp] {
        let block = if proto == Proto::Tcp { 64 << 10 } else { 8000 };
        for dir in [Direction::Send, Direction::Recv, Direction::Bidir] {
            let o = c
                .run(&spec(TestKind::Throughput, proto, dir, 2, block))
                .expect("throughput");
            for (want, flow) in [
                (dir.client_sends(), &o.upstream),
                (dir.server_sends(), &o.downstream),
            ] {
                assert_eq!(want, flow.is_some(), "{proto:?} {dir:?}");
                if let Some(f) = flow {
                    assert_eq!(f.received.len(), 2);
                    assert!(f.goodput_bps() > 0.0, "{proto:?} {dir:?} {f:?}");
                    if proto == Proto::Tcp {
                        assert_eq!(f.bytes_sent(), f.bytes_received());
                    } else {
                        assert!(
                            f.datagrams_sent() > 0 && f.datagrams_received() <= f.datagrams_sent()
                        );
                    }
                }
            }
        }
        let o = c
            .run(&spec(TestKind::PingPong, proto, Direction::Send, 2, 1))
            .expect("ping-pong");
        let h = o.rtt.expect("histogram");
        assert!(
            h.count() > 0 && h.count() == o.rounds,
            "{} vs {}",
            h.count(),
            o.rounds
        );
    }
    // Under load, over both protocols: the server counts the stream and returns the sampled
    // messages; each reply is timed.
    for proto in [Proto::Tcp, Proto::Udp] {
        let mut s = spec(TestKind::UnderLoad, proto, Direction::Send, 1, 1000);
        s.duration_ms = Some(300);
        let o = c.run(&s).expect("under load");
        let load = o.load.expect("load report");
        let up = o.upstream.expect("the stream as the server counted it");
        assert!(load.sent > 0, "{proto:?} {load:?}");
        assert_eq!(up.datagrams_sent(), load.sent);
        assert!(load.replies > 0 && load.replies <= load.expected_replies);
        assert_eq!(load.corrected.count(), load.replies);
        if proto == Proto::Tcp {
            assert_eq!(up.datagrams_received(), load.sent);
            assert_eq!(load.replies, load.expected_replies);
        }
    }
    // Request/response with 8 in flight, and a connection per transaction.
    let mut s = spec(TestKind::PingPong, Proto::Tcp, Direction::Send, 2, 1);
    s.outstanding = Some(8);
    let o = c.run(&s).expect("pipelined");
    assert!(o.rounds > 0 && o.rtt.expect("times").count() == o.rounds);
    let o = c
        .run(&spec(TestKind::Crr, Proto::Tcp, Direction::Send, 2, 1))
        .expect("crr");
    assert!(o.rounds > 0 && o.rtt.expect("times").count() == o.rounds);
    let mut s = spec(TestKind::Crr, Proto::Tcp, Direction::Send, 1, 3);
    s.duration_ms = None;
    s.count = Some(40);
    assert_eq!(c.run(&s).expect("crr count").rounds, 40);
    // Amount- and count-based tests stop at exactly their amount.
    let mut s = spec(TestKind::Throughput, Proto::Tcp, Direction::Send, 3, 1000);
    s.duration_ms = None;
    s.bytes = Some(1_000_001);
    let o = c.run(&s).expect("bytes");
    assert_eq!(o.upstream.expect("up").bytes_received(), 1_000_001);
    let mut s = spec(TestKind::PingPong, Proto::Tcp, Direction::Send, 2, 1);
    s.duration_ms = None;
    s.count = Some(250);
    assert_eq!(c.run(&s).expect("count").rounds, 500);
    c.close();
}

#[test]
fn a_wrong_or_missing_token_is_refused() {
    let srv = server_with(Some(token()), 1);
    let e = Client::connect(
        srv.local_addr(),
        Some(&Token::from_bytes(b"not the secret")),
        Duration::from_secs(5),
    )
    .err()
    .expect("wrong token");
    assert!(
        matches!(&e, ClientError::Peer(m) if m.contains("wrong token")),
        "{e}"
    );
    let e = Client::connect(srv.local_addr(), None, Duration::from_secs(5))
        .err()
        .expect("no token");
    assert!(e.to_string().contains("requires a token"), "{e}");
    // The server still serves the right token afterwards.
    Client::connect(srv.local_addr(), Some(&token()), Duration::from_secs(5))
        .expect("right token")
        .close();
}

fn frame(m: &Msg) -> Vec<u8> {
    wire::encode(m).expect("encode")
}

fn read(s: &mut TcpStream) -> Msg {
    wire::read_msg(s, Duration::from_secs(5), "reply").expect("reply")
}

#[test]
fn a_replayed_handshake_is_rejected() {
    let srv = server_with(Some(token()), 1);
    let addr = srv.local_addr();
    // A genuine exchange, recorded byte for byte.
    let cn = [7u8; 32];
    let hello = frame(&Msg::Hello {
        client_nonce: auth::hex(&cn),
        software: "recorder".into(),
    });
    let mut s = TcpStream::connect(addr).expect("connect");
    s.write_all(&hello).expect("hello");
    let Msg::Challenge { server_nonce, .. } = read(&mut s) else {
        panic!("no challenge")
    };
    let sn = auth::unhex(&server_nonce).expect("hex");
    let auth_frame = frame(&Msg::Auth {
        mac: token().client_mac(&sn, &cn),
    });
    s.write_all(&auth_frame).expect("auth");
    assert!(matches!(read(&mut s), Msg::Welcome { .. }));
    drop(s);
    // The same bytes on a new connection: a new server nonce, so the recorded proof fails.
    std::thread::sleep(Duration::from_millis(100));
    let mut r = TcpStream::connect(addr).expect("connect");
    r.write_all(&hello).expect("hello");
    let Msg::Challenge {
        server_nonce: sn2, ..
    } = read(&mut r)
    else {
        panic!("no challenge")
    };
    assert_ne!(sn2, server_nonce, "the server nonce must be fresh");
    r.write_all(&auth_frame).expect("auth");
    match read(&mut r) {
        Msg::Refused { reason, busy } => assert!(
            !busy && reason.contains("authentication failed"),
            "{reason}"
        ),
        other => panic!("replay accepted: {other:?}"),
    }
}

#[test]
fn sessions_beyond_the_limit_are_told_busy_and_a_vanished_client_frees_its_slot() {
    let srv = server_with(None, 1);
    let addr = srv.local_addr();
    let first = Client::connect(addr, None, Duration::from_secs(5)).expect("first");
    let e = Client::connect(addr, None, Duration::from_secs(5))
        .err()
        .expect("busy");
    assert!(e.to_string().contains("busy"), "{e}");
    drop(first);

    // A client that starts a long test, opens its data connections and vanishes. (The first
    // client's slot frees once the server has seen its connection close: ask until it has.)
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let (mut ctl, cookie) = loop {
        let mut ctl = connect_raw(addr);
        match read(&mut ctl) {
            Msg::Welcome { cookie, .. } => break (ctl, cookie),
            Msg::Refused { busy: true, .. } if std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20))
            }
            other => panic!("no welcome: {other:?}"),
        }
    };
    let mut long = spec(TestKind::Throughput, Proto::Tcp, Direction::Send, 2, 1000);
    long.duration_ms = Some(600_000);
    ctl.write_all(&frame(&Msg::Test { spec: long }))
        .expect("test");
    assert!(matches!(read(&mut ctl), Msg::Ready { .. }));
    let data: Vec<TcpStream> = (0..2)
        .map(|i| {
            let mut d = TcpStream::connect(addr).expect("data");
            d.write_all(&frame(&Msg::Data {
                cookie: cookie.clone(),
                stream: i,
            }))
            .expect("data hello");
            d
        })
        .collect();
    assert!(matches!(read(&mut ctl), Msg::Go {}));
    (&data[0]).write_all(&[0u8; 4096]).expect("some data");
    drop(data);
    drop(ctl);

    // The slot comes back: a good client gets in and runs a test.
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut c = loop {
        match Client::connect(addr, None, Duration::from_secs(5)) {
            Ok(c) => break c,
            Err(e) if e.to_string().contains("busy") && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(100))
            }
            Err(e) => panic!("slot not freed: {e}"),
        }
    };
    let o = c
        .run(&spec(
            TestKind::Throughput,
            Proto::Tcp,
            Direction::Send,
            1,
            8192,
        ))
        .expect("test");
    assert!(o.upstream.expect("up").goodput_bps() > 0.0);
}

/// Hello + empty auth on a server without a token, leaving the Welcome unread.
fn connect_raw(addr: SocketAddr) -> TcpStream {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.write_all(&frame(&Msg::Hello {
        client_nonce: auth::hex(&[1u8; 32]),
        software: "raw".into(),
    }))
    .expect("hello");
    assert!(matches!(read(&mut s), Msg::Challenge { .. }));
    s.write_all(&frame(&Msg::Auth { mac: String::new() }))
        .expect("auth");
    s
}

/// A small deterministic generator (xorshift64*), so a failure is reproducible from its index.
struct Gen(u64);

impl Gen {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
    fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[self.below(xs.len() as u64) as usize]
    }
    fn json_value(&mut self) -> String {
        match self.below(9) {
            0 => format!("{}", self.next() as i64),
            1 => format!("{}", self.below(300)),
            2 => "-1".into(),
            3 => "1e308".into(),
            4 => "null".into(),
            5 => format!("\"{}\"", "x".repeat(self.below(70_000) as usize)),
            6 => "[1,2,3]".into(),
            7 => "{\"a\":{}}".into(),
            _ => format!(
                "\"{}\"",
                self.pick(&[
                    "tcp",
                    "udp",
                    "send",
                    "recv",
                    "bidir",
                    "throughput",
                    "pingpong",
                    ""
                ])
            ),
        }
    }
}

const TYPES: &[&str] = &[
    "hello",
    "challenge",
    "auth",
    "welcome",
    "refused",
    "test",
    "ready",
    "go",
    "sender_done",
    "report",
    "failed",
    "bye",
    "data",
    "launch",
    "",
];
const FIELDS: &[&str] = &[
    "client_nonce",
    "software",
    "mac",
    "cookie",
    "stream",
    "spec",
    "kind",
    "proto",
    "direction",
    "streams",
    "block",
    "duration_ms",
    "bytes",
    "count",
    "rate_bps",
    "sockbuf",
    "sent",
    "extra",
];

fn raw_frame(payload: &[u8], version: u16, len: Option<u32>) -> Vec<u8> {
    let mut f = wire::MAGIC.to_vec();
    f.extend_from_slice(&version.to_be_bytes());
    f.extend_from_slice(&len.unwrap_or(payload.len() as u32).to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// One hostile input: garbage, hostile headers, or structurally plausible JSON with wrong
/// types, ranges and sizes — optionally after a valid handshake, to reach the session loop.
fn input(g: &mut Gen) -> Vec<u8> {
    let handshake = || {
        let mut v = frame(&Msg::Hello {
            client_nonce: auth::hex(&[3u8; 32]),
            software: "fuzz".into(),
        });
        v.extend(frame(&Msg::Auth { mac: String::new() }));
        v
    };
    let json_msg = |g: &mut Gen| {
        let mut fields = vec![format!("\"type\":\"{}\"", g.pick(TYPES))];
        for _ in 0..g.below(6) {
            fields.push(format!("\"{}\":{}", g.pick(FIELDS), g.json_value()));
        }
        if g.below(3) == 0 {
            let spec = format!(
                "{{\"kind\":{},\"proto\":{},\"direction\":{},\"streams\":{},\"block\":{},\"duration_ms\":{},\"bytes\":null,\"count\":null,\"rate_bps\":{},\"sockbuf\":null}}",
                g.json_value(), g.json_value(), g.json_value(), g.json_value(), g.json_value(), g.json_value(), g.json_value()
            );
            fields.push(format!("\"spec\":{spec}"));
        }
        format!("{{{}}}", fields.join(",")).into_bytes()
    };
    match g.below(8) {
        0 => {
            let n = g.below(300) as usize;
            g.bytes(n)
        }
        1 => {
            let n = g.below(64) as usize;
            let p = g.bytes(n);
            raw_frame(&p, wire::VERSION, None)
        }
        2 => {
            let len = match g.below(3) {
                0 => u32::MAX,
                1 => wire::MAX_FRAME as u32 + 1 + g.below(1000) as u32,
                _ => g.below(wire::MAX_FRAME as u64) as u32,
            };
            raw_frame(b"{}", wire::VERSION, Some(len))
        }
        3 => raw_frame(b"{\"type\":\"go\"}", g.below(65_536) as u16, None),
        4 => {
            let p = json_msg(g);
            raw_frame(&p, wire::VERSION, None)
        }
        5 | 6 => {
            // Past the handshake: a run of malformed or out-of-range requests.
            let mut v = handshake();
            for _ in 0..1 + g.below(4) {
                let p = json_msg(g);
                v.extend(raw_frame(&p, wire::VERSION, None));
            }
            v
        }
        _ => {
            // A valid frame cut short, or with a byte flipped.
            let mut v = handshake();
            let cut = g.below(v.len() as u64) as usize;
            if g.below(2) == 0 {
                v.truncate(cut);
            } else {
                v[cut] ^= 1 << g.below(8);
            }
            v
        }
    }
}

/// Every byte the server wrote must be a sequence of well-formed frames.
fn replies(out: &[u8]) -> Vec<Msg> {
    let mut cur = std::io::Cursor::new(out);
    let mut msgs = Vec::new();
    while (cur.position() as usize) < out.len() {
        msgs.push(
            wire::read_msg(&mut cur, Duration::from_secs(1), "reply")
                .expect("server output is framed"),
        );
    }
    msgs
}

#[test]
fn a_fuzzed_flood_never_panics_the_server_and_a_good_client_is_served_afterwards() {
    let mut cfg = ServerConfig::new("127.0.0.1:0".parse().expect("addr"));
    // Valid test requests from the fuzzer find no data connections: fail them fast.
    cfg.handshake_timeout = Duration::from_millis(5);
    cfg.max_sessions = 1_000_000;
    let open = Server::bind(cfg.clone()).expect("bind");
    cfg.token = Some(token());
    let guarded = Server::bind(cfg).expect("bind");
    let mut g = Gen(0x1234_5678_9abc_def1);
    let mut sessions = 0;
    for i in 0..100_000u32 {
        let inp = input(&mut g);
        // Alternate servers: the guarded one must never let a fuzzed input in.
        if i % 2 == 0 {
            for m in replies(&guarded.converse_bytes(&inp)) {
                assert!(
                    !matches!(m, Msg::Welcome { .. }),
                    "input {i} passed authentication"
                );
            }
        } else {
            let out = replies(&open.converse_bytes(&inp));
            sessions += out
                .iter()
                .filter(|m| matches!(m, Msg::Welcome { .. }))
                .count();
        }
    }
    assert!(
        sessions > 10_000,
        "the generator rarely reached the session loop ({sessions})"
    );

    // The same kinds of input over real sockets, from several threads at once, against a
    // serving server; then a good client.
    let srv = server_with(Some(token()), 1);
    let addr = srv.local_addr();
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            std::thread::spawn(move || {
                let mut g = Gen(0xfeed_0000 + t);
                for _ in 0..500 {
                    let inp = input(&mut g);
                    let Ok(mut s) = TcpStream::connect(addr) else {
                        continue;
                    };
                    let _ = s.set_read_timeout(Some(Duration::from_secs(3)));
                    let _ = s.write_all(&inp);
                    let _ = s.shutdown(std::net::Shutdown::Write);
                    let mut sink = Vec::new();
                    let _ = s.read_to_end(&mut sink);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("flood thread");
    }
    let mut c = Client::connect(addr, Some(&token()), Duration::from_secs(5)).expect("good client");
    let o = c
        .run(&spec(TestKind::PingPong, Proto::Tcp, Direction::Send, 1, 1))
        .expect("served");
    assert!(o.rounds > 0);
}

//! The control protocol's framing and messages.
//!
//! Every message is one frame: the magic `HBNT`, a big-endian `u16` protocol version, a
//! big-endian `u32` payload length, then that many bytes of JSON for one [`Msg`]. iperf3's
//! control-path CVEs came from trusting a length prefix (CVE-2023-38403: 0xFFFFFFFF wrapped an
//! allocation size), from a read without a deadline (CVE-2023-7250: a client that promised more
//! bytes than it sent hung the server) and from a hand-rolled JSON parser (CVE-2016-4303). Here
//! the length is checked against [`MAX_FRAME`] before anything is allocated, every read has an
//! overall deadline (not a per-`read` timeout a slow sender could renew byte by byte), and the
//! payload is decoded by serde into typed structs with unknown fields refused and every range
//! validated afterwards ([`TestSpec::validate`]).

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// Frame magic: identifies a hostbench peer before any JSON is parsed.
pub const MAGIC: [u8; 4] = *b"HBNT";
/// The protocol version this build speaks; a peer with another one is refused by name.
/// 2: `Report.kernel`, the server's kernel counter deltas over the test (a version-1 peer
/// would refuse the field, so the mismatch is named instead).
/// 3: the under-load and connect-request-response tests (`TestKind::UnderLoad`, `Crr`),
/// `TestSpec.reply_every` and `outstanding`, `Ready.tcp_port`, `Report.time_wait`.
pub const VERSION: u16 = 3;
/// Hard cap on one frame's payload. Results are a few hundred bytes per stream, and streams are
/// capped at [`MAX_STREAMS`], so this is never the limit for an honest peer.
pub const MAX_FRAME: usize = 64 * 1024;
/// Header bytes before the payload: magic, version, length.
pub const HEADER: usize = 10;

/// Most streams (or ping-pong pairs) one test may ask for (iperf3's limit too).
pub const MAX_STREAMS: u32 = 128;
/// Most requests one pair may keep in flight (`outstanding`).
pub const MAX_OUTSTANDING: u32 = 1024;
/// Most bytes one pair may keep in flight: both ends write before they read, so more than the
/// socket buffers hold could deadlock the two writers.
pub const MAX_IN_FLIGHT: u64 = 64 << 10;
/// Largest `reply_every` (one reply per million messages is already a sparse sample).
pub const MAX_REPLY_EVERY: u32 = 1_000_000;
/// Largest TCP write/read block a test may ask for.
pub const MAX_TCP_BLOCK: u32 = 16 << 20;
/// Largest UDP payload over IPv4 (65535 − 20 IP − 8 UDP); used for both families.
pub const MAX_UDP_BLOCK: u32 = 65_507;
/// Longest test a server accepts (one hour).
pub const MAX_TEST: Duration = Duration::from_secs(3600);

/// What went wrong on the control connection. Every variant is a clean end of that connection:
/// the server logs it and goes on serving others.
#[derive(Debug, thiserror::Error)]
pub enum ProtoError {
    #[error("timed out waiting for {0}")]
    Timeout(&'static str),
    #[error("the peer closed the connection")]
    Closed,
    #[error("{0}")]
    Io(#[from] io::Error),
    #[error("not a hostbench peer (bad frame magic)")]
    BadMagic,
    #[error("protocol version {0} not supported (this build speaks {VERSION})")]
    Version(u16),
    #[error("frame of {0} bytes exceeds the {MAX_FRAME}-byte cap")]
    TooLarge(u32),
    #[error("malformed message: {0}")]
    Malformed(String),
    #[error("expected {expected}, got {got}")]
    Unexpected { expected: &'static str, got: String },
}

hostbench_core::named_enum! {
    /// Transport protocol of a test.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
    #[serde(rename_all = "lowercase")]
    pub enum Proto("protocol") {
        Tcp = "tcp",
        Udp = "udp",
    }
}

hostbench_core::named_enum! {
    /// Direction of bulk data, from the client's point of view (iperf3's default, `-R`,
    /// `--bidir`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(rename_all = "lowercase")]
    pub enum Direction("direction") {
        /// Client sends, server receives and counts.
        Send = "send",
        /// Server sends, client receives and counts.
        Recv = "recv" | "reverse",
        /// Both at once, on separate streams.
        Bidir = "bidir",
    }
}

impl Direction {
    pub fn client_sends(self) -> bool {
        matches!(self, Direction::Send | Direction::Bidir)
    }
    pub fn server_sends(self) -> bool {
        matches!(self, Direction::Recv | Direction::Bidir)
    }
}

/// Bulk transfer, request/response, or either under load.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TestKind {
    Throughput,
    /// Request/response on one connection per pair (`outstanding` in flight over TCP).
    #[serde(rename = "pingpong")]
    PingPong,
    /// A stream paced at `rate_bps` whose every `reply_every`-th message the server returns:
    /// round trips measured while the stream loads the path (sockperf's under-load mode).
    UnderLoad,
    /// TCP connect, request, response, close, repeated per pair (netperf's TCP_CRR).
    Crr,
}

/// One test, as the client asks for it. The server validates every field before acting on it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TestSpec {
    pub kind: TestKind,
    pub proto: Proto,
    pub direction: Direction,
    /// Streams per direction (throughput) or concurrent pairs (ping-pong).
    pub streams: u32,
    /// Bytes per write / datagram / message.
    pub block: u32,
    /// Time-based test length in milliseconds.
    pub duration_ms: Option<u64>,
    /// Amount-based throughput test: bytes per direction over all streams.
    pub bytes: Option<u64>,
    /// Count-based ping-pong: round trips per pair.
    pub count: Option<u64>,
    /// UDP pacing per stream, bit/s of payload; `None` is unpaced.
    pub rate_bps: Option<f64>,
    /// SO_SNDBUF / SO_RCVBUF request for data sockets, bytes; `None` keeps autotuning (TCP) or
    /// hostbench's enlarged UDP receive buffer.
    pub sockbuf: Option<u32>,
    /// Under load: the server returns every message whose sequence number is a multiple of this.
    #[serde(default)]
    pub reply_every: Option<u32>,
    /// TCP ping-pong: requests each pair keeps in flight (`None` = 1).
    #[serde(default)]
    pub outstanding: Option<u32>,
}

impl TestSpec {
    /// Data streams client → server and server → client (a ping-pong pair counts as one
    /// client → server stream: the client sends first).
    pub fn stream_counts(&self) -> (u32, u32) {
        let n = self.streams;
        match self.kind {
            TestKind::PingPong | TestKind::UnderLoad | TestKind::Crr => (n, 0),
            TestKind::Throughput => (
                if self.direction.client_sends() { n } else { 0 },
                if self.direction.server_sends() { n } else { 0 },
            ),
        }
    }

    /// When stream `i` stops sending: at the test's end time, after its share of the bytes (the
    /// first streams take the remainder), or after the round-trip count.
    pub fn stop(&self, i: u32) -> crate::stream::Stop {
        use crate::stream::Stop;
        match (self.duration_ms, self.bytes, self.count) {
            (Some(ms), _, _) => Stop::At(Instant::now() + Duration::from_millis(ms)),
            (_, Some(b), _) => {
                let n = u64::from(self.streams.max(1));
                Stop::Bytes(b / n + u64::from(u64::from(i) < b % n))
            }
            (_, _, Some(c)) => Stop::Count(c),
            _ => Stop::Count(0),
        }
    }

    /// How long either side waits for the other's end of this test: its length plus a margin,
    /// or the longest test allowed when it runs by amount.
    pub fn end_within(&self) -> Duration {
        match self.duration_ms {
            Some(ms) => Duration::from_millis(ms) + Duration::from_secs(30),
            None => MAX_TEST,
        }
    }

    /// Range checks a server applies to whatever arrived; the error names the field.
    pub fn validate(&self) -> Result<(), String> {
        if self.streams == 0 || self.streams > MAX_STREAMS {
            return Err(format!(
                "streams {} outside 1..={MAX_STREAMS}",
                self.streams
            ));
        }
        let max_block = match self.proto {
            Proto::Tcp => MAX_TCP_BLOCK,
            Proto::Udp => MAX_UDP_BLOCK,
        };
        let min_block = match (self.proto, self.kind) {
            (Proto::Udp, TestKind::Throughput) | (_, TestKind::UnderLoad) => {
                crate::stream::HEADER_BYTES as u32
            }
            _ => 1,
        };
        if self.block < min_block || self.block > max_block {
            return Err(format!(
                "block {} outside {min_block}..={max_block} bytes for {}",
                self.block,
                self.proto.name()
            ));
        }
        let stops = [
            self.duration_ms.is_some(),
            self.bytes.is_some(),
            self.count.is_some(),
        ];
        if stops.iter().filter(|s| **s).count() != 1 {
            return Err("exactly one of duration, bytes and count must be given".into());
        }
        if let Some(ms) = self.duration_ms {
            if ms == 0 || ms > MAX_TEST.as_millis() as u64 {
                return Err(format!("duration {ms} ms outside 1 ms..1 h"));
            }
        }
        if self.bytes == Some(0) || self.count == Some(0) {
            return Err("a zero amount of work".into());
        }
        if self.bytes.is_some_and(|b| b > 1 << 44) || self.count.is_some_and(|c| c > 1 << 32) {
            return Err("amount of work beyond the server's cap".into());
        }
        if self.bytes.is_some() && self.kind != TestKind::Throughput
            || self.count.is_some() && self.kind == TestKind::Throughput
        {
            return Err("bytes is for throughput tests, count for ping-pong".into());
        }
        if self.kind == TestKind::UnderLoad {
            if self.duration_ms.is_none() {
                return Err("a test under load runs for a duration".into());
            }
            if self.rate_bps.is_none() {
                return Err("a test under load needs its rate".into());
            }
            match self.reply_every {
                Some(r) if (1..=MAX_REPLY_EVERY).contains(&r) => {}
                _ => return Err(format!("reply_every must be 1..={MAX_REPLY_EVERY}")),
            }
        } else if self.reply_every.is_some() {
            return Err("reply_every is for tests under load".into());
        }
        if self.kind == TestKind::Crr && self.proto != Proto::Tcp {
            return Err("connect-request-response is TCP only".into());
        }
        if let Some(o) = self.outstanding {
            if self.kind != TestKind::PingPong || self.proto != Proto::Tcp {
                return Err("outstanding is for TCP ping-pong".into());
            }
            if !(1..=MAX_OUTSTANDING).contains(&o) {
                return Err(format!("outstanding {o} outside 1..={MAX_OUTSTANDING}"));
            }
            if u64::from(o) * u64::from(self.block) > MAX_IN_FLIGHT {
                return Err(format!(
                    "{o} outstanding × {} bytes exceeds the {} KiB a pair may keep in flight",
                    self.block,
                    MAX_IN_FLIGHT >> 10
                ));
            }
        }
        if let Some(r) = self.rate_bps {
            if !(r.is_finite() && (1000.0..=4e11).contains(&r)) {
                return Err(format!("rate {r} bit/s outside 1 kbit/s..400 Gbit/s"));
            }
        }
        if let Some(b) = self.sockbuf {
            if !(4096..=(512 << 20)).contains(&b) {
                return Err(format!("socket buffer {b} outside 4 KiB..512 MiB"));
            }
        }
        if self.kind != TestKind::Throughput && self.direction != Direction::Send {
            return Err("only throughput tests have a direction other than send".into());
        }
        Ok(())
    }
}

/// What one receiving stream saw. Times are nanoseconds after the receiver's start of the test,
/// so they are comparable within one side only.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StreamReport {
    /// Payload bytes received (unique datagrams for UDP).
    pub bytes: u64,
    /// Bytes of the first read, which arrived before `first_ns` was stamped.
    pub first_chunk: u64,
    pub first_ns: u64,
    pub last_ns: u64,
    /// UDP only from here on.
    pub datagrams: u64,
    /// Sequence numbers skipped when a later one arrived (loss events, iperf3's count).
    pub gaps: u64,
    pub out_of_order: u64,
    pub duplicates: u64,
    /// RFC 3550 interarrival jitter, seconds.
    pub jitter_s: f64,
    /// Datagrams with another session's tag, ignored.
    pub foreign: u64,
}

/// What one sending stream sent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SentReport {
    pub bytes: u64,
    pub datagrams: u64,
}

/// The server's side of a finished test.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Report {
    /// Streams the server received on (client → server).
    pub received: Vec<StreamReport>,
    /// Streams the server sent on (server → client).
    pub sent: Vec<SentReport>,
    /// Ping-pong: round trips the server echoed, per pair.
    pub echoed: Vec<u64>,
    /// Growth of the server namespace's TCP/UDP counters over the test (`Group.Name` → count).
    #[serde(default)]
    pub kernel: std::collections::BTreeMap<String, u64>,
    /// Connect-request-response: TCP sockets in TIME_WAIT in the server's namespace at the
    /// test's end (the server closes first, so they pile up there).
    #[serde(default)]
    pub time_wait: Option<u64>,
}

/// Every control message. The first frame on any connection is `Hello` (a control session) or
/// `Data` (a data stream joining a session by its cookie).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Msg {
    Hello {
        client_nonce: String,
        software: String,
    },
    Challenge {
        server_nonce: String,
        auth_required: bool,
    },
    Auth {
        mac: String,
    },
    Welcome {
        cookie: String,
        server_mac: String,
    },
    Refused {
        reason: String,
        busy: bool,
    },
    Test {
        spec: TestSpec,
    },
    Ready {
        udp_ports: Vec<u16>,
        /// Connect-request-response: the port the server accepts the test's connections on.
        #[serde(default)]
        tcp_port: Option<u16>,
    },
    Go {},
    SenderDone {
        sent: Vec<SentReport>,
    },
    Report {
        report: Report,
    },
    Failed {
        reason: String,
    },
    Bye {},
    Data {
        cookie: String,
        stream: u32,
    },
}

impl Msg {
    pub fn name(&self) -> &'static str {
        match self {
            Msg::Hello { .. } => "hello",
            Msg::Challenge { .. } => "challenge",
            Msg::Auth { .. } => "auth",
            Msg::Welcome { .. } => "welcome",
            Msg::Refused { .. } => "refused",
            Msg::Test { .. } => "test",
            Msg::Ready { .. } => "ready",
            Msg::Go {} => "go",
            Msg::SenderDone { .. } => "sender_done",
            Msg::Report { .. } => "report",
            Msg::Failed { .. } => "failed",
            Msg::Bye {} => "bye",
            Msg::Data { .. } => "data",
        }
    }
}

/// A byte stream whose reads can be bounded in time: a socket, or an in-memory buffer in tests
/// and the fuzzer.
pub trait Deadlined: Read {
    fn set_read_deadline(&mut self, timeout: Option<Duration>) -> io::Result<()>;
}

impl Deadlined for TcpStream {
    fn set_read_deadline(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        self.set_read_timeout(timeout)
    }
}

impl Deadlined for &TcpStream {
    fn set_read_deadline(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        self.set_read_timeout(timeout)
    }
}

impl<T: AsRef<[u8]>> Deadlined for io::Cursor<T> {
    fn set_read_deadline(&mut self, _: Option<Duration>) -> io::Result<()> {
        Ok(())
    }
}

/// Fill `buf` completely before `deadline`, re-arming the socket timeout with what is left
/// before every read so a peer trickling bytes cannot stretch it.
fn read_full(
    r: &mut impl Deadlined,
    buf: &mut [u8],
    deadline: Instant,
    what: &'static str,
) -> Result<(), ProtoError> {
    let mut got = 0;
    while got < buf.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(ProtoError::Timeout(what));
        }
        r.set_read_deadline(Some(left))?;
        match r.read(&mut buf[got..]) {
            Ok(0) => return Err(ProtoError::Closed),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                return Err(ProtoError::Timeout(what))
            }
            Err(e) => return Err(ProtoError::Io(e)),
        }
    }
    Ok(())
}

/// Read one frame within `timeout` and decode it. The length is checked before the payload is
/// allocated; nothing the peer sends can make this allocate more than [`MAX_FRAME`] bytes.
pub fn read_msg(
    r: &mut impl Deadlined,
    timeout: Duration,
    what: &'static str,
) -> Result<Msg, ProtoError> {
    let deadline = Instant::now() + timeout;
    let mut head = [0u8; HEADER];
    read_full(r, &mut head, deadline, what)?;
    let len = decode_header(&head)?;
    let mut payload = vec![0u8; len];
    read_full(r, &mut payload, deadline, what)?;
    decode_payload(&payload)
}

/// Check a frame header and return the payload length it announces.
pub fn decode_header(head: &[u8; HEADER]) -> Result<usize, ProtoError> {
    if head[..4] != MAGIC {
        return Err(ProtoError::BadMagic);
    }
    let version = u16::from_be_bytes([head[4], head[5]]);
    if version != VERSION {
        return Err(ProtoError::Version(version));
    }
    let len = u32::from_be_bytes([head[6], head[7], head[8], head[9]]);
    if len as usize > MAX_FRAME {
        return Err(ProtoError::TooLarge(len));
    }
    Ok(len as usize)
}

pub fn decode_payload(payload: &[u8]) -> Result<Msg, ProtoError> {
    serde_json::from_slice(payload).map_err(|e| {
        // serde's message can quote the input; keep the log line short.
        let mut m = e.to_string();
        m.truncate(160);
        ProtoError::Malformed(m)
    })
}

/// Encode one message as a frame.
pub fn encode(msg: &Msg) -> Result<Vec<u8>, ProtoError> {
    let payload = serde_json::to_vec(msg).map_err(|e| ProtoError::Malformed(e.to_string()))?;
    if payload.len() > MAX_FRAME {
        return Err(ProtoError::TooLarge(payload.len() as u32));
    }
    let mut out = Vec::with_capacity(HEADER + payload.len());
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&VERSION.to_be_bytes());
    out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    out.extend_from_slice(&payload);
    Ok(out)
}

/// Write one message (a single `write_all`, so a frame is never interleaved).
pub fn write_msg(w: &mut impl Write, msg: &Msg) -> Result<(), ProtoError> {
    let frame = encode(msg)?;
    w.write_all(&frame)?;
    w.flush()?;
    Ok(())
}

/// Read a message and insist on its kind: `expect!(read, Msg::Go {} => ())`.
#[macro_export]
macro_rules! expect_msg {
    ($msg:expr, $what:literal, $($pat:pat => $val:expr),+ $(,)?) => {
        match $msg {
            $($pat => Ok($val),)+
            other => Err($crate::wire::ProtoError::Unexpected {
                expected: $what,
                got: other.name().to_string(),
            }),
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> TestSpec {
        TestSpec {
            kind: TestKind::Throughput,
            proto: Proto::Tcp,
            direction: Direction::Send,
            streams: 2,
            block: 128 << 10,
            duration_ms: Some(1000),
            bytes: None,
            count: None,
            rate_bps: None,
            sockbuf: None,
            reply_every: None,
            outstanding: None,
        }
    }

    #[test]
    fn frames_round_trip() {
        let msgs = [
            Msg::Hello {
                client_nonce: "ab".into(),
                software: "hostbench".into(),
            },
            Msg::Test { spec: spec() },
            Msg::Go {},
            Msg::Report {
                report: Report {
                    received: vec![StreamReport {
                        bytes: 5,
                        ..Default::default()
                    }],
                    ..Default::default()
                },
            },
        ];
        for m in msgs {
            let frame = encode(&m).expect("encode");
            let back = read_msg(&mut io::Cursor::new(frame), Duration::from_secs(1), "test")
                .expect("decode");
            assert_eq!(back, m);
        }
    }

    #[test]
    fn hostile_headers_are_refused_before_allocation() {
        let mut frame = encode(&Msg::Go {}).expect("encode");
        frame[6..10].copy_from_slice(&u32::MAX.to_be_bytes());
        let err = read_msg(&mut io::Cursor::new(frame), Duration::from_secs(1), "t");
        assert!(
            matches!(err, Err(ProtoError::TooLarge(u32::MAX))),
            "{err:?}"
        );
        let mut frame = encode(&Msg::Go {}).expect("encode");
        frame[5] = 9;
        let err = read_msg(&mut io::Cursor::new(frame), Duration::from_secs(1), "t");
        assert!(matches!(err, Err(ProtoError::Version(9))), "{err:?}");
        let err = read_msg(
            &mut io::Cursor::new(b"GET / HTTP/1.1\r\n".to_vec()),
            Duration::from_secs(1),
            "t",
        );
        assert!(matches!(err, Err(ProtoError::BadMagic)), "{err:?}");
        let frame = encode(&Msg::Go {}).expect("encode");
        let err = read_msg(
            &mut io::Cursor::new(frame[..frame.len() - 1].to_vec()),
            Duration::from_secs(1),
            "t",
        );
        assert!(matches!(err, Err(ProtoError::Closed)), "{err:?}");
    }

    #[test]
    fn unknown_fields_and_types_are_malformed() {
        for payload in [
            &br#"{"type":"go","extra":1}"#[..],
            br#"{"type":"launch"}"#,
            br#"{"type":"data","cookie":5,"stream":1}"#,
            br#"{"type":"data","cookie":"x","stream":-1}"#,
            b"\xff\xfe",
        ] {
            assert!(
                matches!(decode_payload(payload), Err(ProtoError::Malformed(_))),
                "{payload:?}"
            );
        }
    }

    #[test]
    fn validation_names_the_bad_field() {
        let ok = spec();
        assert!(ok.validate().is_ok());
        let cases: Vec<(TestSpec, &str)> = vec![
            (
                TestSpec {
                    streams: 0,
                    ..ok.clone()
                },
                "streams",
            ),
            (
                TestSpec {
                    streams: 129,
                    ..ok.clone()
                },
                "streams",
            ),
            (
                TestSpec {
                    block: 0,
                    ..ok.clone()
                },
                "block",
            ),
            (
                TestSpec {
                    proto: Proto::Udp,
                    block: 65_508,
                    ..ok.clone()
                },
                "block",
            ),
            (
                TestSpec {
                    proto: Proto::Udp,
                    block: 8,
                    ..ok.clone()
                },
                "block",
            ),
            (
                TestSpec {
                    duration_ms: None,
                    ..ok.clone()
                },
                "exactly one",
            ),
            (
                TestSpec {
                    bytes: Some(10),
                    ..ok.clone()
                },
                "exactly one",
            ),
            (
                TestSpec {
                    duration_ms: Some(0),
                    ..ok.clone()
                },
                "duration",
            ),
            (
                TestSpec {
                    rate_bps: Some(f64::NAN),
                    ..ok.clone()
                },
                "rate",
            ),
            (
                TestSpec {
                    sockbuf: Some(1),
                    ..ok.clone()
                },
                "socket buffer",
            ),
            (
                TestSpec {
                    kind: TestKind::UnderLoad,
                    rate_bps: Some(1e6),
                    reply_every: Some(0),
                    ..ok.clone()
                },
                "reply_every",
            ),
            (
                TestSpec {
                    kind: TestKind::UnderLoad,
                    reply_every: Some(100),
                    ..ok.clone()
                },
                "rate",
            ),
            (
                TestSpec {
                    reply_every: Some(100),
                    ..ok.clone()
                },
                "under load",
            ),
            (
                TestSpec {
                    kind: TestKind::Crr,
                    proto: Proto::Udp,
                    block: 1,
                    ..ok.clone()
                },
                "TCP only",
            ),
            (
                TestSpec {
                    kind: TestKind::PingPong,
                    block: 1024,
                    outstanding: Some(128),
                    ..ok.clone()
                },
                "in flight",
            ),
            (
                TestSpec {
                    kind: TestKind::PingPong,
                    proto: Proto::Udp,
                    block: 1,
                    outstanding: Some(2),
                    ..ok.clone()
                },
                "outstanding",
            ),
        ];
        for (s, word) in cases {
            let e = s.validate().expect_err("must be refused");
            assert!(e.contains(word), "{e} lacks {word}");
        }
    }
}

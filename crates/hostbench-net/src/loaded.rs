//! Round trips under load (sockperf's under-load mode): the client sends a stream of
//! `block`-byte messages on a fixed schedule (message k is due k × gap after the start, gap =
//! block × 8 / rate), and the server returns every `reply_every`-th one unchanged.
//!
//! A reply's round trip is timed from when its message was *due*, not from when it left. A sender
//! stalled behind a full socket buffer, or woken late, would otherwise send late and time only the
//! short rest, hiding the stall (coordinated omission). The time from the actual send is kept too
//! (`uncorrected`: what sockperf reports), and so is each flagged message's lateness, so a gap
//! between the two figures is explained rather than guessed at.
//!
//! One thread per stream both sends and collects replies, busy-polling its non-blocking socket
//! between messages, as sockperf's client does: a reply is seen the moment it lands rather than a
//! scheduler wake-up later (several microseconds in a VM, as much as a loopback round trip), and a
//! message leaves when it is due. It costs the client one CPU. Each pass yields the CPU
//! (`sched_yield`), so a server pinned to the same core (loopback) runs as soon as it has work.

use std::io::{self, Read, Write};
use std::net::{TcpStream, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use hostbench_core::histogram::LatencyHist;

use crate::stream::payload;
use crate::udp::{self, get_header, put_header, Tracker, HELLO_SEQ};
use crate::wire::StreamReport;

/// Actual send times are kept for this many flagged messages back; a reply later than that is
/// timed from its due time only.
const RING: usize = 1 << 14;
/// Most messages sent back to back, when behind, before the replies are looked at.
const BURST: u32 = 8;
/// A sender that sent fewer than this share of the messages due by the end could not offer the
/// load: the figure would time the sender, not the path.
/// (The diagnosis names such a record's `sender_behind` by the same share.)
pub const KEEP_UP: f64 = hostbench_core::model::KEPT_SCHEDULE;

/// The client's socket for one stream.
#[derive(Clone, Copy)]
pub enum Conn<'a> {
    Udp(&'a UdpSocket),
    Tcp(&'a TcpStream),
}

impl Conn<'_> {
    fn fd(&self) -> RawFd {
        match self {
            Conn::Udp(s) => s.as_raw_fd(),
            Conn::Tcp(s) => s.as_raw_fd(),
        }
    }
    fn set_nonblocking(&self) -> io::Result<()> {
        match self {
            Conn::Udp(s) => s.set_nonblocking(true),
            Conn::Tcp(s) => {
                s.set_nodelay(true)?;
                s.set_nonblocking(true)
            }
        }
    }
    fn send(&self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Conn::Udp(s) => s.send(buf),
            Conn::Tcp(mut s) => s.write(buf),
        }
    }
}

/// What one stream measured.
#[derive(Debug, Clone, Default)]
pub struct LoadReport {
    /// Round trips from each timed message's due time (coordinated-omission corrected).
    pub corrected: LatencyHist,
    /// Round trips from each timed message's actual send.
    pub uncorrected: LatencyHist,
    /// How late each timed message left (actual send − due).
    pub lateness: LatencyHist,
    /// Messages due by the end of the sending phase.
    pub scheduled: u64,
    /// Messages sent (whole).
    pub sent: u64,
    pub sent_bytes: u64,
    /// Replies the messages sent asked for.
    pub expected_replies: u64,
    pub replies: u64,
    pub duplicate_replies: u64,
    /// The largest lateness of any message, timed or not.
    pub max_behind_ns: u64,
    /// Length of the sending phase.
    pub seconds: f64,
}

impl LoadReport {
    /// Fold another stream's report into this one.
    pub fn merge(&mut self, o: &LoadReport) {
        self.corrected.merge(&o.corrected);
        self.uncorrected.merge(&o.uncorrected);
        self.lateness.merge(&o.lateness);
        self.scheduled += o.scheduled;
        self.sent += o.sent;
        self.sent_bytes += o.sent_bytes;
        self.expected_replies += o.expected_replies;
        self.replies += o.replies;
        self.duplicate_replies += o.duplicate_replies;
        self.max_behind_ns = self.max_behind_ns.max(o.max_behind_ns);
        self.seconds = self.seconds.max(o.seconds);
    }

    /// Payload bit/s actually offered.
    pub fn sent_bps(&self) -> f64 {
        self.sent_bytes as f64 * 8.0 / self.seconds.max(1e-9)
    }

    /// What the sender sent, as a throughput sender reports it.
    pub fn sent_report(&self) -> crate::wire::SentReport {
        crate::wire::SentReport {
            bytes: self.sent_bytes,
            datagrams: self.sent,
        }
    }

    /// Did the sender keep its schedule (see [`KEEP_UP`])?
    pub fn kept_up(&self) -> bool {
        self.sent as f64 >= KEEP_UP * self.scheduled as f64
    }
}

/// The schedule of one stream: message k is due `k × gap` ns after the start.
struct Schedule {
    gap: f64,
    every: u64,
}

impl Schedule {
    fn due(&self, seq: u64) -> u64 {
        (seq as f64 * self.gap) as u64
    }
    fn timed(&self, seq: u64) -> bool {
        seq.is_multiple_of(self.every)
    }
}

/// The reply side of the client: checks each reply against the schedule and times it.
struct Replies<'a> {
    tag: u64,
    sched: &'a Schedule,
    ring: Vec<(u64, u64)>,
    seen: Vec<u64>,
    rep: LoadReport,
}

impl Replies<'_> {
    fn reply(&mut self, msg: &[u8], now_ns: u64, sent: u64) -> io::Result<()> {
        let bad = |why: String| Err(io::Error::new(io::ErrorKind::InvalidData, why));
        let Some((tag, seq, due)) = get_header(msg) else {
            return bad(format!(
                "a {}-byte reply is shorter than its header",
                msg.len()
            ));
        };
        if tag != self.tag || seq >= sent || !self.sched.timed(seq) || due != self.sched.due(seq) {
            return bad(format!(
                "reply {seq} does not match a message that asked for one"
            ));
        }
        let k = seq / self.sched.every;
        let (w, b) = ((k / 64) as usize, k % 64);
        if self.seen.len() <= w {
            self.seen.resize(w + 1, 0);
        }
        if self.seen[w] & (1 << b) != 0 {
            self.rep.duplicate_replies += 1;
            return Ok(());
        }
        self.seen[w] |= 1 << b;
        self.rep.replies += 1;
        self.rep.corrected.record_ns(now_ns.saturating_sub(due));
        let (ring_seq, actual) = self.ring[k as usize % RING];
        if ring_seq == seq {
            self.rep
                .uncorrected
                .record_ns(now_ns.saturating_sub(actual));
            self.rep.lateness.record_ns(actual.saturating_sub(due));
        }
        Ok(())
    }
}

/// Wait until `fd` has one of `events` or `ns` nanoseconds passed.
fn wait(fd: RawFd, events: i16, ns: u64) -> io::Result<()> {
    let mut p = libc::pollfd {
        fd,
        events,
        revents: 0,
    };
    let ts = libc::timespec {
        tv_sec: (ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: one valid pollfd, a valid timespec, no signal mask.
    let r = unsafe { libc::ppoll(&mut p, 1, &ts, std::ptr::null()) };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
    Ok(())
}

/// Drive one stream: send `block`-byte messages at `rate_bps` until `stop`, time the replies to
/// every `reply_every`-th, then wait up to `drain` for the replies still in flight (TCP: until
/// the server closes after its last reply).
pub fn drive(
    conn: Conn<'_>,
    tag: u64,
    block: usize,
    rate_bps: f64,
    reply_every: u32,
    stop: Instant,
    drain: Duration,
) -> io::Result<LoadReport> {
    conn.set_nonblocking()?;
    let sched = Schedule {
        gap: block as f64 * 8.0 / rate_bps * 1e9,
        every: u64::from(reply_every.max(1)),
    };
    let mut out = payload(block, 0x94d0_49bb_1331_11eb);
    let mut r = Replies {
        tag,
        sched: &sched,
        ring: vec![(u64::MAX, 0); RING],
        seen: Vec::new(),
        rep: LoadReport::default(),
    };
    let fd = conn.fd();
    // TCP replies arrive as a byte stream: whole messages are cut from `acc`.
    let mut acc: Vec<u8> = Vec::with_capacity(block * 4);
    let mut buf = vec![0u8; (block + 1).max(64 << 10)];
    let t0 = Instant::now();
    let ns = |t: Instant| t.duration_since(t0).as_nanos() as u64;
    let stop_ns = stop.saturating_duration_since(t0).as_nanos() as u64;
    let give_up_ns = stop_ns + drain.as_nanos() as u64;
    let (mut seq, mut off): (u64, Option<usize>) = (0, None);
    // Messages sent back to back without looking for replies (see below).
    let mut burst = 0u32;
    loop {
        let now = ns(Instant::now());
        if off.is_none() {
            if now >= stop_ns {
                break;
            }
            let due = sched.due(seq);
            if now >= due {
                r.rep.max_behind_ns = r.rep.max_behind_ns.max(now - due);
                put_header(&mut out, tag, seq, due);
                if sched.timed(seq) {
                    r.ring[(seq / sched.every) as usize % RING] = (seq, now);
                }
                off = Some(0);
            }
        } else if now >= give_up_ns {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the server stopped reading the stream",
            ));
        }
        let mut blocked = false;
        if let Some(o) = off {
            match conn.send(&out[o..]) {
                Ok(n) if o + n == block => {
                    seq += 1;
                    r.rep.sent_bytes += block as u64;
                    off = None;
                    // Behind schedule, the next message goes out at once: a reply waits a
                    // few sends (never more than BURST) rather than every send waiting for
                    // a look at the socket, which near the sender's limit would cap the load.
                    if burst < BURST && sched.due(seq) <= ns(Instant::now()) {
                        burst += 1;
                        continue;
                    }
                    burst = 0;
                }
                Ok(n) => off = Some(o + n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => blocked = true,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // UDP: an ICMP error from an earlier datagram, or a full device queue; the
                // datagram did not leave and is retried on the next pass.
                Err(e)
                    if matches!(conn, Conn::Udp(_))
                        && (e.kind() == io::ErrorKind::ConnectionRefused
                            || e.raw_os_error() == Some(libc::ENOBUFS)) =>
                {
                    blocked = true
                }
                Err(e) => return Err(e),
            }
        }
        collect(conn, &mut r, &mut acc, &mut buf, block, t0, seq)?;
        if off.is_some() {
            if blocked {
                wait(fd, libc::POLLIN | libc::POLLOUT, 1_000_000)?;
            }
            continue;
        }
        // Yield rather than spin bare: alone on its CPU this returns at once, but a server
        // pinned to the same CPU (loopback) runs the moment it has work instead of waiting
        // for the scheduler to preempt us, and its socket does not overflow.
        std::thread::yield_now();
    }
    r.rep.sent = seq;
    r.rep.scheduled = (stop_ns as f64 / sched.gap).ceil() as u64;
    r.rep.seconds = stop_ns as f64 / 1e9;
    r.rep.expected_replies = seq.div_ceil(sched.every);
    // Replies still in flight.
    if let Conn::Tcp(s) = conn {
        s.shutdown(std::net::Shutdown::Write)?;
    }
    loop {
        let now = ns(Instant::now());
        if r.rep.replies >= r.rep.expected_replies || now >= give_up_ns {
            break;
        }
        if collect(conn, &mut r, &mut acc, &mut buf, block, t0, seq)? {
            break;
        }
        wait(fd, libc::POLLIN, (give_up_ns - now).min(10_000_000))?;
    }
    Ok(r.rep)
}

/// Take every reply waiting on the socket; true once a TCP server has closed.
fn collect(
    conn: Conn<'_>,
    r: &mut Replies<'_>,
    acc: &mut Vec<u8>,
    buf: &mut [u8],
    block: usize,
    t0: Instant,
    sent: u64,
) -> io::Result<bool> {
    loop {
        let got = match conn {
            Conn::Udp(s) => s.recv(buf),
            Conn::Tcp(mut s) => s.read(buf),
        };
        let now = Instant::now().duration_since(t0).as_nanos() as u64;
        match got {
            Ok(0) if matches!(conn, Conn::Tcp(_)) => return Ok(true),
            Ok(n) => match conn {
                Conn::Udp(_) => r.reply(&buf[..n], now, sent)?,
                Conn::Tcp(_) => {
                    acc.extend_from_slice(&buf[..n]);
                    let whole = acc.len() / block * block;
                    for m in acc[..whole].chunks_exact(block) {
                        r.reply(m, now, sent)?;
                    }
                    acc.drain(..whole);
                }
            },
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e)
                if matches!(conn, Conn::Udp(_)) && e.kind() == io::ErrorKind::ConnectionRefused => {
            }
            Err(e) => return Err(e),
        }
    }
}

/// Server, UDP: return every datagram whose sequence number is a multiple of `reply_every`
/// until `done`; the load stream's loss, reordering and jitter are counted as a throughput
/// receiver counts them. Returns (what arrived, replies sent).
pub fn reflect_udp(
    sock: &UdpSocket,
    tag: u64,
    block: usize,
    reply_every: u32,
    t0: Instant,
    done: &AtomicBool,
) -> io::Result<(StreamReport, u64)> {
    let every = u64::from(reply_every.max(1));
    let mut buf = vec![0u8; block + 1];
    let mut t = Tracker::new();
    let mut replies = 0u64;
    sock.set_read_timeout(Some(Duration::from_millis(20)))?;
    while !done.load(Ordering::Acquire) {
        match sock.recv(&mut buf) {
            Ok(n) => {
                let now = Instant::now().duration_since(t0).as_nanos() as u64;
                match get_header(&buf[..n]) {
                    Some((tg, HELLO_SEQ, _)) if tg == tag => udp::ack(sock, tag)?,
                    Some((tg, seq, due)) if tg == tag => {
                        t.datagram(n, seq, due, now);
                        if seq.is_multiple_of(every) && sock.send(&buf[..n]).is_ok() {
                            replies += 1;
                        }
                    }
                    _ => t.foreign(),
                }
            }
            Err(e) if udp::is_timeout(&e) || e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {}
            Err(e) => return Err(e),
        }
    }
    Ok((t.finish(), replies))
}

/// Server, TCP: read `block`-byte messages to EOF and write back every one whose sequence number
/// is a multiple of `reply_every`. Returns (messages, replies).
pub fn reflect_tcp(
    sock: &TcpStream,
    tag: u64,
    block: usize,
    reply_every: u32,
    idle: Duration,
) -> io::Result<(u64, u64)> {
    sock.set_nodelay(true)?;
    sock.set_read_timeout(Some(idle))?;
    let every = u64::from(reply_every.max(1));
    let mut msg = vec![0u8; block];
    let (mut r, mut w) = (sock, sock);
    let (mut messages, mut replies) = (0u64, 0u64);
    loop {
        // EOF at a message boundary is the end; inside one, a broken stream.
        let mut have = 0;
        while have < block {
            match r.read(&mut msg[have..]) {
                Ok(0) if have == 0 => return Ok((messages, replies)),
                Ok(0) => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the stream ended inside a message",
                    ))
                }
                Ok(n) => have += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        let Some((_, seq, _)) = get_header(&msg).filter(|h| h.0 == tag) else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "a message without this session's tag",
            ));
        };
        messages += 1;
        if seq.is_multiple_of(every) {
            w.write_all(&msg)?;
            replies += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;
    use std::sync::Arc;

    #[test]
    fn udp_under_load_times_every_reply_it_asked_for() {
        let (srv, _) = udp::bind("127.0.0.1:0".parse().expect("addr"), 1 << 20).expect("bind");
        let (cli, _) = udp::bind("127.0.0.1:0".parse().expect("addr"), 1 << 20).expect("bind");
        let addr = srv.local_addr().expect("addr");
        let done = Arc::new(AtomicBool::new(false));
        let d2 = done.clone();
        let t0 = Instant::now();
        let server = std::thread::spawn(move || {
            udp::accept_hello(&srv, 9, Duration::from_secs(5)).expect("hello");
            reflect_udp(&srv, 9, 200, 4, t0, &d2)
        });
        udp::hello(&cli, addr, 9, Duration::from_secs(5)).expect("hello");
        // 200-byte messages at 16 Mbit/s: 10 000 per second, for 0.2 s.
        let stop = Instant::now() + Duration::from_millis(200);
        let rep = drive(
            Conn::Udp(&cli),
            9,
            200,
            16e6,
            4,
            stop,
            Duration::from_millis(300),
        )
        .expect("drive");
        done.store(true, Ordering::Release);
        let (seen, replied) = server.join().expect("join").expect("reflect");
        // (How many left depends on how much CPU the test got: not asserted.)
        assert!(rep.sent > 0 && rep.sent <= rep.scheduled, "{rep:?}");
        assert_eq!(rep.expected_replies, rep.sent.div_ceil(4));
        assert_eq!(
            seen.datagrams, rep.sent,
            "loopback loses nothing at 16 Mbit/s"
        );
        assert_eq!(replied, rep.expected_replies);
        assert_eq!(rep.replies, replied);
        assert_eq!(rep.corrected.count(), rep.replies);
        assert_eq!(rep.uncorrected.count(), rep.replies);
        // Timed from the due time, a round trip is never shorter than from the actual send.
        assert!(rep.corrected.percentile_ns(50.0) >= rep.uncorrected.percentile_ns(50.0));
    }

    #[test]
    fn tcp_under_load_counts_messages_and_replies_exactly() {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let c = TcpStream::connect(l.local_addr().expect("addr")).expect("connect");
        let (s, _) = l.accept().expect("accept");
        let server = std::thread::spawn(move || reflect_tcp(&s, 5, 100, 3, Duration::from_secs(5)));
        let stop = Instant::now() + Duration::from_millis(150);
        let rep =
            drive(Conn::Tcp(&c), 5, 100, 8e6, 3, stop, Duration::from_secs(5)).expect("drive");
        let (messages, replies) = server.join().expect("join").expect("reflect");
        assert_eq!(messages, rep.sent);
        assert_eq!(replies, rep.sent.div_ceil(3));
        assert_eq!(rep.replies, replies);
    }

    #[test]
    fn a_stall_counts_against_the_corrected_figure_only() {
        // A server that holds every reply back 20 ms once: corrected and uncorrected both see
        // it for that message; a sender that cannot keep up is reported as such.
        let r = LoadReport {
            scheduled: 100,
            sent: 90,
            ..LoadReport::default()
        };
        assert!(!r.kept_up());
        let sched = Schedule {
            gap: 1000.0,
            every: 10,
        };
        let mut rep = Replies {
            tag: 1,
            sched: &sched,
            ring: vec![(u64::MAX, 0); RING],
            seen: Vec::new(),
            rep: LoadReport::default(),
        };
        // Message 20 was due at 20 µs but left at 50 µs; its reply came at 60 µs.
        rep.ring[2] = (20, 50_000);
        let mut m = vec![0u8; 64];
        put_header(&mut m, 1, 20, sched.due(20));
        rep.reply(&m, 60_000, 100).expect("reply");
        assert_eq!(rep.rep.corrected.percentile_ns(50.0), 40_000);
        assert_eq!(rep.rep.uncorrected.percentile_ns(50.0), 10_000);
        assert_eq!(rep.rep.lateness.percentile_ns(50.0), 30_000);
        // The same reply again is a duplicate; one to an untimed message is refused.
        rep.reply(&m, 61_000, 100).expect("duplicate");
        assert_eq!(rep.rep.duplicate_replies, 1);
        put_header(&mut m, 1, 21, sched.due(21));
        assert!(rep.reply(&m, 62_000, 100).is_err());
    }
}

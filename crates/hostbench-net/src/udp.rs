//! UDP data paths: the datagram header, the session handshake, a paced sender, a receiver that
//! counts loss, reordering, duplicates and RFC 3550 jitter, and ping-pong.
//!
//! What counts is what the receiver got: an unpaced sender on loopback "achieves" twice what
//! arrives (research notes: 51–60 % loss at `-b 0`). Receive buffers are enlarged (SO_RCVBUF,
//! then SO_RCVBUFFORCE as root) because the 208 KiB default drops bursts at a few Gbit/s.

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use hostbench_core::histogram::LatencyHist;

pub use crate::stream::HEADER_BYTES;
use crate::stream::{payload, Stop};
use crate::wire::{SentReport, StreamReport};

/// Sequence number of handshake datagrams.
pub(crate) const HELLO_SEQ: u64 = u64::MAX;
/// Receive buffer asked for on every UDP socket unless the test names one.
pub const DEFAULT_RCVBUF: usize = 8 << 20;
/// How long a receiver waits for more datagrams once the sender said it is done. The "done"
/// message travels the control connection over the same path after the last datagram, through
/// the same queues in the same order, so what was sent has normally arrived by then; the quiet
/// period only catches stragglers. It is paid by every test, so by every trial of a capacity
/// search: 200 ms made a 100 ms trial cost 300.
pub const DRAIN: Duration = Duration::from_millis(30);
/// Duplicate tracking keeps one bit per sequence number up to this many (16 MiB of bits).
const DUP_TRACK: u64 = 1 << 27;

pub(crate) fn put_header(buf: &mut [u8], tag: u64, seq: u64, send_ns: u64) {
    buf[0..8].copy_from_slice(&tag.to_le_bytes());
    buf[8..16].copy_from_slice(&seq.to_le_bytes());
    buf[16..24].copy_from_slice(&send_ns.to_le_bytes());
}

pub(crate) fn get_header(buf: &[u8]) -> Option<(u64, u64, u64)> {
    if buf.len() < HEADER_BYTES {
        return None;
    }
    let word = |i: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&buf[i..i + 8]);
        u64::from_le_bytes(w)
    };
    Some((word(0), word(8), word(16)))
}

/// Enlarge a socket's buffers; returns the receive buffer the kernel granted (it reports
/// double the request, as `socket(7)` documents).
pub fn size_buffers(sock: &socket2::Socket, want: usize) -> usize {
    let _ = sock.set_send_buffer_size(want);
    let _ = sock.set_recv_buffer_size(want);
    let granted = sock.recv_buffer_size().unwrap_or(0);
    if granted < want {
        // Beyond net.core.rmem_max only CAP_NET_ADMIN may go; try, and keep what we got.
        let v = want.min(i32::MAX as usize) as libc::c_int;
        // SAFETY: a valid fd and a pointer to an int of the size passed.
        unsafe {
            use std::os::fd::AsRawFd;
            libc::setsockopt(
                sock.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVBUFFORCE,
                (&v as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            );
        }
    }
    sock.recv_buffer_size().unwrap_or(granted)
}

/// A UDP socket bound to `local` with enlarged buffers.
pub fn bind(local: SocketAddr, bufsize: usize) -> io::Result<(UdpSocket, usize)> {
    let domain = socket2::Domain::for_address(local);
    let s = socket2::Socket::new(domain, socket2::Type::DGRAM, Some(socket2::Protocol::UDP))?;
    let granted = size_buffers(&s, bufsize);
    s.bind(&local.into())?;
    Ok((s.into(), granted))
}

/// Client side of the handshake: announce `tag` to the server's port until it acknowledges,
/// which also tells the server our address for the other direction.
pub fn hello(sock: &UdpSocket, server: SocketAddr, tag: u64, within: Duration) -> io::Result<()> {
    sock.connect(server)?;
    let mut h = [0u8; HEADER_BYTES];
    put_header(&mut h, tag, HELLO_SEQ, 0);
    let deadline = Instant::now() + within;
    let mut buf = [0u8; 64];
    while Instant::now() < deadline {
        sock.send(&h)?;
        sock.set_read_timeout(Some(Duration::from_millis(50)))?;
        match sock.recv(&mut buf) {
            Ok(n) if get_header(&buf[..n]) == Some((tag, HELLO_SEQ, 1)) => return Ok(()),
            Ok(_) => {}
            Err(e) if is_timeout(&e) || e.kind() == io::ErrorKind::ConnectionRefused => {}
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::new(
        io::ErrorKind::TimedOut,
        format!("no UDP handshake reply from {server}"),
    ))
}

/// Server side: wait for a client's hello carrying `tag`, connect to its source and ack.
pub fn accept_hello(sock: &UdpSocket, tag: u64, within: Duration) -> io::Result<SocketAddr> {
    let deadline = Instant::now() + within;
    let mut buf = [0u8; 64];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "no UDP handshake from the client",
            ));
        }
        sock.set_read_timeout(Some(left))?;
        match sock.recv_from(&mut buf) {
            Ok((n, from))
                if get_header(&buf[..n]).is_some_and(|h| h.0 == tag && h.1 == HELLO_SEQ) =>
            {
                sock.connect(from)?;
                ack(sock, tag)?;
                return Ok(from);
            }
            Ok(_) => {}
            Err(e) if is_timeout(&e) => {}
            Err(e) => return Err(e),
        }
    }
}

pub(crate) fn ack(sock: &UdpSocket, tag: u64) -> io::Result<()> {
    let mut h = [0u8; HEADER_BYTES];
    put_header(&mut h, tag, HELLO_SEQ, 1);
    sock.send(&h).map(|_| ())
}

pub(crate) fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

/// Send `block`-byte datagrams on a connected socket until `stop`, paced to `rate_bps` of
/// datagram payload when given. Pacing is by schedule (datagram k leaves at k × size / rate
/// after the start), so a late wake-up is caught up rather than lost from the rate.
pub fn send(
    sock: &UdpSocket,
    tag: u64,
    block: usize,
    rate_bps: Option<f64>,
    stop: Stop,
    t0: Instant,
) -> io::Result<SentReport> {
    let mut buf = payload(block, 0xd1b5_4a32_d192_ed03);
    let gap_ns = rate_bps.map(|r| block as f64 * 8.0 / r * 1e9);
    let start = Instant::now();
    let mut rep = SentReport::default();
    loop {
        let now = Instant::now();
        match stop {
            Stop::At(t) if now >= t => break,
            Stop::Bytes(b) | Stop::Count(b) if rep.bytes >= b => break,
            _ => {}
        }
        if let Some(gap) = gap_ns {
            let due = start + Duration::from_nanos((rep.datagrams as f64 * gap) as u64);
            if due > now {
                let wait = due - now;
                if wait > Duration::from_micros(200) {
                    std::thread::sleep(wait - Duration::from_micros(100));
                } else {
                    std::thread::yield_now();
                }
                continue;
            }
        }
        let send_ns = Instant::now().duration_since(t0).as_nanos() as u64;
        put_header(&mut buf, tag, rep.datagrams, send_ns);
        match sock.send(&buf) {
            Ok(n) => {
                rep.datagrams += 1;
                rep.bytes += n as u64;
            }
            // ICMP "port unreachable" from an earlier datagram, or a full queue: the datagram
            // was not sent; loss is the receiver's business, so just go on.
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::ConnectionRefused | io::ErrorKind::Interrupted
                ) || e.raw_os_error() == Some(libc::ENOBUFS) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(rep)
}

/// Receive state for one stream.
pub(crate) struct Tracker {
    rep: StreamReport,
    next: u64,
    seen: Vec<u64>,
    prev_transit: Option<i128>,
    jitter_ns: f64,
}

impl Tracker {
    pub(crate) fn new() -> Self {
        Self {
            rep: StreamReport::default(),
            next: 0,
            seen: Vec::new(),
            prev_transit: None,
            jitter_ns: 0.0,
        }
    }

    /// Mark `seq` seen; false if it was already.
    fn first_sighting(&mut self, seq: u64) -> bool {
        if seq >= DUP_TRACK {
            return true;
        }
        let (w, b) = ((seq / 64) as usize, seq % 64);
        if self.seen.len() <= w {
            self.seen.resize(w + 1, 0);
        }
        let fresh = self.seen[w] & (1 << b) == 0;
        self.seen[w] |= 1 << b;
        fresh
    }

    pub(crate) fn datagram(&mut self, len: usize, seq: u64, send_ns: u64, arrival_ns: u64) {
        if !self.first_sighting(seq) {
            self.rep.duplicates += 1;
            return;
        }
        if self.rep.datagrams == 0 {
            self.rep.first_ns = arrival_ns;
            self.rep.first_chunk = len as u64;
        }
        self.rep.last_ns = arrival_ns;
        self.rep.datagrams += 1;
        self.rep.bytes += len as u64;
        match seq.cmp(&self.next) {
            std::cmp::Ordering::Equal => self.next = seq + 1,
            std::cmp::Ordering::Greater => {
                self.rep.gaps += 1;
                self.next = seq + 1;
            }
            std::cmp::Ordering::Less => self.rep.out_of_order += 1,
        }
        // RFC 3550 §6.4.1: J += (|D| − J) / 16 over consecutive arrivals; the clocks' offset
        // cancels in D, so sender and receiver need not be synchronised.
        let transit = arrival_ns as i128 - send_ns as i128;
        if let Some(prev) = self.prev_transit {
            let d = (transit - prev).abs() as f64;
            self.jitter_ns += (d - self.jitter_ns) / 16.0;
        }
        self.prev_transit = Some(transit);
    }

    /// A datagram of another session, ignored but counted.
    pub(crate) fn foreign(&mut self) {
        self.rep.foreign += 1;
    }

    pub(crate) fn finish(mut self) -> StreamReport {
        self.rep.jitter_s = self.jitter_ns / 1e9;
        self.rep
    }
}

/// Receive datagrams until `done` is set and the stream has been quiet for `drain` (or `done`
/// plus one second), or until nothing arrives for `idle`.
pub fn receive(
    sock: &UdpSocket,
    tag: u64,
    block: usize,
    t0: Instant,
    done: &AtomicBool,
    drain: Duration,
    idle: Duration,
) -> io::Result<StreamReport> {
    let mut buf = vec![0u8; block.max(HEADER_BYTES) + 1];
    let mut t = Tracker::new();
    sock.set_read_timeout(Some(Duration::from_millis(20)))?;
    let mut last_rx = Instant::now();
    let mut done_at: Option<Instant> = None;
    loop {
        match sock.recv(&mut buf) {
            Ok(n) => {
                let now = Instant::now();
                last_rx = now;
                match get_header(&buf[..n]) {
                    Some((tg, HELLO_SEQ, _)) if tg == tag => ack(sock, tag)?,
                    Some((tg, seq, send_ns)) if tg == tag => {
                        t.datagram(n, seq, send_ns, now.duration_since(t0).as_nanos() as u64)
                    }
                    _ => t.rep.foreign += 1,
                }
            }
            Err(e) if is_timeout(&e) || e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {}
            Err(e) => return Err(e),
        }
        let now = Instant::now();
        if done.load(Ordering::Acquire) {
            let at = *done_at.get_or_insert(now);
            if now.duration_since(last_rx) >= drain
                || now.duration_since(at) >= Duration::from_secs(1)
            {
                break;
            }
        } else if now.duration_since(last_rx) >= idle {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("no UDP data for {} s", idle.as_secs()),
            ));
        }
    }
    Ok(t.finish())
}

/// Echo datagrams back to the connected peer until `done`; returns how many.
pub fn echo(sock: &UdpSocket, block: usize, done: &AtomicBool) -> io::Result<u64> {
    let mut buf = vec![0u8; block.max(1) + 1];
    sock.set_read_timeout(Some(Duration::from_millis(50)))?;
    let mut n_echoed = 0u64;
    while !done.load(Ordering::Acquire) {
        match sock.recv(&mut buf) {
            Ok(n) => {
                // A late handshake datagram is acknowledged, not echoed as a message.
                if let Some((tag, HELLO_SEQ, 0)) =
                    get_header(&buf[..n]).filter(|_| n == HEADER_BYTES)
                {
                    let _ = ack(sock, tag);
                    continue;
                }
                if sock.send(&buf[..n]).is_ok() {
                    n_echoed += 1;
                }
            }
            Err(e) if is_timeout(&e) || e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n_echoed)
}

/// Ping-pong `msg`-byte datagrams on a connected socket. A reply must match the message
/// (its first bytes carry the round number); one that does not arrive within `wait` counts as
/// lost and the round is retried with a new number. Returns (rounds, lost).
pub fn ping_pong(
    sock: &UdpSocket,
    msg: usize,
    stop: Stop,
    wait: Duration,
    hist: &mut LatencyHist,
) -> io::Result<(u64, u64)> {
    let mut out = payload(msg.max(1), 0x2545_f491_4f6c_dd1d);
    let mut back = vec![0u8; msg.max(1) + 1];
    let tagged = msg.min(8);
    let (mut rounds, mut lost, mut id) = (0u64, 0u64, 0u64);
    sock.set_read_timeout(Some(wait))?;
    loop {
        match stop {
            Stop::At(t) if Instant::now() >= t => break,
            Stop::Count(n) | Stop::Bytes(n) if rounds >= n => break,
            _ => {}
        }
        out[..tagged].copy_from_slice(&id.to_le_bytes()[..tagged]);
        let t = Instant::now();
        sock.send(&out)?;
        loop {
            match sock.recv(&mut back) {
                Ok(n) if n == out.len() && back[..n] == out[..] => {
                    hist.record_ns(t.elapsed().as_nanos() as u64);
                    rounds += 1;
                    break;
                }
                // A stale reply to an earlier, timed-out round: keep waiting for this one.
                Ok(_) => {
                    if t.elapsed() >= wait {
                        lost += 1;
                        break;
                    }
                }
                Err(e) if is_timeout(&e) => {
                    lost += 1;
                    break;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        id = id.wrapping_add(1);
        if lost > 1000 && rounds == 0 {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "no UDP ping-pong reply at all",
            ));
        }
    }
    Ok((rounds, lost))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn tracker_counts_gaps_reordering_duplicates_and_jitter() {
        let mut t = Tracker::new();
        // 0 1 3 2 2 5: one gap at 3 (2 missing then late), one at 5, one duplicate.
        for (i, seq) in [0u64, 1, 3, 2, 2, 5].into_iter().enumerate() {
            // Constant transit except seq 3, which is 1000 ns slower.
            let extra = if seq == 3 { 1000 } else { 0 };
            t.datagram(
                100,
                seq,
                i as u64 * 10_000,
                i as u64 * 10_000 + 50_000 + extra,
            );
        }
        let r = t.finish();
        assert_eq!(r.datagrams, 5);
        assert_eq!(r.bytes, 500);
        assert_eq!(r.gaps, 2);
        assert_eq!(r.out_of_order, 1);
        assert_eq!(r.duplicates, 1);
        // |D| = 1000 then 1000, then 0, 0: J = 62.5, 121.1, 113.6, 106.5 ns.
        let mut j = 0.0f64;
        for d in [0.0, 1000.0, 1000.0, 0.0] {
            j += (d - j) / 16.0;
        }
        assert!(
            (r.jitter_s * 1e9 - j).abs() < 1e-6,
            "{} vs {j}",
            r.jitter_s * 1e9
        );
    }

    #[test]
    fn paced_send_and_receive_over_loopback() {
        let (srv, _) = bind("127.0.0.1:0".parse().expect("addr"), 1 << 20).expect("bind");
        let (cli, _) = bind("127.0.0.1:0".parse().expect("addr"), 1 << 20).expect("bind");
        let addr = srv.local_addr().expect("addr");
        let done = Arc::new(AtomicBool::new(false));
        let t0 = Instant::now();
        let (d2, srv) = (done.clone(), Arc::new(srv));
        let s2 = srv.clone();
        let rx = std::thread::spawn(move || {
            accept_hello(&s2, 42, Duration::from_secs(5)).expect("hello");
            receive(
                &s2,
                42,
                1200,
                t0,
                &d2,
                Duration::from_millis(50),
                Duration::from_secs(5),
            )
        });
        hello(&cli, addr, 42, Duration::from_secs(5)).expect("hello");
        // 200 datagrams of 1200 B at 20 Mbit/s: about 0.1 s.
        let sent = send(&cli, 42, 1200, Some(20e6), Stop::Bytes(240_000), t0).expect("send");
        done.store(true, Ordering::Release);
        let got = rx.join().expect("join").expect("receive");
        assert_eq!(sent.datagrams, 200);
        assert!(got.datagrams <= 200 && got.datagrams >= 190, "{got:?}");
        // Paced: the 200 datagrams took close to 0.1 s, not a burst.
        let span = (got.last_ns - got.first_ns) as f64 / 1e9;
        assert!(span > 0.05, "span {span}");
    }

    #[test]
    fn udp_ping_pong_matches_replies() {
        let (srv, _) = bind("127.0.0.1:0".parse().expect("addr"), 1 << 20).expect("bind");
        let (cli, _) = bind("127.0.0.1:0".parse().expect("addr"), 1 << 20).expect("bind");
        let addr = srv.local_addr().expect("addr");
        let done = Arc::new(AtomicBool::new(false));
        let d2 = done.clone();
        let e = std::thread::spawn(move || {
            accept_hello(&srv, 7, Duration::from_secs(5)).expect("hello");
            echo(&srv, 1, &d2)
        });
        hello(&cli, addr, 7, Duration::from_secs(5)).expect("hello");
        let mut h = LatencyHist::new();
        let (rounds, lost) =
            ping_pong(&cli, 1, Stop::Count(300), Duration::from_secs(1), &mut h).expect("pp");
        done.store(true, Ordering::Release);
        assert_eq!(rounds, 300);
        assert_eq!(lost, 0);
        assert_eq!(e.join().expect("join").expect("echo"), 300);
    }
}

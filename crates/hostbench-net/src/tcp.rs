//! TCP data paths shared by client and server: bulk sender, counting receiver, echo and
//! ping-pong.
//!
//! A bulk test ends on the data path, not the control channel: the sender shuts down its write
//! side after its last block and the receiver reads to EOF, so every byte sent is counted and the
//! two sides' totals must agree exactly (iperf3 ends on the control channel and loses what is in
//! flight, #306/#382). Throughput is computed by the receiver from its own clock.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::{Duration, Instant};

use hostbench_core::histogram::LatencyHist;

use crate::wire::{SentReport, StreamReport};

pub use crate::stream::{payload, Stop};

/// Send blocks until `stop`, then shut down the write side. Returns what went out.
pub fn send(sock: &TcpStream, block: usize, stop: Stop) -> io::Result<SentReport> {
    let buf = payload(block, 0x9e37_79b9_7f4a_7c15);
    let mut sent = 0u64;
    let mut w = sock;
    loop {
        let n = match stop {
            Stop::At(t) => {
                if Instant::now() >= t {
                    break;
                }
                block
            }
            Stop::Bytes(total) | Stop::Count(total) => {
                if sent >= total {
                    break;
                }
                (total - sent).min(block as u64) as usize
            }
        };
        match w.write(&buf[..n]) {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::WriteZero,
                    "peer stopped reading",
                ))
            }
            Ok(k) => sent += k as u64,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    sock.shutdown(Shutdown::Write)?;
    Ok(SentReport {
        bytes: sent,
        datagrams: 0,
    })
}

/// Read to EOF with `block`-sized reads, timestamping the first and last read against `t0`.
/// `idle` bounds each wait, so a vanished peer ends the stream instead of hanging it.
pub fn receive(
    sock: &TcpStream,
    block: usize,
    t0: Instant,
    idle: Duration,
) -> io::Result<StreamReport> {
    sock.set_read_timeout(Some(idle))?;
    let mut buf = vec![0u8; block.max(1)];
    let mut r = sock;
    let mut rep = StreamReport::default();
    let mut last = t0;
    loop {
        match r.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                last = Instant::now();
                if rep.bytes == 0 {
                    rep.first_ns = last.duration_since(t0).as_nanos() as u64;
                    rep.first_chunk = n as u64;
                }
                rep.bytes += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    rep.last_ns = last.duration_since(t0).as_nanos() as u64;
    Ok(rep)
}

/// Echo everything back until EOF; returns the bytes echoed.
pub fn echo(sock: &TcpStream, block: usize, idle: Duration) -> io::Result<u64> {
    sock.set_nodelay(true)?;
    sock.set_read_timeout(Some(idle))?;
    let mut buf = vec![0u8; block.max(1)];
    let (mut r, mut w) = (sock, sock);
    let mut total = 0u64;
    loop {
        match r.read(&mut buf) {
            Ok(0) => return Ok(total),
            Ok(n) => {
                w.write_all(&buf[..n])?;
                total += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// Ping-pong `msg`-byte messages (TCP_NODELAY) with `outstanding` requests in flight (1: one
/// at a time; more: netperf's burst mode, a new request written for each reply read), recording
/// each request's time to its reply. Every reply is compared with what was sent, so a path that
/// returned nothing or something else fails. The caller keeps `outstanding × msg` within what
/// the socket buffers hold (`wire::MAX_IN_FLIGHT`): both ends write before they read.
pub fn ping_pong(
    sock: &TcpStream,
    msg: usize,
    outstanding: usize,
    stop: Stop,
    idle: Duration,
    hist: &mut LatencyHist,
) -> io::Result<u64> {
    sock.set_nodelay(true)?;
    sock.set_read_timeout(Some(idle))?;
    let mut out = payload(msg, 0x5851_f42d_4c95_7f2d);
    let mut back = vec![0u8; msg];
    let (mut r, mut w) = (sock, sock);
    let (mut rounds, mut written) = (0u64, 0u64);
    let mut in_flight: std::collections::VecDeque<Instant> =
        std::collections::VecDeque::with_capacity(outstanding.max(1));
    loop {
        let more = match stop {
            Stop::At(t) => Instant::now() < t,
            Stop::Count(n) | Stop::Bytes(n) => written < n,
        };
        if more {
            while in_flight.len() < outstanding.max(1)
                && !matches!(stop, Stop::Count(n) | Stop::Bytes(n) if written >= n)
            {
                // The first byte carries the request number, so a stale or lost reply cannot
                // pass.
                out[0] = written as u8;
                in_flight.push_back(Instant::now());
                w.write_all(&out)?;
                written += 1;
            }
        }
        let Some(t) = in_flight.pop_front() else {
            break;
        };
        r.read_exact(&mut back)?;
        hist.record_ns(t.elapsed().as_nanos() as u64);
        out[0] = rounds as u8;
        if back != out {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("round trip {rounds}: the echo differs from the message sent"),
            ));
        }
        rounds += 1;
    }
    sock.shutdown(Shutdown::Write)?;
    // Drain to EOF so the server's echo ends cleanly.
    let mut rest = [0u8; 64];
    while r.read(&mut rest)? > 0 {}
    Ok(rounds)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    fn pair() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let c = TcpStream::connect(l.local_addr().expect("addr")).expect("connect");
        let (s, _) = l.accept().expect("accept");
        (c, s)
    }

    #[test]
    fn receiver_counts_exactly_what_was_sent() {
        let (c, s) = pair();
        let t0 = Instant::now();
        let rx = std::thread::spawn(move || receive(&s, 1000, t0, Duration::from_secs(5)));
        let sent = send(&c, 1000, Stop::Bytes(1_234_567)).expect("send");
        let got = rx.join().expect("join").expect("receive");
        assert_eq!(sent.bytes, 1_234_567);
        assert_eq!(got.bytes, 1_234_567);
        assert!(got.first_chunk > 0 && got.last_ns >= got.first_ns);
    }

    #[test]
    fn ping_pong_counts_rounds_and_checks_echoes() {
        let (c, s) = pair();
        let srv = std::thread::spawn(move || echo(&s, 1, Duration::from_secs(5)));
        let mut h = LatencyHist::new();
        let n = ping_pong(&c, 1, 1, Stop::Count(500), Duration::from_secs(5), &mut h).expect("pp");
        assert_eq!(n, 500);
        assert_eq!(h.count(), 500);
        assert_eq!(srv.join().expect("join").expect("echo"), 500);
    }

    #[test]
    fn pipelined_ping_pong_keeps_requests_in_flight_and_drains_them() {
        let (c, s) = pair();
        let srv = std::thread::spawn(move || echo(&s, 64, Duration::from_secs(5)));
        let mut h = LatencyHist::new();
        let n =
            ping_pong(&c, 3, 16, Stop::Count(1000), Duration::from_secs(5), &mut h).expect("pp");
        assert_eq!(n, 1000);
        assert_eq!(h.count(), 1000);
        assert_eq!(srv.join().expect("join").expect("echo"), 3000);
    }

    #[test]
    fn a_wrong_echo_fails_the_ping_pong() {
        let (c, s) = pair();
        let srv = std::thread::spawn(move || {
            let mut b = [0u8; 4];
            let mut r = &s;
            r.read_exact(&mut b).expect("read");
            b[3] ^= 1;
            (&s).write_all(&b).expect("write");
        });
        let mut h = LatencyHist::new();
        let e = ping_pong(&c, 4, 1, Stop::Count(1), Duration::from_secs(5), &mut h)
            .expect_err("corrupted echo");
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        srv.join().expect("join");
    }
}

//! Connect, request, response, close (netperf's TCP_CRR): the cost of a short-lived connection,
//! which is what an HTTP/1.0 client or a health checker pays per request.
//!
//! The client connects, writes a `block`-byte request, reads the same bytes back, then reads to
//! EOF: the server closes first, after its response (HTTP/1.0's order). That puts TIME_WAIT on
//! the server, whose one listening port makes every 4-tuple distinct, and not on the client's
//! ephemeral ports, which a fast client would otherwise exhaust within seconds (28 k ports at
//! 60 s each is under 500 connections per second sustained). A transaction counts once the EOF
//! arrived; its time runs from before `connect` to then.
//!
//! The server's test port lives only for the test. A request must begin with the session tag's
//! bytes (as many as it has, up to 8), so a stray connection is closed without being counted.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use hostbench_core::histogram::LatencyHist;

use crate::stream::{payload, Stop};

/// How long a server connection may take to deliver its request: a stray connection must not
/// hold an accepting thread for the whole data timeout.
const REQUEST_WITHIN: Duration = Duration::from_secs(2);

/// The request every transaction of a session sends: the tag's bytes, then incompressible ones.
pub fn request(tag: u64, block: usize) -> Vec<u8> {
    let mut r = payload(block, 0x2127_599b_f432_5c37);
    let n = block.min(8);
    r[..n].copy_from_slice(&tag.to_le_bytes()[..n]);
    r
}

/// A listening socket for a test's connections, with a backlog deep enough that a burst of
/// connects from every pair is not refused. Accepting threads block in `accept`; [`wake`] ends
/// them.
pub fn listen(ip: std::net::IpAddr) -> io::Result<TcpListener> {
    crate::server::listen_with(SocketAddr::new(ip, 0), 1024)
}

/// Release `threads` accepting threads once `done` is set: each takes one of these empty
/// connections, sees `done` and returns.
pub fn wake(listener: &TcpListener, threads: usize) {
    if let Ok(addr) = listener.local_addr() {
        for _ in 0..threads {
            let _ = TcpStream::connect_timeout(&addr, Duration::from_millis(200));
        }
    }
}

/// Client: transactions on fresh connections to `addr` until `stop`. Returns how many completed.
pub fn client(
    addr: SocketAddr,
    tag: u64,
    block: usize,
    stop: Stop,
    idle: Duration,
    hist: &mut LatencyHist,
) -> io::Result<u64> {
    let req = request(tag, block);
    let mut back = vec![0u8; block];
    let mut done = 0u64;
    loop {
        match stop {
            Stop::At(t) if Instant::now() >= t => break,
            Stop::Count(n) | Stop::Bytes(n) if done >= n => break,
            _ => {}
        }
        let t = Instant::now();
        // A blocking connect, as netperf's: the server answered this session a moment ago, and
        // connect_timeout's non-blocking connect and poll would add two system calls to what
        // is measured.
        let mut s = TcpStream::connect(addr).map_err(|e| {
            if e.raw_os_error() == Some(libc::EADDRNOTAVAIL) {
                io::Error::new(
                    e.kind(),
                    format!(
                        "connect: no local port left after {done} transactions ({e}): sockets in TIME_WAIT hold them"
                    ),
                )
            } else {
                io::Error::new(e.kind(), format!("connect to {addr}: {e}"))
            }
        })?;
        s.set_nodelay(true)?;
        s.set_read_timeout(Some(idle))?;
        s.write_all(&req)?;
        s.read_exact(&mut back)?;
        if back != req {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("transaction {done}: the response differs from the request"),
            ));
        }
        let mut tail = [0u8; 1];
        if s.read(&mut tail)? != 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "the server sent more than the response",
            ));
        }
        hist.record_ns(t.elapsed().as_nanos() as u64);
        done += 1;
    }
    Ok(done)
}

/// What one accepting thread of the server did.
#[derive(Debug, Clone, Copy, Default)]
pub struct Served {
    /// Transactions answered.
    pub served: u64,
    /// Connections closed unanswered: no request in time, or not this session's.
    pub refused: u64,
}

/// Server: accept connections on `listener` until `done`, answer each request with its own
/// bytes and close. Several threads may share one listener.
pub fn serve(
    listener: &TcpListener,
    tag: u64,
    block: usize,
    done: &AtomicBool,
) -> io::Result<Served> {
    let want = request(tag, block);
    let n = block.min(8);
    let mut buf = vec![0u8; block];
    let mut out = Served::default();
    loop {
        let accepted = listener.accept();
        if done.load(Ordering::Acquire) {
            break;
        }
        let mut s = match accepted {
            Ok((s, _)) => s,
            // The peer gave up before we took it; another thread took it; a signal.
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::ConnectionAborted
                        | io::ErrorKind::Interrupted
                        | io::ErrorKind::ConnectionReset
                ) =>
            {
                continue
            }
            Err(e) => return Err(e),
        };
        let answered = (|| -> io::Result<bool> {
            // (Linux's accept does not pass the listener's flags on: the socket blocks.)
            s.set_nodelay(true)?;
            s.set_read_timeout(Some(REQUEST_WITHIN))?;
            s.read_exact(&mut buf)?;
            if buf[..n] != want[..n] {
                return Ok(false);
            }
            s.write_all(&buf)?;
            Ok(true)
        })();
        // Dropping the socket closes it: the server's FIN ends the transaction.
        drop(s);
        match answered {
            Ok(true) => out.served += 1,
            _ => out.refused += 1,
        }
    }
    Ok(out)
}

/// TCP sockets in TIME_WAIT in this network namespace (IPv4 and IPv6 share the count), from
/// `/proc/net/sockstat`: "TCP: inuse 5 orphan 0 tw 12 alloc 7 mem 1".
pub fn time_wait() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/net/sockstat").ok()?;
    parse_time_wait(&text)
}

fn parse_time_wait(sockstat: &str) -> Option<u64> {
    let line = sockstat.lines().find(|l| l.starts_with("TCP:"))?;
    let mut words = line.split_whitespace();
    while let Some(w) = words.next() {
        if w == "tw" {
            return words.next()?.parse().ok();
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transactions_are_counted_on_both_ends_and_strays_are_not() {
        let l = listen("127.0.0.1".parse().expect("ip")).expect("listen");
        let addr = l.local_addr().expect("addr");
        let done = AtomicBool::new(false);
        std::thread::scope(|sc| {
            let srv = sc.spawn(|| serve(&l, 77, 5, &done));
            // A stray connection with the wrong first bytes is closed unanswered.
            let mut stray = TcpStream::connect(addr).expect("stray");
            stray.write_all(b"HELLO").expect("write");
            let mut b = [0u8; 8];
            assert_eq!(stray.read(&mut b).unwrap_or(0), 0);
            let mut h = LatencyHist::new();
            let n = client(
                addr,
                77,
                5,
                Stop::Count(300),
                Duration::from_secs(5),
                &mut h,
            )
            .expect("client");
            done.store(true, Ordering::Release);
            wake(&l, 1);
            let s = srv.join().expect("join").expect("serve");
            assert_eq!(n, 300);
            assert_eq!(h.count(), 300);
            assert_eq!(s.served, 300);
            assert_eq!(s.refused, 1);
        });
    }

    #[test]
    fn time_wait_is_read_from_sockstat() {
        let text =
            "sockets: used 120\nTCP: inuse 5 orphan 0 tw 12 alloc 7 mem 1\nUDP: inuse 2 mem 0\n";
        assert_eq!(parse_time_wait(text), Some(12));
        assert_eq!(parse_time_wait("UDP: inuse 2\n"), None);
    }
}

//! `--reference`: the same case measured by iperf3 (throughput) or sockperf (ping-pong) with
//! matching parameters, so each record carries the reference tool's figure and the ratio. On
//! loopback both ends are started here; against a remote host (`net client --reference-port P`)
//! only the client runs here, against `iperf3 -s -p P` and `sockperf sr -p P+1` (with `--tcp` for
//! TCP ping-pong; TCP and UDP ports do not collide) that the user runs beside `net server`.
//!
//! iperf3 runs with `-P streams -l block` (`-u -b rate`, `-R`, `--bidir`) and whole seconds
//! (`-t` takes an integer); its receiver-side sum is the figure, as ours is. UDP gets `-w` with
//! the receive buffer hostbench asked for, so both receivers have the same room for bursts. sockperf reports
//! RTT/2 unless `--full-rtt` is given, so it is given; its smallest message is 14 bytes and it
//! runs one pair per process, which the record notes.

use std::net::{TcpListener, UdpSocket};
use std::time::Duration;

use hostbench_core::reference::{self as tools, Background, Better};
use hostbench_core::BenchError;

use crate::wire::{Direction, Proto};

/// A throughput case as iperf3 should run it.
#[derive(Debug, Clone, Copy)]
pub struct Iperf3Case {
    pub proto: Proto,
    pub direction: Direction,
    pub block: u64,
    pub streams: u32,
    pub rate_bps: Option<f64>,
    pub seconds: u64,
    pub bytes: Option<u64>,
    /// Socket buffer hostbench used (`-w`): asked for explicitly, or UDP's enlarged default.
    pub sockbuf: Option<u64>,
    /// The CPU hostbench pinned stream 0's two ends to (`None`: unpinned).
    pub cpu: Option<usize>,
}

/// Where the reference tool's server is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Peer {
    /// Started here, on 127.0.0.1, for the one case.
    Local,
    /// Already running on `host`: iperf3 on `port`, sockperf on `port + 1`.
    Remote { host: String, port: u16 },
}

impl Peer {
    /// The address the clients connect to.
    fn host(&self) -> &str {
        match self {
            Peer::Local => "127.0.0.1",
            Peer::Remote { host, .. } => host,
        }
    }
}

/// The sockperf port beside iperf3's `port` on a remote host.
pub fn sockperf_port(port: u16) -> Option<u16> {
    port.checked_add(1)
}

/// A reference figure with the command that produced it.
#[derive(Debug, Clone)]
pub struct Measured {
    pub reference: hostbench_core::model::Reference,
    pub command: String,
    pub note: Option<String>,
}

fn free_port() -> Result<u16, BenchError> {
    // Free for TCP and UDP at the moment of asking; the tool binds it right after.
    for _ in 0..20 {
        let t = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| BenchError::Failed(format!("no free port: {e}")))?;
        if UdpSocket::bind(("127.0.0.1", t.port())).is_ok() {
            return Ok(t.port());
        }
    }
    Err(BenchError::Failed(
        "no port free for both TCP and UDP".into(),
    ))
}

/// A tool that could not be started is not installed: say how to get it (each reference tool's
/// Debian package has its name; taskset is util-linux's).
fn not_installed(tool: &str, e: BenchError) -> BenchError {
    match e {
        BenchError::Unsupported(_) => {
            let package = if tool == "taskset" {
                "util-linux"
            } else {
                tool
            };
            BenchError::unsupported(format!("{tool} not installed: apt install {package}"))
        }
        other => other,
    }
}

/// Start a reference server.
fn spawn(tool: &str, args: &[String], piped: bool) -> Result<Background, BenchError> {
    tools::spawn(tool, args, piped).map_err(|e| not_installed(tool, e))
}

/// A client run's output.
fn output(tool: &str, args: &[String], limit: Duration) -> Result<tools::Output, BenchError> {
    tools::run(tool, args, limit).map_err(|e| not_installed(tool, e))
}

/// Run the client until the freshly started server answers (it takes a moment to listen);
/// `ready` sees stdout and stderr together.
fn client_retrying(
    tool: &str,
    args: &[String],
    limit: Duration,
    ready: impl Fn(&str) -> bool,
) -> Result<tools::Output, BenchError> {
    let mut last = String::new();
    for _ in 0..20 {
        let out = output(tool, args, limit)?;
        last = out.text();
        if ready(&last) {
            return Ok(out);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let line = last
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("no output");
    Err(BenchError::Failed(format!(
        "{tool} failed: {}",
        line.trim()
    )))
}

/// iperf3's receiver-side goodput for `case`, bit/s.
pub fn iperf3(case: &Iperf3Case, peer: &Peer, ours: f64) -> Result<Measured, BenchError> {
    let (port, _server) = match peer {
        Peer::Local => {
            let port = free_port()?.to_string();
            let server = spawn(
                "iperf3",
                &[
                    "-s".into(),
                    "-B".into(),
                    "127.0.0.1".into(),
                    "-p".into(),
                    port.clone(),
                ],
                false,
            )?;
            (port, Some(server))
        }
        Peer::Remote { port, .. } => (port.to_string(), None),
    };
    let mut args: Vec<String> = vec!["-c", peer.host(), "-p", &port, "-J", "-P"]
        .into_iter()
        .map(String::from)
        .collect();
    args.push(case.streams.to_string());
    args.extend(["-l".into(), case.block.to_string()]);
    match case.bytes {
        Some(b) => args.extend(["-n".into(), b.to_string()]),
        None => args.extend(["-t".into(), case.seconds.max(1).to_string()]),
    }
    if let Some(w) = case.sockbuf {
        args.extend(["-w".into(), w.to_string()]);
    }
    if case.proto == Proto::Udp {
        args.push("-u".into());
        args.extend([
            "-b".into(),
            case.rate_bps
                .map(|r| format!("{r}"))
                .unwrap_or_else(|| "0".into()),
        ]);
    }
    match case.direction {
        Direction::Send => {}
        Direction::Recv => args.push("-R".into()),
        Direction::Bidir => args.push("--bidir".into()),
    }
    // The same placement as ours where iperf3 can express it: `-A` pins a whole process, so
    // one stream's client and server share our CPU; several streams run unpinned.
    let mut notes = Vec::new();
    match (case.cpu, case.streams, case.direction) {
        // A remote server's CPUs are not ours to choose: only the client is pinned.
        (Some(c), 1, Direction::Send | Direction::Recv) if *peer != Peer::Local => {
            args.extend(["-A".into(), c.to_string()])
        }
        (Some(c), 1, Direction::Send | Direction::Recv) => {
            args.extend(["-A".into(), format!("{c},{c}")])
        }
        (Some(_), _, _) => {
            notes.push("iperf3 pins a whole process, not each stream: it ran unpinned".to_string())
        }
        (None, _, _) => {}
    }
    let limit = Duration::from_secs(case.seconds.max(1) + 60);
    let answered = |t: &str| !t.contains("unable to connect") && !t.contains("Connection refused");
    let out = match peer {
        // A server started a moment ago may not listen yet: ask again.
        Peer::Local => client_retrying("iperf3", &args, limit, answered)?,
        Peer::Remote { host, .. } => {
            let t = output("iperf3", &args, limit)?;
            if !answered(&t.text()) {
                return Err(BenchError::Failed(format!(
                    "iperf3 could not reach {host}:{port} (is `iperf3 -s -p {port}` running there?)"
                )));
            }
            t
        }
    };
    // The JSON document is stdout alone: iperf3 prints warnings (a UDP block beyond the MSS, say)
    // on stderr.
    let doc: serde_json::Value = serde_json::from_str(&out.stdout)
        .map_err(|e| BenchError::Failed(format!("iperf3 -J output is not JSON: {e}")))?;
    if let Some(err) = doc.get("error").and_then(|e| e.as_str()) {
        return Err(BenchError::Failed(format!("iperf3: {err}")));
    }
    let end = &doc["end"];
    let bps = |k: &str| end[k]["bits_per_second"].as_f64();
    let value = match case.direction {
        Direction::Bidir => bps("sum_received")
            .zip(bps("sum_received_bidir_reverse"))
            .map(|(a, b)| a + b),
        _ => bps("sum_received"),
    }
    .ok_or_else(|| BenchError::Failed("iperf3 JSON lacks end.sum_received".into()))?;
    if let Some(l) = (case.proto == Proto::Udp)
        .then(|| end["sum"]["lost_percent"].as_f64())
        .flatten()
    {
        notes.push(format!("iperf3 lost {l:.3} %"));
    }
    let note = (!notes.is_empty()).then(|| notes.join("; "));
    Ok(Measured {
        reference: tools::reference(
            "iperf3",
            tools::version("iperf3", &["--version"], |l| {
                l.strip_prefix("iperf ")
                    .map(|v| v.split_whitespace().next().unwrap_or(v).to_string())
            }),
            &[value],
            ours,
            Better::Higher,
        )?,
        command: format!("iperf3 {}", args.join(" ")),
        note,
    })
}

/// sockperf ping-pong p50 round trip, seconds (one pair).
///
/// With `cpu`, the client (and a local server) run under `taskset -c CPU`, the placement of our
/// pair.
/// sockperf's ping-pong (`pp`), or with `load` = (messages per second, reply every N) its
/// under-load mode (`ul --mps N --reply-every K`), whose p50 is the figure.
pub fn sockperf(
    proto: Proto,
    msg: u64,
    seconds: u64,
    cpu: Option<(usize, usize)>,
    peer: &Peer,
    ours: f64,
    load: Option<(u64, u32)>,
) -> Result<Measured, BenchError> {
    // Pinned, the program started is taskset: ask for sockperf itself first, so a missing
    // sockperf is not reported as a failed taskset.
    if tools::locate("sockperf").is_none() {
        return Err(not_installed("sockperf", BenchError::unsupported("")));
    }
    let port = match peer {
        Peer::Local => free_port()?,
        Peer::Remote { port, .. } => sockperf_port(*port).ok_or_else(|| {
            BenchError::invalid(format!(
                "--reference-port {port}: sockperf's port {port}+1 is past 65535"
            ))
        })?,
    }
    .to_string();
    let mut server: Vec<String> = vec![
        "sr".into(),
        "-i".into(),
        "127.0.0.1".into(),
        "-p".into(),
        port.clone(),
    ];
    let mut args: Vec<String> = vec![
        if load.is_some() { "ul" } else { "pp" }.into(),
        "-i".into(),
        peer.host().to_string(),
        "-p".into(),
        port.clone(),
    ];
    if proto == Proto::Tcp {
        server.push("--tcp".into());
        args.push("--tcp".into());
    }
    let size = msg.max(14);
    args.extend([
        "-m".into(),
        size.to_string(),
        "-t".into(),
        seconds.max(1).to_string(),
        "--full-rtt".into(),
    ]);
    if let Some((mps, every)) = load {
        args.extend([
            format!("--mps={}", mps.max(1)),
            format!("--reply-every={}", every.max(1)),
        ]);
    }
    let (tool, server, args) = match cpu {
        Some((cs, cc)) => {
            let pinned = |c: usize, a: Vec<String>| {
                let mut v = vec!["-c".to_string(), c.to_string(), "sockperf".into()];
                v.extend(a);
                v
            };
            ("taskset", pinned(cs, server), pinned(cc, args))
        }
        None => ("sockperf", server, args),
    };
    let limit = Duration::from_secs(seconds.max(1) + 30);
    let answered = |t: &str| t.contains("percentile 50.000");
    let text = match peer {
        Peer::Local => {
            let _server = spawn(tool, &server, false)?;
            client_retrying(tool, &args, limit, answered)?.text()
        }
        Peer::Remote { host, .. } => {
            let t = output(tool, &args, limit)?.text();
            if !answered(&t) {
                let tcp = if proto == Proto::Tcp { " --tcp" } else { "" };
                return Err(BenchError::Failed(format!(
                    "sockperf got no answer from {host}:{port} (is `sockperf sr -p {port}{tcp}` \
                     running there?)"
                )));
            }
            t
        }
    };
    let percentile = |p: &str| {
        text.lines()
            .find_map(|l| l.split(&format!("percentile {p} =")).nth(1))
            .and_then(|v| v.trim().parse::<f64>().ok())
    };
    let p50_us =
        percentile("50.000").ok_or_else(|| BenchError::Failed("sockperf printed no p50".into()))?;
    let value = p50_us * 1e-6;
    let mut notes = Vec::new();
    if size != msg {
        notes.push(format!(
            "sockperf's smallest message is 14 B; it ran {size} B against our {msg} B"
        ));
    }
    if load.is_some() {
        if let Some(p99) = percentile("99.000") {
            notes.push(format!(
                "sockperf's p99 {:.1} µs, timed from each message's actual send",
                p99
            ));
        }
    }
    Ok(Measured {
        reference: tools::reference(
            "sockperf",
            tools::version("sockperf", &["--version"], |l| {
                l.split("version ").nth(1).map(|v| v.trim().to_string())
            }),
            &[value],
            ours,
            Better::Lower,
        )?,
        command: format!("{tool} {}", args.join(" ")),
        note: (!notes.is_empty()).then(|| notes.join("; ")),
    })
}

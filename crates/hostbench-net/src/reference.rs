//! `--reference` on loopback: the same case measured by iperf3 (throughput) or sockperf
//! (ping-pong), started here with matching parameters, so each record carries the reference
//! tool's figure and the ratio.
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

/// Start a reference server; a tool that is not installed says how to get it.
fn spawn(tool: &str, args: &[String], piped: bool) -> Result<Background, BenchError> {
    tools::spawn(tool, args, piped).map_err(|e| match e {
        BenchError::Unsupported(why) => {
            BenchError::unsupported(format!("{why}; install it for --reference"))
        }
        other => other,
    })
}

/// A client run's stdout and stderr together.
fn output(tool: &str, args: &[String], limit: Duration) -> Result<String, BenchError> {
    tools::run(tool, args, limit).map(|o| o.text())
}

/// Run the client until the freshly started server answers (it takes a moment to listen).
fn client_retrying(
    tool: &str,
    args: &[String],
    limit: Duration,
    ready: impl Fn(&str) -> bool,
) -> Result<String, BenchError> {
    let mut last = String::new();
    for _ in 0..20 {
        last = output(tool, args, limit)?;
        if ready(&last) {
            return Ok(last);
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
pub fn iperf3(case: &Iperf3Case, ours: f64) -> Result<Measured, BenchError> {
    let port = free_port()?.to_string();
    let _server = spawn(
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
    let mut args: Vec<String> = vec!["-c", "127.0.0.1", "-p", &port, "-J", "-P"]
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
        (Some(c), 1, Direction::Send | Direction::Recv) => {
            args.extend(["-A".into(), format!("{c},{c}")])
        }
        (Some(_), _, _) => {
            notes.push("iperf3 pins a whole process, not each stream: it ran unpinned".to_string())
        }
        (None, _, _) => {}
    }
    let limit = Duration::from_secs(case.seconds.max(1) + 60);
    let text = client_retrying("iperf3", &args, limit, |t| {
        !t.contains("unable to connect") && !t.contains("Connection refused")
    })?;
    let doc: serde_json::Value = serde_json::from_str(&text)
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
/// With `cpu`, server and client run under `taskset -c CPU`, the placement of our pair.
pub fn sockperf(
    proto: Proto,
    msg: u64,
    seconds: u64,
    cpu: Option<usize>,
    ours: f64,
) -> Result<Measured, BenchError> {
    let port = free_port()?.to_string();
    let mut server: Vec<String> = vec![
        "sr".into(),
        "-i".into(),
        "127.0.0.1".into(),
        "-p".into(),
        port.clone(),
    ];
    let mut args: Vec<String> = vec![
        "pp".into(),
        "-i".into(),
        "127.0.0.1".into(),
        "-p".into(),
        port,
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
    let (tool, server, args) = match cpu {
        Some(c) => {
            let pinned = |a: Vec<String>| {
                let mut v = vec!["-c".to_string(), c.to_string(), "sockperf".into()];
                v.extend(a);
                v
            };
            ("taskset", pinned(server), pinned(args))
        }
        None => ("sockperf", server, args),
    };
    let _server = spawn(tool, &server, false)?;
    let limit = Duration::from_secs(seconds.max(1) + 30);
    let text = client_retrying(tool, &args, limit, |t| t.contains("percentile 50.000"))?;
    let p50_us = text
        .lines()
        .find_map(|l| l.split("percentile 50.000 =").nth(1))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .ok_or_else(|| BenchError::Failed("sockperf printed no p50".into()))?;
    let value = p50_us * 1e-6;
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
        note: (size != msg).then(|| {
            format!("sockperf's smallest message is 14 B; it ran {size} B against our {msg} B")
        }),
    })
}

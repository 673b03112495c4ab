//! `hostbench net` end to end: loopback in every mode (IPv4 and IPv6), a real two-host run
//! between network namespaces joined by a veth pair, authentication through the CLI, and the
//! bad-input rule (one line, exit 2).

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command as StdCommand, Stdio};
use std::time::{Duration, Instant};

use common::{
    assert_record_contract, assert_run_contract, assert_usage_error, hostbench, json_of, records,
    run_ok,
};
use serde_json::Value;

const SHORT: &str = "--duration 200ms --repeat 1 --warmup 0 --json -";

#[test]
fn loopback_runs_every_protocol_direction_and_latency() {
    let out = run_ok(
        &format!("net loopback --throughput --latency --proto tcp,udp --direction send,recv,bidir --streams 1,2 --block 8KB --rate 100M {SHORT}"),
        &[],
    );
    let doc = json_of(&out);
    assert_run_contract(&doc);
    assert!(
        doc["skipped"].as_array().is_none_or(|s| s.is_empty()),
        "{}",
        doc["skipped"]
    );
    let tp = records(&doc, "net.throughput");
    assert_eq!(tp.len(), 2 * 3 * 2, "{tp:?}");
    for r in &tp {
        assert_record_contract(r);
        assert_eq!(r["unit"], "bit/s");
        assert_eq!(r["params"]["target"], "loopback");
        assert_eq!(r["params"]["block_bytes"], 8000);
        assert_eq!(r["extra"]["counted_at"], "receiver");
        // What the kernel counted over the case (both ends, on loopback).
        assert!(
            r["extra"]["kernel"]["counters"]["Tcp.RetransSegs"].is_u64(),
            "{}",
            r["extra"]
        );
        // On loopback the server shares the namespace: no second, double-counted set.
        assert!(r["extra"]["kernel"]["server_counters"].is_null());
        assert!(r["peak"].is_null() && r["efficiency"].is_null());
        let w = r["warnings"].to_string();
        assert!(w.contains("no wire"), "{w}");
        if r["params"]["proto"] == "udp" {
            assert_eq!(r["params"]["rate_bps"], 1e8);
            for k in [
                "lost_fraction",
                "jitter_s",
                "out_of_order",
                "duplicates",
                "datagrams_sent",
            ] {
                assert!(r["extra"][k].is_number(), "{k} missing: {r}");
            }
            // Paced at 100 Mbit/s per stream: goodput cannot exceed the offered load by much.
            let streams = r["params"]["streams"].as_f64().expect("streams");
            let dirs = if r["params"]["direction"] == "bidir" {
                2.0
            } else {
                1.0
            };
            assert!(
                r["value"].as_f64().expect("v") < 1.2e8 * streams * dirs,
                "{r}"
            );
        }
        if r["params"]["direction"] == "bidir" {
            let (s, v) = (
                r["extra"]["send_bps"].as_f64().expect("send"),
                r["extra"]["recv_bps"].as_f64().expect("recv"),
            );
            assert!(s > 0.0 && v > 0.0, "{r}");
        }
    }
    let lat = records(&doc, "net.latency");
    assert_eq!(lat.len(), 2);
    for r in &lat {
        assert_record_contract(r);
        assert_eq!(r["unit"], "s");
        assert_eq!(r["params"]["block_bytes"], 1);
        for k in ["p50", "p99", "p999"] {
            assert!(r["stats"][k].as_f64().expect(k) > 0.0, "{r}");
        }
        let rtt = &r["extra"]["rtt"];
        assert!(
            rtt["min"].as_f64() <= rtt["p50"].as_f64()
                && rtt["p50"].as_f64() <= rtt["max"].as_f64(),
            "{rtt}"
        );
        let one_way = r["extra"]["one_way_estimate_s"].as_f64().expect("one way");
        assert!((one_way * 2.0 - r["value"].as_f64().expect("v")).abs() < 1e-12);
        assert!(r["extra"]["measures"]
            .as_str()
            .expect("measures")
            .contains("round-trip"));
    }
}

#[test]
fn amount_and_count_based_runs_and_ipv6() {
    let out = run_ok("net loopback --throughput --latency --proto tcp --streams 2 --bytes 3MB --count 2000 --pairs 2 --repeat 1 --warmup 0 --json -", &[]);
    let doc = json_of(&out);
    let tp = records(&doc, "net.throughput");
    assert_eq!(tp.len(), 1);
    assert_eq!(tp[0]["extra"]["bytes_per_sample"], 3_000_000);
    let lat = records(&doc, "net.latency");
    assert_eq!(lat[0]["extra"]["round_trips_per_pair"], 2000);
    assert_eq!(lat[0]["params"]["streams"], 2);

    let has_v6 = std::fs::read_to_string("/proc/net/if_inet6")
        .is_ok_and(|s| s.lines().any(|l| l.ends_with(" lo")));
    if has_v6 {
        let out = run_ok(
            &format!("net loopback --ipv6 --throughput --proto tcp,udp --streams 1 {SHORT}"),
            &[],
        );
        let doc = json_of(&out);
        let tp = records(&doc, "net.throughput");
        assert_eq!(tp.len(), 2);
        assert!(tp.iter().all(|r| r["params"]["target"] == "loopback6"));
    } else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI machines have IPv6 loopback"
        );
    }
}

/// Two network namespaces joined by a veth pair, removed on drop.
struct TwoHosts {
    names: [String; 2],
    /// The veth ends, in A and in B.
    links: [String; 2],
}

impl TwoHosts {
    const A: &'static str = "10.203.0.1";
    const B: &'static str = "10.203.0.2";
    const A6: &'static str = "fd77:203::1";
    const B6: &'static str = "fd77:203::2";

    fn create() -> Option<Self> {
        let root = common::is_root();
        if !root {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI runs as root: network namespaces must work"
            );
            return None;
        }
        // Unique per call: tests in this binary run in parallel, each with its own pair.
        static PAIRS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = PAIRS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tag = format!("{}{n}", std::process::id());
        let names = [format!("hbA{tag}"), format!("hbB{tag}")];
        let (va, vb) = (format!("hbva{tag}"), format!("hbvb{tag}"));
        let me = Self {
            names,
            links: [va.clone(), vb.clone()],
        };
        let [a, b] = &me.names;
        let (ha, hb) = (Self::A, Self::B);
        let steps = [
            format!("netns add {a}"),
            format!("netns add {b}"),
            format!("link add {va} netns {a} type veth peer name {vb} netns {b}"),
            format!("-n {a} addr add {ha}/24 dev {va}"),
            format!("-n {b} addr add {hb}/24 dev {vb}"),
            format!("-n {a} addr add {}/64 dev {va} nodad", Self::A6),
            format!("-n {b} addr add {}/64 dev {vb} nodad", Self::B6),
            format!("-n {a} link set {va} up"),
            format!("-n {b} link set {vb} up"),
            format!("-n {a} link set lo up"),
            format!("-n {b} link set lo up"),
        ];
        for s in steps {
            let ok = StdCommand::new("ip")
                .args(s.split_whitespace())
                .status()
                .expect("ip (iproute2) runs")
                .success();
            assert!(ok, "ip {s:?} failed");
        }
        Some(me)
    }

    fn exec(&self, which: usize) -> StdCommand {
        let mut c = StdCommand::new("ip");
        c.args(["netns", "exec", &self.names[which]]);
        c.arg(assert_cmd::cargo::cargo_bin("hostbench"));
        c
    }
}

impl TwoHosts {
    /// Put a token bucket (`tc qdisc add … root tbf ARGS`) on B's veth: traffic from B to A.
    fn shape_b(&self, args: &[&str]) {
        let ok = StdCommand::new("ip")
            .args(["netns", "exec", &self.names[1], "tc", "qdisc", "add", "dev"])
            .arg(&self.links[1])
            .args(["root", "tbf"])
            .args(args)
            .status()
            .expect("tc runs")
            .success();
        assert!(ok, "tc qdisc add tbf {args:?} failed");
    }
}

impl Drop for TwoHosts {
    fn drop(&mut self) {
        for n in &self.names {
            let _ = StdCommand::new("ip").args(["netns", "del", n]).status();
        }
    }
}

/// Start a server and wait for its "listening" line.
fn start_server(mut cmd: StdCommand) -> Child {
    let mut child = cmd
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("server starts");
    let stderr = child.stderr.take().expect("stderr");
    let mut lines = BufReader::new(stderr).lines();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match lines.next() {
            Some(Ok(l)) if l.contains("listening on") => break,
            Some(Ok(_)) => {}
            _ => panic!("server did not start"),
        }
        assert!(Instant::now() < deadline, "server start timed out");
    }
    // Keep draining its log so it never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    child
}

impl TwoHosts {
    /// `hostbench net client` in host B with `args`, the short-run flags and `extra` (paths);
    /// must succeed; returns its JSON.
    fn client_ok(&self, args: &[&str], extra: &[&std::ffi::OsStr]) -> Value {
        self.client_in(1, args, extra)
    }

    /// As `client_ok`, from host `which` (0: A, 1: B).
    fn client_in(&self, which: usize, args: &[&str], extra: &[&std::ffi::OsStr]) -> Value {
        let out = self
            .exec(which)
            .args(["net", "client"])
            .args(args)
            .args(SHORT.split_whitespace())
            .args(extra)
            .output()
            .expect("client");
        assert!(
            out.status.success(),
            "client {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        json_of(&out)
    }
}

struct Killed(Child);

impl TwoHosts {
    /// `hostbench net server` on host A at `port` with a fresh token file in `dir`; the server
    /// and the token's path.
    fn serve(&self, dir: &std::path::Path, port: u16) -> (Killed, std::path::PathBuf) {
        let tok = dir.join("token");
        std::fs::write(&tok, format!("veth-test-token-{port}\n")).expect("token");
        let mut srv = self.exec(0);
        srv.args(["net", "server", "--port", &port.to_string(), "--token-file"])
            .arg(&tok);
        (Killed(start_server(srv)), tok)
    }
}

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn two_hosts_over_veth_with_a_token() {
    let Some(hosts) = TwoHosts::create() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tmp");
    let (_server, tok) = hosts.serve(dir.path(), 5301);

    let spec = dir.path().join("spec.toml");
    std::fs::write(&spec, "[network]\nlink_bps = 10e9\nbase_latency_s = 5e-6\n").expect("spec");
    let doc = hosts.client_ok(
        &[
            &format!("{}:5301", TwoHosts::A),
            "--throughput",
            "--latency",
            "--proto",
            "tcp,udp",
            "--direction",
            "send,recv",
            "--streams",
            "1,2",
            "--rate",
            "200M",
        ],
        &[
            "--token-file".as_ref(),
            tok.as_os_str(),
            "--spec".as_ref(),
            spec.as_os_str(),
        ],
    );
    let tp = records(&doc, "net.throughput");
    assert_eq!(tp.len(), 2 * 2 * 2);
    for r in &tp {
        assert_record_contract(r);
        assert_eq!(r["params"]["target"], TwoHosts::A);
        let iface = r["extra"]["interface"]["name"].as_str().expect("interface");
        assert!(iface.starts_with("hbvb"), "{iface}");
        assert_eq!(r["extra"]["interface"]["virtual_if"], true);
        // The spec's link speed gives a goodput ceiling and an efficiency.
        let peak = r["peak"]["value"].as_f64().expect("peak");
        assert!(peak < 10e9 && peak > 9e9, "{peak}");
        assert!(r["peak"]["basis"]
            .as_str()
            .expect("basis")
            .contains("spec file"));
        assert!(r["efficiency"].as_f64().expect("eff") > 0.0);
    }
    let lat = records(&doc, "net.latency");
    assert_eq!(lat.len(), 2);
    assert!(lat
        .iter()
        .all(|r| r["peak"]["value"] == 5e-6 && r["efficiency"].is_number()));

    // Without the spec the veth is named as virtual, with no peak.
    let doc = hosts.client_ok(
        &[
            TwoHosts::A,
            "--port",
            "5301",
            "--proto",
            "tcp",
            "--streams",
            "1",
            "--throughput",
        ],
        &["--token-file".as_ref(), tok.as_os_str()],
    );
    let r = records(&doc, "net.throughput")[0];
    assert!(r["peak"].is_null());
    assert!(
        r["warnings"].to_string().contains("virtual interface"),
        "{}",
        r["warnings"]
    );

    // The same server (bound to `::`) over IPv6.
    let doc = hosts.client_ok(
        &[
            &format!("[{}]:5301", TwoHosts::A6),
            "--throughput",
            "--latency",
            "--proto",
            "tcp,udp",
            "--streams",
            "1",
        ],
        &["--token-file".as_ref(), tok.as_os_str()],
    );
    assert_eq!(records(&doc, "net.throughput").len(), 2);
    assert_eq!(records(&doc, "net.latency").len(), 2);
    assert!(doc["records"]
        .as_array()
        .expect("records")
        .iter()
        .all(|r| r["params"]["target"] == TwoHosts::A6));

    // A wrong token is refused in one line, exit 2.
    let bad = dir.path().join("bad");
    std::fs::write(&bad, "not-the-right-token").expect("bad token");
    let out = hosts
        .exec(1)
        .args([
            "net",
            "client",
            TwoHosts::A,
            "--port",
            "5301",
            "--token-file",
        ])
        .arg(&bad)
        .output()
        .expect("client");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("wrong token") && err.trim_end().lines().count() == 1,
        "{err}"
    );
}

/// The UDP capacity search (the default UDP figure): every trial is in the record, the figure
/// is the goodput of the highest passing offered rate, and nothing passes with more loss than
/// the threshold.
#[test]
fn udp_search_is_the_default_and_records_its_curve() {
    let out = run_ok(
        "net loopback --proto udp --streams 1 --throughput --duration 800ms --repeat 1 --warmup 2 --json -",
        &[],
    );
    let doc = json_of(&out);
    let tp = records(&doc, "net.throughput");
    assert_eq!(tp.len(), 1, "{}", doc["skipped"]);
    let r = tp[0];
    assert_record_contract(r);
    assert_eq!(r["params"]["rate"], "search");
    assert_eq!(r["params"]["rate_bps"], "search");
    assert_eq!(r["params"]["max_loss"], 0.001);
    assert!(r["extra"]["lost_fraction"].as_f64().expect("loss") <= 0.001);
    let curve = r["extra"]["search_curve"].as_array().expect("curve");
    assert!(!curve.is_empty() && curve.len() <= 9, "{curve:?}");
    // Each warm-up sample is one unpaced probe, not a whole search.
    assert_eq!(r["extra"]["warmup_trials"], 2, "{}", r["extra"]);
    for t in curve {
        let loss = t["lost_fraction"].as_f64().expect("loss");
        assert_eq!(t["passed"], loss <= 0.001, "{t}");
        assert!(t["offered_bps"].as_f64().expect("offered") > 0.0);
    }
    // The figure is the delivered rate of the passing trial offered the most.
    let best = curve
        .iter()
        .filter(|t| t["passed"] == true)
        .max_by(|a, b| {
            let o = |t: &Value| t["offered_bps"].as_f64().unwrap_or(0.0);
            o(a).total_cmp(&o(b))
        })
        .expect("a passing trial");
    assert_eq!(r["value"], best["delivered_bps"], "{r}");
    assert_eq!(r["extra"]["offered_bps"], best["offered_bps"]);
}

/// Between two namespaces over a veth shaped to 200 Mbit/s, the search's figure cannot exceed
/// what the shaper lets through, and comes close to it: the search ends where passing and
/// failing rates meet, not at whatever low rate first passed.
#[test]
fn udp_search_finds_a_shaped_links_capacity() {
    let Some(hosts) = TwoHosts::create() else {
        return;
    };
    // Client (B) to server (A): shape B's egress.
    hosts.shape_b(&["rate", "200mbit", "burst", "64kb", "latency", "50ms"]);
    let dir = tempfile::tempdir().expect("tmp");
    let (_server, tok) = hosts.serve(dir.path(), 5341);
    let doc = hosts.client_ok(
        &[
            &format!("{}:5341", TwoHosts::A),
            "--proto",
            "udp",
            "--streams",
            "1",
            "--throughput",
            "--max-loss",
            "1%",
        ],
        &["--token-file".as_ref(), tok.as_os_str()],
    );
    let r = records(&doc, "net.throughput")[0];
    assert_eq!(r["params"]["max_loss"], 0.01);
    let found = r["value"].as_f64().expect("value");
    // Goodput excludes IP/UDP headers the shaper counts: at most the shaped rate.
    assert!(found > 0.0 && found <= 200e6 * 1.02, "{found}");
    let curve = r["extra"]["search_curve"].as_array().expect("curve");
    assert!(
        curve.len() >= 2,
        "the unpaced probe loses on a shaped link: {curve:?}"
    );
    assert_eq!(curve[0]["passed"], false, "{curve:?}");
    // From below: the first paced trial is offered the probe's goodput (about the shaped rate)
    // and each later one halves the interval, so a search that works ends well above half the
    // shaper's rate (at 98 % or more of the lowest failing rate, or after its eight trials);
    // one that stops at the first rate that passes, or at its 1 Mbit/s floor, does not.
    assert!(
        found >= 0.5 * 200e6,
        "{found} bit/s is not the capacity of a 200 Mbit/s link: {curve:?}"
    );
    let offered = |t: &Value| t["offered_bps"].as_f64().expect("offered");
    let best = r["extra"]["offered_bps"].as_f64().expect("offered_bps");
    // The unpaced probe counts: it is where the search's interval starts.
    let failed_above = curve
        .iter()
        .filter(|t| t["passed"] == false && offered(t) > best)
        .map(offered)
        .min_by(f64::total_cmp);
    if let Some(hi) = failed_above {
        assert!(
            curve.len() == 9 || hi - best <= 0.02 * hi,
            "the search stopped between {best} (passed) and {hi} (failed): {curve:?}"
        );
    }
}

/// Issue 19 §4: every record carries the kernel's counter deltas, and a TCP throughput case over
/// a link that drops (a token bucket with almost no queue) is flagged with its retransmits.
#[test]
fn kernel_counters_flag_retransmits_on_a_dropping_link() {
    let Some(hosts) = TwoHosts::create() else {
        return;
    };
    hosts.shape_b(&["rate", "50mbit", "burst", "16kb", "latency", "1ms"]);
    let dir = tempfile::tempdir().expect("tmp");
    let (_server, tok) = hosts.serve(dir.path(), 5351);
    let doc = hosts.client_ok(
        &[
            &format!("{}:5351", TwoHosts::A),
            "--throughput",
            "--latency",
            "--proto",
            "tcp",
            "--streams",
            "1",
        ],
        &["--token-file".as_ref(), tok.as_os_str()],
    );
    let tp = records(&doc, "net.throughput")[0];
    let counters = &tp["extra"]["kernel"]["counters"];
    let retrans = counters["Tcp.RetransSegs"]
        .as_u64()
        .expect("retransmits counted");
    assert!(retrans > 0, "a 1 ms token-bucket queue drops: {counters}");
    let w = tp["warnings"].to_string();
    assert!(w.contains("Tcp.RetransSegs +"), "{w}");
    // The server's end, counted in its own namespace and sent back with its report.
    let server = &tp["extra"]["kernel"]["server_counters"];
    assert!(
        server["Tcp.RetransSegs"].is_u64(),
        "{}",
        tp["extra"]["kernel"]
    );
    // Ping-pong records carry the deltas too.
    let lat = records(&doc, "net.latency")[0];
    assert!(lat["extra"]["kernel"]["counters"].is_object(), "{lat}");
}

/// Hold about `n` idle TCP connections to `addr` from inside network namespace `ns`, as a port
/// scanner or a stuck client would, replacing each one the server closes, until the returned
/// sender is dropped. The second value counts the connections opened so far.
fn idle_flood(
    ns: &str,
    addr: std::net::SocketAddr,
    n: usize,
) -> (
    std::sync::mpsc::Sender<()>,
    std::sync::Arc<std::sync::atomic::AtomicUsize>,
) {
    use std::io::Read;
    use std::os::fd::AsRawFd;
    let (stop, rx) = std::sync::mpsc::channel::<()>();
    let opened = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = opened.clone();
    let path = format!("/var/run/netns/{ns}");
    std::thread::spawn(move || {
        let f = std::fs::File::open(&path).expect("namespace handle");
        // SAFETY: setns on this thread only, with a namespace fd we hold open.
        let rc = unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(rc, 0, "setns into {path}");
        let mut conns: Vec<std::net::TcpStream> = Vec::new();
        while matches!(rx.try_recv(), Err(std::sync::mpsc::TryRecvError::Empty)) {
            // Keep only the connections the server still holds open without a word.
            conns.retain_mut(|c| {
                let mut b = [0u8; 256];
                matches!(c.read(&mut b), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
            });
            while conns.len() < n {
                match std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(1)) {
                    Ok(c) => {
                        c.set_nonblocking(true).expect("nonblocking");
                        conns.push(c);
                        count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                    Err(_) => break,
                }
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    });
    (stop, opened)
}

/// Issue 19 §5: 400 idle connections from one address take only that address's handshake
/// slots. A client from another address is served at once; one from the flooding address is
/// told the server is busy, in one line, after retrying for its connect timeout.
#[test]
fn idle_connections_from_one_address_do_not_lock_out_others() {
    let Some(hosts) = TwoHosts::create() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tmp");
    let port = 5331;
    let (_server, tok) = hosts.serve(dir.path(), port);
    let addr: std::net::SocketAddr = format!("{}:{port}", TwoHosts::A).parse().expect("addr");
    let (stop, opened) = idle_flood(&hosts.names[1], addr, 400);
    let deadline = Instant::now() + Duration::from_secs(20);
    while opened.load(std::sync::atomic::Ordering::Relaxed) < 400 {
        assert!(
            Instant::now() < deadline,
            "the flood could not open 400 connections"
        );
        std::thread::sleep(Duration::from_millis(20));
    }

    // From the flooding namespace: busy, said clearly, exit 2.
    let out = hosts
        .exec(1)
        .args([
            "net",
            "client",
            &addr.to_string(),
            "--connect-timeout",
            "2s",
        ])
        .args(["--proto", "tcp", "--streams", "1"])
        .args(SHORT.split_whitespace())
        .arg("--token-file")
        .arg(&tok)
        .output()
        .expect("client");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(
        err.contains("is busy") && err.contains("still busy after retrying"),
        "{err}"
    );
    assert!(err.contains("per address"), "{err}");

    // From another address (the server's own namespace): served while the flood goes on.
    let doc = hosts.client_in(
        0,
        &[
            &addr.to_string(),
            "--proto",
            "tcp",
            "--streams",
            "1",
            "--throughput",
        ],
        &["--token-file".as_ref(), tok.as_os_str()],
    );
    assert_eq!(records(&doc, "net.throughput").len(), 1);
    drop(stop);
}

#[test]
fn net_bad_input_is_one_line_and_exit_2() {
    assert_usage_error(
        &["net", "client", "127.0.0.1", "--connect-timeout", "soon"],
        "--connect-timeout",
    );
    for bad in ["0", "100%", "150", "-1", "lots"] {
        assert_usage_error(&["net", "loopback", "--max-loss", bad], "--max-loss");
    }
    assert_usage_error(
        &["net", "loopback", "--rate", "1G", "--max-loss", "1%"],
        "applies to the UDP capacity search",
    );
    assert_usage_error(
        &[
            "net",
            "client",
            "no-such-host.invalid",
            "--duration",
            "100ms",
        ],
        "cannot resolve host",
    );
    assert_usage_error(&["net", "loopback", "--block", "0"], "--block");
    assert_usage_error(
        &["net", "loopback", "--proto", "udp", "--block", "70000"],
        "65507",
    );
    assert_usage_error(&["net", "loopback", "--proto", "sctp"], "unknown protocol");
    assert_usage_error(
        &["net", "loopback", "--direction", "up"],
        "unknown direction",
    );
    assert_usage_error(&["net", "loopback", "--streams", "0"], "--streams");
    for bad in ["150%", "0%", "-5%"] {
        assert_usage_error(&["net", "loopback", "--load", bad], "--load");
    }
    assert_usage_error(&["net", "loopback", "--load", "fast"], "--load");
    assert_usage_error(&["net", "loopback", "--reply-every", "0"], "--reply-every");
    assert_usage_error(
        &["net", "loopback", "--load", "10%", "--block", "16"],
        "--block 16",
    );
    assert_usage_error(
        &["net", "loopback", "--tx-mode", "burst"],
        "unknown transaction mode",
    );
    assert_usage_error(
        &["net", "loopback", "--proto", "udp", "--tx-mode", "crr"],
        "TCP only",
    );
    assert_usage_error(&["net", "loopback", "--outstanding", "0"], "--outstanding");
    assert_usage_error(
        &["net", "loopback", "--proto", "udp", "--outstanding", "4"],
        "--outstanding",
    );
    assert_usage_error(
        &[
            "net",
            "loopback",
            "--outstanding",
            "64",
            "--msg-size",
            "4KB",
        ],
        "in flight",
    );
    assert_usage_error(&["net", "loopback", "--rate", "fast"], "--rate");
    assert_usage_error(&["net", "server", "--bind", "not-an-ip"], "--bind");
    assert_usage_error(&["net", "server", "--port", "70000"], "--port");
    // A port in use.
    let held = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = held.local_addr().expect("addr").port().to_string();
    assert_usage_error(
        &["net", "server", "--bind", "127.0.0.1", "--port", &port],
        "cannot listen",
    );
    // Nobody listening: the peer is the bad input.
    drop(held);
    assert_usage_error(
        &["net", "client", &format!("127.0.0.1:{port}")],
        "cannot connect",
    );
    // A token file that is missing or too short.
    assert_usage_error(
        &["net", "server", "--token-file", "/nonexistent/token"],
        "--token-file",
    );
}

#[test]
fn a_server_serves_a_client_over_the_cli_and_once_exits() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").port()
    };
    let mut cmd = StdCommand::new(assert_cmd::cargo::cargo_bin("hostbench"));
    cmd.args([
        "net",
        "server",
        "--bind",
        "127.0.0.1",
        "--port",
        &port.to_string(),
        "--once",
    ]);
    let mut server = start_server(cmd);
    let out = hostbench()
        .args([
            "net",
            "client",
            &format!("127.0.0.1:{port}"),
            "--proto",
            "udp",
            "--latency",
            "--msg-size",
            "64",
        ])
        .args(SHORT.split_whitespace())
        .output()
        .expect("client");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc = json_of(&out);
    assert_eq!(records(&doc, "net.throughput").len(), 0);
    assert_eq!(records(&doc, "net.latency")[0]["params"]["block_bytes"], 64);
    // --once: the server exits by itself after the session.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(st) = server.try_wait().expect("wait") {
            assert!(st.success());
            break;
        }
        assert!(
            Instant::now() < deadline,
            "server did not exit after --once"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Issue 19 §2: round trips under load, one record per load, timed from each message's due
/// time; a load the sender cannot offer fails its case with the reason and the others stay.
#[test]
fn latency_under_load_records_a_curve_and_refuses_an_impossible_load() {
    let out = hostbench()
        .args([
            "net",
            "loopback",
            "--load",
            "10%,50%,400G",
            "--reply-every",
            "5",
            "--block",
            "1400",
            "--duration",
            "300ms",
            "--repeat",
            "1",
            "--warmup",
            "0",
            "--json",
            "-",
        ])
        .output()
        .expect("run");
    // One case failed: the run is partial (exit 3), with what it measured kept.
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc = json_of(&out);
    assert!(records(&doc, "net.throughput").is_empty());
    let lat = records(&doc, "net.latency");
    assert_eq!(lat.len(), 2, "{}", doc["skipped"]);
    for (r, share) in lat.iter().zip([0.1, 0.5]) {
        assert_record_contract(r);
        assert_eq!(r["params"]["load_bps"], format!("{}%", share * 100.0));
        assert_eq!(r["params"]["block_bytes"], 1400);
        let e = &r["extra"];
        assert_eq!(e["reply_every"], 5);
        let (offered, capacity) = (
            e["offered_bps"].as_f64().expect("offered"),
            e["capacity_bps"].as_f64().expect("capacity"),
        );
        assert!((offered / capacity - share).abs() < 1e-9, "{e}");
        // Every timed round trip is in the histogram; the corrected figure is never below the
        // one timed from the actual send.
        assert_eq!(
            e["rtt"]["count"].as_f64(),
            e["timed_round_trips"].as_f64(),
            "{e}"
        );
        assert!(e["rtt"]["p99"].as_f64() >= e["rtt"]["p50"].as_f64());
        assert!(e["rtt"]["p50"].as_f64() >= e["rtt_uncorrected"]["p50"].as_f64());
        assert!(e["send_lateness"]["count"].as_u64() > Some(0));
        assert!(e["measures"].as_str().expect("measures").contains("due"));
    }
    let skipped = doc["skipped"].as_array().expect("skipped");
    assert_eq!(skipped.len(), 1, "{skipped:?}");
    assert_eq!(skipped[0]["params"]["load_bps"], 4e11);
    let why = skipped[0]["reason"].as_str().expect("reason");
    assert!(why.contains("exceeds what this sender can offer"), "{why}");
}

/// Issue 19 §3: TCP_RR with requests in flight, UDP_RR and TCP_CRR over 1 and 2 pairs.
#[test]
fn transactions_count_rr_and_crr_over_pairs() {
    let out = run_ok(
        "net loopback --transactions --outstanding 1,4 --pairs 1,2 --duration 300ms --repeat 1 --warmup 0 --json -",
        &[],
    );
    let doc = json_of(&out);
    let tx = records(&doc, "net.transactions");
    // TCP rr: 2 in-flight counts × 2 pair counts; UDP rr and TCP crr: 2 pair counts each.
    assert_eq!(tx.len(), 8, "{}", doc["skipped"]);
    for r in &tx {
        assert_record_contract(r);
        assert_eq!(r["unit"], "transactions/s");
        let p = &r["params"];
        let e = &r["extra"];
        assert!(r["value"].as_f64().expect("rate") > 0.0);
        // Each completed transaction's time is in the histogram.
        assert_eq!(
            e["transaction_time"]["count"].as_f64(),
            e["transactions"].as_f64(),
            "{r}"
        );
        if p["mode"] == "crr" {
            assert_eq!(p["proto"], "tcp");
            assert!(e["time_wait"]["here"].is_u64(), "{e}");
        }
        if p["proto"] == "udp" {
            assert_eq!(p["outstanding"], 1);
        }
    }
}

/// Between two namespaces: under load over TCP and UDP, and connect-request-response, whose
/// TIME_WAIT sockets land on the server's side (it closes first).
#[test]
fn under_load_and_transactions_between_two_hosts() {
    let Some(hosts) = TwoHosts::create() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tmp");
    let (_server, tok) = hosts.serve(dir.path(), 5361);
    let doc = hosts.client_ok(
        &[
            &format!("{}:5361", TwoHosts::A),
            "--proto",
            "tcp,udp",
            "--load",
            "50M,25%",
            "--tx-mode",
            "crr,rr",
            "--pairs",
            "2",
        ],
        &["--token-file".as_ref(), tok.as_os_str()],
    );
    let lat = records(&doc, "net.latency");
    assert_eq!(lat.len(), 4, "{}", doc["skipped"]);
    for r in &lat {
        assert_eq!(r["params"]["target"], TwoHosts::A);
        let e = &r["extra"];
        assert!(e["rtt"]["count"].as_u64() > Some(0), "{r}");
        // The remote server's counters came back with its report.
        assert!(e["kernel"]["counters"].is_object(), "{e}");
        if r["params"]["load_bps"] == 5e7 {
            assert_eq!(e["offered_bps"], 5e7);
        }
    }
    let tx = records(&doc, "net.transactions");
    assert_eq!(tx.len(), 3, "{}", doc["skipped"]);
    let crr = tx
        .iter()
        .find(|r| r["params"]["mode"] == "crr")
        .expect("crr");
    let tw = &crr["extra"]["time_wait"];
    let (here, server) = (
        tw["here"].as_u64().expect("here"),
        tw["server"].as_u64().expect("server"),
    );
    assert!(server > 0 && server > here, "{tw}");
}

/// A server that dies mid-run: the case it was serving and the ones after fail with the reason,
/// and what was measured before stays in the result (exit 3, partial).
#[test]
fn a_server_that_dies_mid_run_keeps_what_was_measured() {
    let Some(hosts) = TwoHosts::create() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tmp");
    let (server, tok) = hosts.serve(dir.path(), 5371);
    let json = dir.path().join("out.json");
    let client = hosts
        .exec(1)
        .args([
            "net",
            "client",
            &format!("{}:5371", TwoHosts::A),
            "--proto",
            "udp",
            "--latency",
            "--load",
            "20M,30M",
            "--duration",
            "500ms",
            "--repeat",
            "4",
            "--warmup",
            "0",
            "--quiet",
            "--json",
        ])
        .arg(&json)
        .arg("--token-file")
        .arg(&tok)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("client");
    // The result file is rewritten after every case: kill the server once one is in.
    let deadline = Instant::now() + Duration::from_secs(60);
    let one_in = || {
        std::fs::read_to_string(&json)
            .ok()
            .and_then(|t| serde_json::from_str::<Value>(&t).ok())
            .is_some_and(|d| d["records"].as_array().is_some_and(|r| !r.is_empty()))
    };
    while !one_in() {
        assert!(Instant::now() < deadline, "no case finished");
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(server);
    let out = client.wait_with_output().expect("client ends");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("result")).expect("json");
    let measured = doc["records"].as_array().expect("records").len();
    let skipped = doc["skipped"].as_array().expect("skipped");
    assert!(measured >= 1, "{doc}");
    assert_eq!(measured + skipped.len(), 3, "{doc}");
    for s in skipped {
        assert_eq!(s["kind"], "failed", "{s}");
        assert!(!s["reason"].as_str().expect("reason").is_empty(), "{s}");
    }
}

#[test]
fn run_quick_includes_loopback_network() {
    let dir = tempfile::tempdir().expect("tempdir");
    run_ok(
        "run --only net --profile quick --repeat 1 --warmup 0 --quiet --no-reference --out",
        &[dir.path().as_ref()],
    );
    let doc = common::only_run_json(dir.path());
    for (bench, n) in [("net.throughput", 2), ("net.latency", 2)] {
        assert_eq!(records(&doc, bench).len(), n, "{bench}");
    }
}

/// Whether iperf3 and sockperf are installed (CI installs them: there, missing fails).
fn have_reference_tools() -> bool {
    let have = |tool: &str| StdCommand::new(tool).arg("--version").output().is_ok();
    let both = have("iperf3") && have("sockperf");
    assert!(
        both || std::env::var_os("CI").is_none(),
        "CI installs iperf3 and sockperf"
    );
    both
}

/// Every record carries its reference tool's figure and ratio (iperf3 beside throughput,
/// sockperf beside ping-pong); the commands, for further checks.
fn assert_every_record_referenced(doc: &Value) -> Vec<(&'static str, String)> {
    let recs = doc["records"].as_array().expect("records");
    assert_eq!(recs.len(), 4, "{doc}");
    recs.iter()
        .map(|r| {
            let tool = if r["benchmark"] == "net.throughput" {
                "iperf3"
            } else {
                "sockperf"
            };
            let rf = &r["reference"];
            assert_eq!(rf["tool"], tool, "{r}");
            assert!(rf["value"].as_f64().expect("value") > 0.0, "{r}");
            assert!(rf["ratio"].as_f64().expect("ratio") > 0.0, "{r}");
            let cmd = r["extra"]["reference_command"].as_str().expect("command");
            assert!(cmd.contains(tool), "{cmd}");
            (tool, cmd.to_string())
        })
        .collect()
}

#[test]
fn reference_runs_iperf3_and_sockperf_side_by_side() {
    if !have_reference_tools() {
        return;
    }
    let out = run_ok(
        "net loopback --throughput --latency --reference --streams 1 --rate 200M --duration 1s --repeat 1 --warmup 0 --json -",
        &[],
    );
    for (tool, cmd) in assert_every_record_referenced(&json_of(&out)) {
        if tool == "sockperf" {
            assert!(cmd.contains("--full-rtt"), "{cmd}");
        }
    }
    assert_usage_error(&["net", "loopback", "--ipv6", "--reference"], "--reference");
}

#[test]
fn reference_port_measures_iperf3_and_sockperf_against_the_other_host() {
    if !have_reference_tools() {
        return;
    }
    // Usage first, before any traffic: a client's --reference needs the remote servers' port.
    assert_usage_error(
        &["net", "client", "127.0.0.1", "--reference"],
        "--reference-port",
    );
    assert_usage_error(
        &["net", "client", "127.0.0.1", "--reference-port", "65535"],
        "past 65535",
    );
    assert_usage_error(
        &["net", "client", "127.0.0.1", "--reference-port", "x"],
        "--reference-port 'x'",
    );
    let Some(hosts) = TwoHosts::create() else {
        return;
    };
    // Host A runs hostbench's server and, as a user would beside it, iperf3 and sockperf's
    // servers (UDP and TCP on the same port number: separate port spaces).
    let dir = tempfile::tempdir().expect("tmp");
    let (_server, tok) = hosts.serve(dir.path(), 5311);
    let in_a = |tool: &str, args: &[&str]| {
        let child = StdCommand::new("ip")
            .args(["netns", "exec", &hosts.names[0], tool])
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("reference server starts");
        Killed(child)
    };
    let _iperf3 = in_a("iperf3", &["-s", "-p", "5321", "-B", TwoHosts::A]);
    let _sp_udp = in_a("sockperf", &["sr", "-i", TwoHosts::A, "-p", "5322"]);
    let _sp_tcp = in_a(
        "sockperf",
        &["sr", "-i", TwoHosts::A, "-p", "5322", "--tcp"],
    );
    std::thread::sleep(Duration::from_millis(500));

    let token = ["--token-file".as_ref(), tok.as_os_str()];
    let doc = hosts.client_ok(
        &[
            &format!("{}:5311", TwoHosts::A),
            "--reference-port",
            "5321",
            "--throughput",
            "--latency",
            "--proto",
            "tcp,udp",
            "--streams",
            "1",
            "--rate",
            "200M",
        ],
        &token,
    );
    for (tool, cmd) in assert_every_record_referenced(&doc) {
        // The client went to the other host, on the port the user gave; no server was started.
        let port = if tool == "iperf3" {
            "-p 5321"
        } else {
            "-p 5322"
        };
        assert!(cmd.contains(TwoHosts::A) && cmd.contains(port), "{cmd}");
        assert!(!cmd.contains("127.0.0.1"), "{cmd}");
    }

    // Nothing listening on the reference port: the cases are measured, the reference is a note
    // naming the server to start, and the run succeeds.
    let doc = hosts.client_ok(
        &[
            TwoHosts::A,
            "--port",
            "5311",
            "--reference-port",
            "5331",
            "--proto",
            "tcp",
            "--streams",
            "1",
            "--throughput",
        ],
        &token,
    );
    let r = records(&doc, "net.throughput")[0];
    assert!(r["reference"].is_null(), "{r}");
    assert!(r["value"].as_f64().expect("value") > 0.0);
    let warnings = r["warnings"].to_string();
    assert!(
        warnings.contains("reference not measured") && warnings.contains("iperf3 -s -p 5331"),
        "{warnings}"
    );
}

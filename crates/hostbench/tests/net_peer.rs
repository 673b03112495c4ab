//! A `hostbench net server` that dies mid-case (issue 55 §3), end to end with real processes on
//! loopback: the case it was serving keeps the samples that finished, marked incomplete with
//! the error; the client stops trying once a reconnect is refused, says so in one line, and
//! exits 1 with everything it kept in the JSON.
//!
//! The server is killed at a point the test observes rather than after a guessed sleep: a TCP
//! throughput test opens one data connection per stream, and the client asks for a case's next
//! sample only once the one before has finished. So when a second data connection to the
//! server appears beside the control connection, the first measured sample is done and the
//! second is running: that is when the server gets SIGKILL.

use std::collections::BTreeSet;
use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// Kills and reaps a child on drop, so a failing assert leaves no process behind.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn hostbench() -> Command {
    let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("hostbench"));
    // As `common::hostbench`: keep the user's history database out of it.
    cmd.env(
        "HOSTBENCH_DB",
        Path::new(env!("CARGO_TARGET_TMPDIR")).join("tests-history.sqlite"),
    );
    cmd
}

/// Wait for `what` to hold, failing the test (not hanging it) after a minute.
fn wait_for<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The sockets of this network namespace connected to 127.0.0.1:`port` from elsewhere (the
/// client's ends), by inode, from /proc/net/tcp.
fn client_sockets(port: u16) -> BTreeSet<u64> {
    let text = std::fs::read_to_string("/proc/net/tcp").unwrap_or_default();
    let mut out = BTreeSet::new();
    for line in text.lines().skip(1) {
        let f: Vec<&str> = line.split_whitespace().collect();
        // sl local rem st tx:rx tr:when retrnsmt uid timeout inode …
        let (Some(rem), Some(state), Some(inode)) = (f.get(2), f.get(3), f.get(9)) else {
            continue;
        };
        let rem_port = rem
            .rsplit_once(':')
            .and_then(|(_, p)| u16::from_str_radix(p, 16).ok());
        let inode: u64 = inode.parse().unwrap_or(0);
        // 01: ESTABLISHED; a closed socket in TIME_WAIT has no inode.
        if rem_port == Some(port) && *state == "01" && inode != 0 {
            out.insert(inode);
        }
    }
    out
}

#[test]
fn a_server_killed_mid_case_leaves_its_finished_samples_and_one_line() {
    let dir = tempfile::tempdir().expect("tmp");
    let ready = dir.path().join("ready");
    let server = hostbench()
        .args([
            "net",
            "server",
            "--bind",
            "127.0.0.1",
            "--port",
            "0",
            "--quiet",
        ])
        .arg("--ready-file")
        .arg(&ready)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("server starts");
    let mut server = Reaped(server);
    let addr = wait_for("the server's ready file", || {
        std::fs::read_to_string(&ready)
            .ok()
            .map(|t| t.trim().to_string())
            .filter(|t| !t.is_empty())
    });
    let port: u16 = addr
        .rsplit_once(':')
        .and_then(|(_, p)| p.parse().ok())
        .expect("port in the ready file");

    let json = dir.path().join("out.json");
    let client = hostbench()
        .args(["net", "client", &addr, "--proto", "tcp", "--streams", "1"])
        .args([
            "--duration",
            "2s",
            "--repeat",
            "3",
            "--warmup",
            "0",
            "--json",
        ])
        .arg(&json)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("client starts");
    let mut client = Reaped(client);
    // Drained while it runs, so a full pipe never holds it up.
    let drain = |r: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            if let Some(mut r) = r {
                let _ = r.read_to_string(&mut s);
            }
            s
        })
    };
    let out = drain(client.0.stdout.take().map(|r| Box::new(r) as _));
    let err = drain(client.0.stderr.take().map(|r| Box::new(r) as _));

    // The control connection, the first sample's data connection, then the second's: the
    // first measured sample has finished once three have been seen.
    let mut seen = BTreeSet::new();
    wait_for("the second sample's data connection", || {
        seen.extend(client_sockets(port));
        (seen.len() >= 3).then_some(())
    });
    server.0.kill().expect("SIGKILL the server");
    let _ = server.0.wait();

    let status = wait_for("the client to end", || {
        client.0.try_wait().expect("client status")
    });
    let out = out.join().expect("stdout");
    let err = err.join().expect("stderr");
    let both = format!("stderr:\n{err}\nstdout:\n{out}");

    // No case ran in full: the cut one is a failure, not a completed case.
    assert_eq!(status.code(), Some(1), "{both}");
    assert!(!err.contains("panicked"), "{both}");
    // It stopped trying: no refusal per case.
    assert!(!both.contains("Connection refused"), "{both}");

    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("out.json")).expect("json");
    let records = doc["records"].as_array().expect("records");
    assert_eq!(records.len(), 1, "{doc}");
    let rec = &records[0];
    assert_eq!(rec["benchmark"], "net.throughput", "{rec}");
    assert_eq!(rec["params"]["streams"], 1, "{rec}");
    assert_eq!(
        rec["samples"].as_array().expect("samples").len(),
        1,
        "{rec}"
    );
    assert!(rec["value"].as_f64().is_some_and(|v| v > 0.0), "{rec}");
    let mark = &rec["incomplete"];
    assert_eq!(mark["samples_planned"], 3, "{rec}");
    let error = mark["error"]
        .as_str()
        .expect("the error that ended the case");
    assert!(!error.is_empty() && !error.contains("not run"), "{rec}");
    assert!(
        rec["warnings"]
            .as_array()
            .expect("warnings")
            .iter()
            .any(|w| w
                .as_str()
                .is_some_and(|w| w.starts_with("incomplete: 1 of 3"))),
        "{rec}"
    );

    // Every later case is listed as not run, with the one reason.
    let skipped = doc["skipped"].as_array().expect("skipped");
    assert!(!skipped.is_empty(), "{doc}");
    let not_run = format!("not run: the server at {addr} went away at ");
    for s in skipped {
        let reason = s["reason"].as_str().expect("reason");
        assert!(reason.starts_with(&not_run), "{s}");
    }

    // And one line says so: where, when, how many.
    let lines: Vec<&str> = err.lines().filter(|l| l.contains("went away")).collect();
    assert_eq!(lines.len(), 1, "{both}");
    let line = lines[0];
    assert!(
        line.contains(&format!("the server at {addr} went away at ")),
        "{line}"
    );
    assert!(line.contains(error), "the line names the break: {line}");
    let n = skipped.len();
    assert!(
        line.ends_with(&format!(
            "{n} case{} not run",
            if n == 1 { "" } else { "s" }
        )),
        "{line}"
    );
}

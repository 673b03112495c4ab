//! The network driver: `run_net` opens the link to the server, runs every throughput, UDP
//! rate-search and latency case through the runner and attaches the reference tools; `serve`
//! runs the server side. Moved out of `lib.rs` so the crate root is a facade (issue 53).

use std::cell::RefCell;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use hostbench_core::histogram::LatencyHist;
use hostbench_core::model::{Host, Metric, Record, Work};
use hostbench_core::runner::{Case, Sample};
use hostbench_core::spec::Spec;
use hostbench_core::{BenchError, Runner};
use serde_json::json;

use crate::*;

pub(crate) fn client_err(e: ClientError) -> BenchError {
    match e {
        ClientError::Peer(m) | ClientError::Busy(m) | ClientError::Refused(m) => {
            BenchError::invalid(m)
        }
        ClientError::Validation(m) => BenchError::Validation(m),
        ClientError::Session(m) | ClientError::Test(m) => BenchError::Failed(m),
    }
}

/// The session, reconnected when a test broke it.
pub(crate) struct Link {
    pub(crate) addr: SocketAddr,
    pub(crate) token: Option<Token>,
    pub(crate) order: Vec<usize>,
    pub(crate) client: Option<Client>,
    /// Set once the first session was made: later connects are reconnects.
    pub(crate) reconnecting: bool,
    /// How long a busy server is retried before giving up.
    pub(crate) connect_timeout: Duration,
    /// The server's kernel counter deltas summed over the tests since the last `take`.
    pub(crate) server_kernel: std::collections::BTreeMap<String, u64>,
    /// Where this client's data threads run for now, instead of `order` (see `Ctx::split`).
    pub(crate) placed: Option<Vec<usize>>,
    /// Whether the server is still there (see `peer`).
    pub(crate) watch: peer::Watch,
}

impl Link {
    pub(crate) fn connect(&mut self) -> Result<&mut Client, ClientError> {
        if self.client.is_none() {
            // A busy server (sessions running, or its handshake slots held by idle connections)
            // is asked again with doubling waits until the connect timeout; after a failed test
            // the server may still be winding down the old session, so a reconnect waits at
            // least 15 s.
            let timeout = if self.reconnecting {
                self.connect_timeout.max(Duration::from_secs(15))
            } else {
                self.connect_timeout
            };
            let began = std::time::Instant::now();
            let mut wait = Duration::from_millis(100);
            // The server's own reason beats "closed before answering" (a shed connection says
            // nothing about why), so the last refusal is what the user reads.
            let mut reason: Option<String> = None;
            let c = loop {
                match Client::connect(self.addr, self.token.as_ref(), Duration::from_secs(5)) {
                    Err(ClientError::Busy(m)) => {
                        if m.contains(" is busy: ") || reason.is_none() {
                            reason = Some(m);
                        }
                        if began.elapsed() + wait > timeout {
                            return Err(ClientError::Peer(format!(
                                "{}; still busy after retrying for {:.1} s (--connect-timeout)",
                                reason.unwrap_or_default(),
                                began.elapsed().as_secs_f64()
                            )));
                        }
                        std::thread::sleep(wait);
                        wait = (wait * 2).min(Duration::from_secs(2));
                    }
                    other => break other?,
                }
            };
            let mut c = c;
            c.order = self.order.clone();
            self.client = Some(c);
            self.reconnecting = true;
        }
        self.client
            .as_mut()
            .ok_or_else(|| ClientError::Session("no session".into()))
    }

    /// The server's counter deltas gathered since the last call.
    pub(crate) fn take_server_kernel(&mut self) -> std::collections::BTreeMap<String, u64> {
        std::mem::take(&mut self.server_kernel)
    }

    pub(crate) fn run(&mut self, spec: &TestSpec) -> Result<Outcome, BenchError> {
        // A server known to be gone is not asked again: the case is not run, and says why.
        if let Some(g) = self.watch.gone() {
            return Err(BenchError::Failed(g.not_run()));
        }
        let order = self.placed.clone().unwrap_or_else(|| self.order.clone());
        let r = self.connect().and_then(|c| {
            c.order = order;
            c.run(spec)
        });
        match &r {
            Ok(o) => {
                self.watch.test_ok();
                for (k, v) in &o.server_kernel {
                    *self.server_kernel.entry(k.clone()).or_insert(0) += v;
                }
            }
            Err(ClientError::Refused(_)) => {
                if let Some(g) = self.watch.refused(self.addr) {
                    return Err(BenchError::Failed(g.not_run()));
                }
            }
            Err(e) => self
                .watch
                .test_failed(e, hostbench_core::model::now_rfc3339),
        }
        if let Err(e) = &r {
            if !matches!(e, ClientError::Validation(_)) {
                // After a failed test the two sides may be out of step (a late "failed" reply
                // would answer the next request): start a fresh session for the next one.
                self.client = None;
            }
        }
        r.map_err(|e| match e {
            // A peer that vanished mid-run fails this case; only the first connect is an
            // input error.
            ClientError::Peer(m) | ClientError::Refused(m) => BenchError::Failed(m),
            other => client_err(other),
        })
    }
}

/// Measure everything `cfg` asks for through `runner`.
pub fn run_net(
    runner: &mut Runner,
    cfg: &NetConfig,
    _host: &Host,
    spec: &Spec,
) -> Result<(), BenchError> {
    cfg.validate()?;
    // Latency under load is diagnosed with its sender's schedule too.
    runner.diagnose_with(&crate::Net);
    let order = if cfg.pin {
        hostbench_core::affinity::placement_order()
    } else {
        Vec::new()
    };
    let (addr, token, _server) = match &cfg.target {
        Target::Loopback { v6 } => {
            let ip: IpAddr = if *v6 {
                Ipv6Addr::LOCALHOST.into()
            } else {
                Ipv4Addr::LOCALHOST.into()
            };
            let token = Token::random()?;
            let mut sc = ServerConfig::new(SocketAddr::new(ip, 0));
            sc.token = Some(token.clone());
            sc.order = order.clone();
            let server = Server::bind(sc)?;
            let addr = server.local_addr();
            (addr, Some(token), Some(server.spawn()))
        }
        Target::Remote { host, port } => (resolve(host, *port)?, cfg.token.clone(), None),
    };
    let mut link = Link {
        addr,
        token,
        order,
        client: None,
        reconnecting: false,
        connect_timeout: cfg.connect_timeout,
        server_kernel: Default::default(),
        placed: None,
        watch: peer::Watch::default(),
    };
    // The first connection decides whether the target is usable at all.
    link.connect().map_err(client_err)?;
    let iface = limit::route(addr.ip());
    let peer = match (&cfg.target, cfg.reference_port) {
        (Target::Remote { host, .. }, Some(port)) => reference::Peer::Remote {
            host: host.clone(),
            port,
        },
        _ => reference::Peer::Local,
    };
    let ctx = Ctx {
        cfg,
        spec,
        target: cfg.target.label(),
        v6: addr.is_ipv6(),
        iface,
        pair_cpu: link.order.first().copied(),
        // The in-process server runs stream 0 on the first CPU of the order; a client that
        // busy-polls takes the next one.
        split: match (&cfg.target, link.order.as_slice()) {
            (Target::Loopback { .. }, [first, rest @ ..]) if !rest.is_empty() => {
                Some(rest.iter().chain([first]).copied().collect())
            }
            _ => None,
        },
        peer,
        capacity: RefCell::new(Default::default()),
    };
    let result = run_cases(runner, &ctx, &mut link);
    if let Some(c) = link.client.take() {
        c.close();
    }
    if let Some(g) = link.watch.gone() {
        // Every case after the departure was skipped at once with the same reason; one line
        // says so, instead of one refusal per case.
        let reason = g.not_run();
        let cases = runner
            .result()
            .skipped
            .iter()
            .filter(|s| s.reason == reason)
            .count();
        runner.say(&g.line(cases));
    }
    result
}

pub(crate) struct Ctx<'a> {
    pub(crate) cfg: &'a NetConfig,
    pub(crate) spec: &'a Spec,
    pub(crate) target: String,
    pub(crate) v6: bool,
    pub(crate) iface: Option<limit::Iface>,
    /// Where stream 0's two ends run (loopback, pinned), for the reference tools.
    pub(crate) pair_cpu: Option<usize>,
    /// Where the reference tools' servers are.
    pub(crate) peer: reference::Peer,
    /// The under-load stream's capacity per protocol and message size, found by the first load
    /// given as a share.
    pub(crate) capacity: RefCell<std::collections::BTreeMap<(Proto, u64), under_load::Capacity>>,
    /// On loopback with two CPUs or more: the client's CPUs for the under-load section, the
    /// order turned by one so its stream runs beside the server's, not on the same CPU. Its
    /// client busy-polls; sharing the server's CPU, it would starve the server (or, yielding,
    /// itself) and time the scheduler.
    pub(crate) split: Option<Vec<usize>>,
}

impl Ctx<'_> {
    /// Is the server another host (its own namespace), not this process's loopback server?
    pub(crate) fn remote(&self) -> bool {
        matches!(self.cfg.target, Target::Remote { .. })
    }

    pub(crate) fn udp_blocks(&self) -> Vec<u64> {
        match &self.cfg.udp_blocks {
            Some(b) => b.clone(),
            None => {
                let mtu = self.iface.as_ref().and_then(|i| i.mtu).unwrap_or(1500);
                let ip = if self.v6 { 40 } else { 20 };
                vec![mtu.saturating_sub(ip + 8).clamp(512, DEFAULT_UDP_BLOCK_CAP)]
            }
        }
    }

    pub(crate) fn common(&self, r: &mut Record) {
        if let Some(i) = &self.iface {
            r.extra.insert("interface".into(), json!(i));
        }
        r.extra.insert("pinned".into(), json!(self.cfg.pin));
        match self.cfg.bytes.filter(|_| r.benchmark == "net.throughput") {
            Some(b) => r.extra.insert("bytes_per_sample".into(), json!(b)),
            None => match self.cfg.count.filter(|_| r.benchmark == "net.latency") {
                Some(c) => r.extra.insert("round_trips_per_pair".into(), json!(c)),
                None => r.extra.insert(
                    "sample_seconds".into(),
                    json!(self.cfg.duration.as_secs_f64()),
                ),
            },
        };
    }
}

pub(crate) fn run_cases(
    runner: &mut Runner,
    ctx: &Ctx<'_>,
    link: &mut Link,
) -> Result<(), BenchError> {
    let cfg = ctx.cfg;
    let mut throughput: Vec<(Proto, Direction, u64, u32)> = Vec::new();
    if cfg.throughput {
        for &proto in &cfg.protos {
            let blocks = match proto {
                Proto::Tcp => cfg.tcp_blocks.clone(),
                Proto::Udp => ctx.udp_blocks(),
            };
            for &dir in &cfg.directions {
                for &b in &blocks {
                    for &s in &cfg.streams {
                        throughput.push((proto, dir, b, s));
                    }
                }
            }
        }
    }
    let mut latency: Vec<(Proto, u64, u32)> = Vec::new();
    if cfg.latency {
        for &proto in &cfg.protos {
            for &m in &cfg.msg_sizes {
                for &p in &cfg.pairs {
                    latency.push((proto, m, p));
                }
            }
        }
    }
    let loaded = under_load::cases(ctx);
    let tx = transactions::cases(cfg);
    runner.plan(throughput.len() + latency.len() + loaded.len() + tx.len());
    let tcp_tp = throughput.iter().position(|t| t.0 == Proto::Tcp);
    for (i, (proto, dir, block, streams)) in throughput.into_iter().enumerate() {
        let with_reference = cfg.reference.wants(Some(i) == tcp_tp);
        throughput_case(
            runner,
            ctx,
            link,
            proto,
            dir,
            block,
            streams,
            with_reference,
        )?;
    }
    let tcp_lat = latency.iter().position(|t| t.0 == Proto::Tcp);
    for (i, (proto, msg, pairs)) in latency.into_iter().enumerate() {
        let with_reference = cfg.reference.wants(Some(i) == tcp_lat);
        latency_case(runner, ctx, link, proto, msg, pairs, with_reference)?;
    }
    for (i, (proto, load)) in loaded.into_iter().enumerate() {
        let with_reference = cfg.reference.wants(i == 0);
        under_load::case(runner, ctx, link, proto, load, with_reference)?;
    }
    for (i, t) in tx.into_iter().enumerate() {
        transactions::case(runner, ctx, link, t, cfg.reference.wants(i == 0))?;
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn throughput_case(
    runner: &mut Runner,
    ctx: &Ctx<'_>,
    link: &mut Link,
    proto: Proto,
    dir: Direction,
    block: u64,
    streams: u32,
    with_reference: bool,
) -> Result<(), BenchError> {
    let cfg = ctx.cfg;
    let rate = match (proto, cfg.udp_rate) {
        (Proto::Udp, UdpRate::PerStream(r)) => Some(r),
        _ => None,
    };
    let max_loss = match (proto, cfg.udp_rate) {
        (Proto::Udp, UdpRate::Search { max_loss }) => Some(max_loss),
        _ => None,
    };
    let mut case = Case::new("net.throughput", Metric::Throughput, "bit/s")
        .work(Work::Network)
        .param("proto", proto.name())
        .param("block_bytes", block)
        .param("streams", streams)
        .param("direction", dir.name())
        .param("target", ctx.target.clone());
    if proto == Proto::Udp {
        let label = match (rate, max_loss) {
            (Some(r), _) => json!(r),
            (None, Some(_)) => json!("search"),
            (None, None) => json!("unpaced"),
        };
        case = case.param("rate_bps", label.clone()).param("rate", label);
        if let Some(m) = max_loss {
            case = case.param("max_loss", m);
        }
    }
    let test = TestSpec {
        kind: TestKind::Throughput,
        proto,
        direction: dir,
        streams,
        block: block as u32,
        duration_ms: cfg
            .bytes
            .is_none()
            .then_some(cfg.duration.as_millis().max(1) as u64),
        bytes: cfg.bytes,
        count: None,
        rate_bps: rate,
        sockbuf: cfg.sockbuf,
        reply_every: None,
        outstanding: None,
    };
    let link = RefCell::new(link);
    let curve: RefCell<Vec<Trial>> = RefCell::new(Vec::new());
    link.borrow_mut().take_server_kernel();
    let before = kernel::Counters::read();
    // The runner's first samples are warm-ups, never measured.
    let mut warmups = runner.config().warmup;
    let warmup_trials = std::cell::Cell::new(0usize);
    runner.run_case_keeping(
        &case,
        || {
            if let Some(max_loss) = max_loss {
                if warmups > 0 {
                    // A search's warm-up is its unpaced probe alone: it brings the sockets,
                    // buffers and clocks to speed as a whole search would, in one trial of
                    // its eight or nine (some 1.2 s of a 2-CPU host's run per search case).
                    warmups -= 1;
                    warmup_trials.set(warmup_trials.get() + 1);
                    let probe = trial(&mut link.borrow_mut(), &test, None, trial_ms(cfg.duration))?;
                    return Ok(Sample::new(probe.delivered_bps));
                }
                let (found, trials) = udp_search(
                    &mut link.borrow_mut(),
                    &test,
                    max_loss,
                    trial_ms(cfg.duration),
                )?;
                *curve.borrow_mut() = trials;
                return Ok(Sample::new(found.delivered_bps)
                    .with("offered_bps", found.offered_bps)
                    .with("lost_fraction", found.loss)
                    .with("jitter_s", found.jitter_s)
                    .with("search_trials", curve.borrow().len() as f64));
            }
            let o = link.borrow_mut().run(&test)?;
            let up = o.upstream.as_ref().map(|f| f.goodput_bps()).unwrap_or(0.0);
            let down = o.downstream.as_ref().map(|f| f.goodput_bps()).unwrap_or(0.0);
            let mut s = Sample::new(up + down);
            if dir == Direction::Bidir {
                s = s.with("send_bps", up).with("recv_bps", down);
            }
            if proto == Proto::Udp {
                s = s
                    .with("lost_fraction", o.lost_fraction())
                    .with("datagrams_sent", o.datagrams_sent() as f64)
                    .with("lost_datagrams", o.lost() as f64)
                    .with("loss_events", o.flows().map(|f| f.gaps()).sum::<u64>() as f64)
                    .with("out_of_order", o.flows().map(|f| f.out_of_order()).sum::<u64>() as f64)
                    .with("duplicates", o.flows().map(|f| f.duplicates()).sum::<u64>() as f64)
                    .with("jitter_s", o.jitter_s());
            }
            Ok(s)
        },
        |rec| {
            // Read before the reference tool runs: the deltas are this case's own. On loopback
            // the in-process server shares our namespace: its deltas are ours already.
            let server = link.borrow_mut().take_server_kernel();
            let delta = kernel_extra(rec, &before, ctx.remote().then_some(server));
            // A search's failing trials drop datagrams on purpose, and unpaced UDP is warned
            // about already: flag only what should have run clean. A record cut short by its
            // peer's death counts that death's resets and retransmits, not the path's.
            if max_loss.is_none()
                && (proto == Proto::Tcp || rate.is_some())
                && rec.incomplete.is_none()
            {
                if let Some(w) = kernel::flag(&delta) {
                    rec.warnings.push(w);
                }
            }
            ctx.common(rec);
            rec.extra.insert("counted_at".into(), json!("receiver"));
            if let Some(m) = max_loss {
                let points: Vec<_> = curve
                    .borrow()
                    .iter()
                    .map(|t| {
                        json!({"offered_bps": t.offered_bps, "delivered_bps": t.delivered_bps,
                               "lost_fraction": t.loss, "passed": t.loss <= m})
                    })
                    .collect();
                rec.extra.insert("search_curve".into(), json!(points));
                rec.extra
                    .insert("warmup_trials".into(), json!(warmup_trials.get()));
                rec.extra.insert(
                    "note".into(),
                    json!(format!(
                        "RFC 2544 throughput: the highest offered rate whose loss stayed at or \
                         below {} %, by binary search of {} ms trials after an unpaced probe \
                         (search_curve: the last sample's trials); the value is the goodput the \
                         receiver counted at that rate, offered_bps the rate offered; a warm-up \
                         sample is the unpaced probe alone (warmup_trials)",
                        m * 100.0,
                        trial_ms(cfg.duration)
                    )),
                );
            }
            // An incomplete record's peer went away: nothing to run a reference against.
            if with_reference && rec.incomplete.is_none() {
                let case = reference::Iperf3Case {
                    proto,
                    direction: dir,
                    block,
                    streams,
                    // A search's reference runs at the rate it found.
                    rate_bps: rate.or_else(|| {
                        rec.extra
                            .get("offered_bps")
                            .and_then(|v| v.as_f64())
                            .map(|r| r / f64::from(streams))
                    }),
                    seconds: cfg.duration.as_secs_f64().ceil() as u64,
                    bytes: cfg.bytes,
                    sockbuf: match (cfg.sockbuf, proto) {
                        (Some(b), _) => Some(u64::from(b)),
                        (None, Proto::Udp) => Some(udp::DEFAULT_RCVBUF as u64),
                        (None, Proto::Tcp) => None,
                    },
                    cpu: ctx.pair_cpu,
                };
                attach(rec, reference::iperf3(&case, &ctx.peer, rec.value), IPERF3_APART);
            }
            match limit::throughput_peak(
                ctx.iface.as_ref(),
                ctx.spec,
                proto,
                ctx.v6,
                block,
                dir == Direction::Bidir,
            ) {
                Ok(p) => rec.set_peak(Some(p)),
                Err(why) => rec.warnings.push(why),
            }
            if proto == Proto::Udp {
                if rate.is_none() && max_loss.is_none() {
                    rec.warnings.push(
                        "unpaced UDP: the sender ran flat out, so this measures the sender and the receive path; goodput is what arrived and lost_fraction what did not".into(),
                    );
                }
                let loss = rec
                    .extra
                    .get("lost_fraction")
                    .and_then(|v| v.as_f64())
                    .unwrap_or(0.0);
                if loss > 0.01 && max_loss.is_none() {
                    rec.warnings.push(format!(
                        "UDP loss {:.1} % (median of samples): the receiver or the path cannot keep up at this rate",
                        loss * 100.0
                    ));
                }
            }
        },
    )
}

/// Record the kernel counters' growth since `before` in `extra.kernel` (and, against a remote
/// server, the server's own, `server_counters`); the deltas of both ends, summed.
pub(crate) fn kernel_extra(
    rec: &mut Record,
    before: &kernel::Counters,
    server: Option<std::collections::BTreeMap<String, u64>>,
) -> std::collections::BTreeMap<String, u64> {
    let delta = kernel::Counters::read().since(before);
    let mut both = delta.clone();
    if !delta.is_empty() {
        let mut k = json!({
            "counters": delta,
            "scope": "growth over the whole case (warm-up included) of the namespace's \
                      /proc/net/snmp, netstat and snmp6 counters, every socket in it: \
                      `counters` this end's (both ends on loopback), `server_counters` the \
                      remote server's",
        });
        if let Some(server) = server.filter(|m| !m.is_empty()) {
            for (name, v) in &server {
                *both.entry(name.clone()).or_insert(0) += v;
            }
            k["server_counters"] = json!(server);
        }
        rec.extra.insert("kernel".into(), k);
    }
    both
}

/// One trial of a UDP capacity search.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Trial {
    pub(crate) offered_bps: f64,
    pub(crate) delivered_bps: f64,
    pub(crate) loss: f64,
    pub(crate) jitter_s: f64,
}

/// Run `test` once at `per_stream` bit/s per stream (`None`: unpaced) for `ms` milliseconds.
pub(crate) fn trial(
    link: &mut Link,
    test: &TestSpec,
    per_stream: Option<f64>,
    ms: u64,
) -> Result<Trial, BenchError> {
    let spec = TestSpec {
        rate_bps: per_stream,
        duration_ms: Some(ms),
        bytes: None,
        ..test.clone()
    };
    let o = link.run(&spec)?;
    let ways = o.flows().count() as f64;
    let offered = match per_stream {
        Some(r) => r * f64::from(test.streams) * ways,
        None => o.flows().map(|f| f.bytes_sent()).sum::<u64>() as f64 * 8.0 / (ms as f64 / 1e3),
    };
    Ok(Trial {
        offered_bps: offered,
        delivered_bps: o.flows().map(|f| f.goodput_bps()).sum(),
        loss: o.lost_fraction(),
        jitter_s: o.jitter_s(),
    })
}

/// RFC 2544's throughput search: an unpaced probe gives the sender's ceiling (and, if its loss
/// passes, the answer); otherwise the receiver's goodput in that probe is the first guess, and
/// each further trial halves the interval between the highest passing and lowest failing
/// offered rate, up to `SEARCH_TRIALS` trials or `SEARCH_RESOLUTION`. The found trial and every
/// trial run.
pub(crate) fn udp_search(
    link: &mut Link,
    test: &TestSpec,
    max_loss: f64,
    ms: u64,
) -> Result<(Trial, Vec<Trial>), BenchError> {
    // Rates are totals over every stream and direction, as the record's value is.
    let ways = if test.direction == Direction::Bidir {
        2.0
    } else {
        1.0
    };
    let per_stream = |total: f64| total / (f64::from(test.streams) * ways);
    search(max_loss, |rate| trial(link, test, rate.map(per_stream), ms))
}

/// The search itself, over any trial: `run(None)` is the unpaced probe, `run(Some(total))` a
/// trial offered `total` bit/s.
pub(crate) fn search(
    max_loss: f64,
    mut run: impl FnMut(Option<f64>) -> Result<Trial, BenchError>,
) -> Result<(Trial, Vec<Trial>), BenchError> {
    let probe = run(None)?;
    let mut trials = vec![probe];
    if probe.loss <= max_loss {
        return Ok((probe, trials));
    }
    let (mut lo, mut hi) = (0.0f64, probe.offered_bps.max(probe.delivered_bps));
    let mut best: Option<Trial> = None;
    let mut rate = probe.delivered_bps.clamp(SEARCH_FLOOR_BPS, hi);
    for _ in 0..SEARCH_TRIALS {
        let t = run(Some(rate))?;
        trials.push(t);
        if t.loss <= max_loss {
            lo = rate;
            best = Some(t);
        } else {
            hi = rate;
        }
        if best.is_some() && (hi - lo) <= SEARCH_RESOLUTION * hi {
            break;
        }
        rate = (lo + hi) / 2.0;
        if rate < SEARCH_FLOOR_BPS {
            break;
        }
    }
    match best {
        Some(b) => Ok((b, trials)),
        None => Err(BenchError::Failed(format!(
            "UDP capacity search: no offered rate down to {} kept loss at or below {} % \
             (the lowest tried lost {:.1} %)",
            hostbench_core::units::format_value(rate.max(SEARCH_FLOOR_BPS), "bit/s"),
            max_loss * 100.0,
            trials.last().map_or(0.0, |t| t.loss * 100.0)
        ))),
    }
}

pub(crate) fn latency_case(
    runner: &mut Runner,
    ctx: &Ctx<'_>,
    link: &mut Link,
    proto: Proto,
    msg: u64,
    pairs: u32,
    with_reference: bool,
) -> Result<(), BenchError> {
    let cfg = ctx.cfg;
    let case = Case::new("net.latency", Metric::Latency, "s")
        .work(Work::Network)
        .param("proto", proto.name())
        .param("block_bytes", msg)
        .param("streams", pairs)
        .param("target", ctx.target.clone());
    let test = TestSpec {
        kind: TestKind::PingPong,
        proto,
        direction: Direction::Send,
        streams: pairs,
        block: msg as u32,
        duration_ms: cfg
            .count
            .is_none()
            .then_some(cfg.duration.as_millis().max(1) as u64),
        bytes: None,
        count: cfg.count,
        rate_bps: None,
        sockbuf: cfg.sockbuf,
        reply_every: None,
        outstanding: None,
    };
    let link = RefCell::new(link);
    let hists: RefCell<Vec<LatencyHist>> = RefCell::new(Vec::new());
    link.borrow_mut().take_server_kernel();
    let before = kernel::Counters::read();
    runner.run_case_keeping(
        &case,
        || {
            let o = link.borrow_mut().run(&test)?;
            let h = o
                .rtt
                .ok_or_else(|| BenchError::Failed("ping-pong returned no round trips".into()))?;
            if h.count() == 0 {
                return Err(BenchError::Failed("no round trip completed".into()));
            }
            let p50 = h.percentile_ns(50.0) as f64 / 1e9;
            let rate = o.rounds as f64 / o.seconds.max(1e-9);
            hists.borrow_mut().push(h);
            Ok(Sample::new(p50)
                .with("round_trips_per_s", rate)
                .with("lost_round_trips", o.lost_rounds as f64))
        },
        |rec| {
            let server = link.borrow_mut().take_server_kernel();
            kernel_extra(rec, &before, ctx.remote().then_some(server));
            ctx.common(rec);
            let h = merged(measured(&hists.borrow(), rec));
            let s = h.fill_stats(&mut rec.stats);
            rec.extra.insert("rtt".into(), json!(s));
            rec.extra.insert("one_way_estimate_s".into(), json!(rec.value / 2.0));
            rec.extra.insert(
                "measures".into(),
                json!(format!(
                    "round-trip time (RTT) of a {msg}-byte {} ping-pong{}; value = median of the samples' p50; one_way_estimate_s is RTT/2, a label, not a measurement",
                    proto.name().to_uppercase(),
                    if proto == Proto::Tcp { " with TCP_NODELAY" } else { "" }
                )),
            );
            if with_reference && rec.incomplete.is_none() {
                let secs = cfg.duration.as_secs_f64().ceil() as u64;
                if pairs == 1 {
                    attach(
                        rec,
                        reference::sockperf(
                            proto,
                            msg,
                            secs,
                            ctx.pair_cpu.map(|c| (c, c)),
                            &ctx.peer,
                            rec.value,
                            None,
                        ),
                        SOCKPERF_APART,
                    );
                } else {
                    rec.warnings.push("reference: sockperf runs one ping-pong pair per process; none for several pairs".into());
                }
            }
            rec.set_peak(limit::latency_peak(ctx.spec));
            if rec.peak.is_none() {
                rec.warnings.push(
                    "no latency floor: give network.base_latency_s in --spec for an efficiency".into(),
                );
            }
        },
    )
}

/// The entries of the measured samples: the last `rec.samples.len()` (warm-up samples ran
/// first and pushed theirs too).
pub(crate) fn measured<'a, T>(all: &'a [T], rec: &Record) -> &'a [T] {
    &all[all.len().saturating_sub(rec.samples.len())..]
}

/// One histogram of several.
pub(crate) fn merged<'a>(hists: impl IntoIterator<Item = &'a LatencyHist>) -> LatencyHist {
    let mut h = LatencyHist::new();
    for x in hists {
        h.merge(x);
    }
    h
}

/// Why iperf3 and hostbench may differ beyond the parity band on the same path.
pub(crate) const IPERF3_APART: &str =
    "iperf3 (3.16 and older) drives every stream from one thread and \
    pins a whole process, where hostbench runs one pinned thread per stream; on loopback or a \
    virtual NIC the CPU is the bottleneck, so where the threads run decides the figure";

/// Why sockperf and hostbench may differ beyond the parity band.
pub(crate) const SOCKPERF_APART: &str =
    "sockperf's figure is the p50 of its own busy-polling ping-pong \
    in one process (messages of at least 14 B); hostbench's the median of its samples' p50 on a \
    pinned thread pair. At loopback round trips of a few microseconds, one scheduler wake-up \
    more or less per exchange is a large ratio";

/// Put a reference measurement (or why there is none) on a record: the figure, ratio and
/// command through core's one `attach` (the methodological note outside the parity band), and
/// the tool's own note on how it ran (always).
pub(crate) fn attach(
    rec: &mut Record,
    m: Result<reference::Measured, BenchError>,
    why_apart: &str,
) {
    let (outcome, command, note) = match m {
        Ok(m) => (Ok(m.reference), m.command, m.note),
        Err(e) => (Err(e), String::new(), None),
    };
    hostbench_core::reference::attach(rec, outcome, &command, why_apart);
    if let Some(n) = note {
        let joined = match rec.extra.get("reference_note").and_then(|v| v.as_str()) {
            Some(apart) => format!("{n}; {apart}"),
            None => n,
        };
        rec.extra.insert("reference_note".into(), json!(joined));
    }
}

/// Serve until stopped (the `net server` command).
pub fn serve(cfg: ServerConfig, ready_file: Option<&std::path::Path>) -> Result<(), BenchError> {
    let server = Server::bind(cfg)?;
    eprintln!("hostbench net server: listening on {}", server.local_addr());
    if let Some(path) = ready_file {
        // Written once the socket listens, atomically: whoever waits for the file may connect
        // as soon as it sees it, and never reads half an address.
        let text = format!("{}\n", server.local_addr());
        hostbench_core::runner::write_bytes_atomic(path, text.as_bytes())
            .map_err(|e| BenchError::invalid(format!("--ready-file {}: {e}", path.display())))?;
    }
    server.serve();
    Ok(())
}

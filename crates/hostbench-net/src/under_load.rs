//! The latency-under-load section: `net.latency` records with a `load_bps` parameter, one per
//! offered load, that together draw the latency-vs-load curve.
//!
//! A load is a rate in bit/s or a share of the path's capacity. For UDP the capacity is the
//! highest offered rate whose loss stays within `--max-loss` (the throughput section's search,
//! or a search run here when that section did not run), so "90 %" means the same thing on a
//! 1 Gbit/s NIC and on loopback. For TCP it is what one unpaced stream delivered. The record's
//! `load_bps` parameter is the load as asked ("50%" or a number), so runs compare by what was
//! asked; `extra.offered_bps` is the rate it came to.
//!
//! Each load is one paced stream of the path-MTU-sized datagram (`loaded::drive`). A load the
//! sender cannot offer fails its case with the reason: above the unpaced probe's rate, or a
//! schedule the sender fell behind on. Timing a sender that is behind would measure the sender.

use std::cell::RefCell;

use hostbench_core::histogram::LatencyHist;
use hostbench_core::model::{Metric, Record, Work};
use hostbench_core::runner::{Case, Sample};
use hostbench_core::units::format_value;
use hostbench_core::units::sample_list;
use hostbench_core::{BenchError, Runner};
use serde_json::json;

use crate::loaded::KEEP_UP;
use crate::wire::{self, Direction, Proto, TestKind, TestSpec};
use crate::{kernel, kernel_extra, limit, reference, Ctx, Link, NetConfig, UdpRate};

/// An offered load.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Load {
    /// Payload bit/s.
    Bps(f64),
    /// A share of the path's capacity, in (0, 1].
    Share(f64),
}

impl Load {
    /// The record's `load_bps` parameter: the load as asked.
    fn label(self) -> serde_json::Value {
        match self {
            Load::Bps(b) => json!(b),
            Load::Share(f) => json!(format!("{}%", f * 100.0)),
        }
    }
}

/// Replies per second the default `reply_every` aims for: enough for a p99 from a one-second
/// sample.
const TIMED_PER_S: f64 = 2000.0;

/// What a path can carry, for loads given as a share.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Capacity {
    /// The capacity: the highest offered rate within the loss threshold (UDP), or one unpaced
    /// stream's goodput (TCP).
    pub bps: f64,
    /// The most the sender offered when unpaced: a load above it cannot be offered at all.
    pub ceiling: f64,
    /// Where the figure came from, for the record.
    pub how: &'static str,
}

/// The section's flags, checked before anything runs.
pub(crate) fn validate(cfg: &NetConfig) -> Result<(), BenchError> {
    if !cfg.loaded {
        return Ok(());
    }
    let bad = |m: String| Err(BenchError::invalid(m));
    if cfg.loads.is_empty() {
        return bad("--load: no load given".into());
    }
    for l in &cfg.loads {
        match *l {
            Load::Share(f) if !(f > 0.0 && f <= 1.0) => {
                return bad(format!(
                    "--load {}%: a share of the path's capacity must be above 0 and at most \
                     100 % (the most it carries within --max-loss); give a higher load in bit/s",
                    f * 100.0
                ))
            }
            Load::Bps(b) if !(1000.0..=4e11).contains(&b) => {
                return bad(format!("--load {b}: must be 1 kbit/s..400 Gbit/s"))
            }
            _ => {}
        }
    }
    if let Some(r) = cfg.reply_every {
        if r == 0 || r > wire::MAX_REPLY_EVERY {
            return bad(format!(
                "--reply-every {r}: must be 1..={}",
                wire::MAX_REPLY_EVERY
            ));
        }
    }
    if let Some(b) = cfg.udp_blocks.as_ref().and_then(|b| b.first()) {
        if *b < crate::stream::HEADER_BYTES as u64 {
            return bad(format!(
                "--block {b}: a message under load carries a {}-byte header (tag, sequence, \
                 due time)",
                crate::stream::HEADER_BYTES
            ));
        }
    }
    if cfg.loaded_protos.is_empty() {
        return bad("--proto: no protocol for the under-load section".into());
    }
    Ok(())
}

/// The section's cases: every protocol at every load.
pub(crate) fn cases(ctx: &Ctx<'_>) -> Vec<(Proto, Load)> {
    let cfg = ctx.cfg;
    if !cfg.loaded {
        return Vec::new();
    }
    cfg.loaded_protos
        .iter()
        .flat_map(|&p| cfg.loads.iter().map(move |&l| (p, l)))
        .collect()
}

/// The message size: the UDP datagram the path carries unfragmented (or the first `--block`).
fn block(ctx: &Ctx<'_>) -> u64 {
    ctx.udp_blocks()[0]
}

/// The default `reply_every`: about [`TIMED_PER_S`] timed messages a second, at most 1 in 100.
fn reply_every(cfg: &NetConfig, bps: f64, block: u64) -> u32 {
    cfg.reply_every.unwrap_or_else(|| {
        let per_s = bps / (block as f64 * 8.0);
        (per_s / TIMED_PER_S).floor().clamp(1.0, 100.0) as u32
    })
}

/// The capacity of `proto` with `block`-byte messages on one stream, as the under-load stream
/// itself offers them: RFC 2544's search (`crate::search`) over tests under load, where a trial
/// passes when its loss stays within `--max-loss` and the sender kept its schedule. The loads
/// then are shares of what this very sender, placed as it runs, sustains; a throughput sender's
/// capacity would be another code path's, and 90 % of it could be more than this one offers.
fn capacity(
    ctx: &Ctx<'_>,
    link: &mut Link,
    proto: Proto,
    block: u64,
) -> Result<Capacity, BenchError> {
    if let Some(c) = ctx.capacity.borrow().get(&(proto, block)) {
        return Ok(*c);
    }
    let cfg = ctx.cfg;
    let max_loss = match cfg.udp_rate {
        UdpRate::Search { max_loss } => max_loss,
        _ => crate::DEFAULT_MAX_LOSS,
    };
    let ms = crate::trial_ms(cfg.duration);
    let (found, trials) = crate::search(max_loss, |rate| {
        // Unpaced is a rate no sender reaches: it sends flat out, behind from the start.
        let offered = rate.unwrap_or(PROBE_BPS);
        let test = spec(
            cfg,
            proto,
            block,
            ms,
            offered,
            reply_every(cfg, offered, block),
        );
        let o = link.run(&test)?;
        let l = o.load.unwrap_or_default();
        let flow = o.upstream.unwrap_or_default();
        let lost = flow.lost() as f64 / flow.datagrams_sent().max(1) as f64;
        Ok(crate::Trial {
            offered_bps: if rate.is_some() {
                offered
            } else {
                l.sent_bps()
            },
            delivered_bps: flow.goodput_bps(),
            // A sender that fell behind did not offer the rate: the trial fails.
            loss: if rate.is_some() && !l.kept_up() {
                1.0
            } else {
                lost
            },
            jitter_s: flow.jitter_s(),
        })
    })?;
    let c = Capacity {
        bps: found.offered_bps,
        ceiling: trials.first().map_or(found.offered_bps, |t| t.offered_bps),
        how: "a capacity search of this section's own paced stream",
    };
    ctx.capacity.borrow_mut().insert((proto, block), c);
    Ok(c)
}

/// One stream under load: `bps` of `block`-byte messages for `ms`, one in `every` timed.
fn spec(cfg: &NetConfig, proto: Proto, block: u64, ms: u64, bps: f64, every: u32) -> TestSpec {
    TestSpec {
        kind: TestKind::UnderLoad,
        proto,
        direction: Direction::Send,
        streams: 1,
        block: block as u32,
        duration_ms: Some(ms),
        bytes: None,
        count: None,
        rate_bps: Some(bps),
        sockbuf: cfg.sockbuf,
        reply_every: Some(every),
        outstanding: None,
    }
}

/// The probe's rate: beyond any sender, so it sends flat out.
const PROBE_BPS: f64 = 4e11;

/// One load: round trips of the sampled messages while the stream loads the path.
pub(crate) fn case(
    runner: &mut Runner,
    ctx: &Ctx<'_>,
    link: &mut Link,
    proto: Proto,
    load: Load,
    with_reference: bool,
) -> Result<(), BenchError> {
    let cfg = ctx.cfg;
    let block = block(ctx);
    let case = Case::new("net.latency", Metric::Latency, "s")
        .work(Work::Network)
        .param("proto", proto.name())
        .param("block_bytes", block)
        .param("streams", 1u32)
        .param("target", ctx.target.clone())
        .param("load_bps", load.label());
    link.placed = ctx.split.clone();
    let link = RefCell::new(link);
    // Per sample, warm-up ones included: the corrected, uncorrected and lateness histograms,
    // and how the sender kept its schedule.
    let hists: RefCell<Vec<[LatencyHist; 3]>> = RefCell::new(Vec::new());
    let paces: RefCell<Vec<Pace>> = RefCell::new(Vec::new());
    let used: RefCell<Option<(f64, u32, Option<Capacity>)>> = RefCell::new(None);
    link.borrow_mut().take_server_kernel();
    let before = kernel::Counters::read();
    let result = runner.run_case_keeping(
        &case,
        || {
            let (bps, cap) = match load {
                Load::Share(f) => {
                    let c = capacity(ctx, &mut link.borrow_mut(), proto, block)?;
                    (f * c.bps, Some(c))
                }
                Load::Bps(b) => (b, ctx.capacity.borrow().get(&(proto, block)).copied()),
            };
            if let Some(c) = cap.filter(|c| bps > c.ceiling * 1.02) {
                return Err(BenchError::Failed(format!(
                    "offered load {} exceeds what this sender can offer: unpaced, it sent {} \
                     ({})",
                    format_value(bps, "bit/s"),
                    format_value(c.ceiling, "bit/s"),
                    c.how
                )));
            }
            let every = reply_every(cfg, bps, block);
            *used.borrow_mut() = Some((bps, every, cap));
            let ms = cfg.duration.as_millis().max(1) as u64;
            let test = spec(cfg, proto, block, ms, bps, every);
            let o = link.borrow_mut().run(&test)?;
            let l = o
                .load
                .ok_or_else(|| BenchError::Failed("the test under load returned nothing".into()))?;
            let sent = l.sent as f64 / l.scheduled.max(1) as f64;
            let why = if l.kept_up() {
                // It sent what was due, but late: the round trips timed from the due times are
                // then the sender's wait more than the path's (a stall it caught up from).
                let late = l.lateness.percentile_ns(50.0) as f64 / 1e9;
                let rtt = l.uncorrected.percentile_ns(50.0) as f64 / 1e9;
                (late > rtt).then(|| {
                    format!(
                        "its messages went out {} late at the median, against a round trip of {} \
                         from the actual send",
                        format_value(late, "s"),
                        format_value(rtt, "s")
                    )
                })
            } else {
                let why = format!(
                    "it sent {} of the {} messages due ({:.0} %, below {:.0} %), {}",
                    l.sent,
                    l.scheduled,
                    l.sent as f64 * 100.0 / l.scheduled.max(1) as f64,
                    KEEP_UP * 100.0,
                    format_value(l.sent_bps(), "bit/s")
                );
                // Within what the capacity search saw this sender offer, falling behind is the
                // load's effect and the corrected round trips show it; beyond anything known,
                // the figure would time the sender alone.
                if cap.is_none() {
                    return Err(BenchError::Failed(format!(
                        "offered load {} exceeds what this sender can offer: {why}",
                        format_value(bps, "bit/s")
                    )));
                }
                Some(why)
            };
            if l.corrected.count() == 0 {
                return Err(BenchError::Failed(format!(
                    "no reply came back under a load of {}",
                    format_value(bps, "bit/s")
                )));
            }
            let s = |h: &LatencyHist, p: f64| h.percentile_ns(p) as f64 / 1e9;
            let flow = o.upstream.unwrap_or_default();
            let sample = Sample::new(s(&l.corrected, 50.0))
                .with("p99_s", s(&l.corrected, 99.0))
                .with("p50_uncorrected_s", s(&l.uncorrected, 50.0))
                .with("p99_uncorrected_s", s(&l.uncorrected, 99.0))
                .with("offered_bps", bps)
                .with("sent_bps", l.sent_bps())
                .with("delivered_bps", flow.goodput_bps())
                .with("load_lost_fraction", flow.lost() as f64 / flow.datagrams_sent().max(1) as f64)
                .with(
                    "lost_replies",
                    l.expected_replies.saturating_sub(l.replies) as f64,
                )
                .with("timed_round_trips", l.replies as f64)
                .with("max_behind_s", l.max_behind_ns as f64 / 1e9);
            hists
                .borrow_mut()
                .push([l.corrected, l.uncorrected, l.lateness]);
            paces.borrow_mut().push(Pace { why, sent });
            Ok(sample)
        },
        |rec| {
            let server = link.borrow_mut().take_server_kernel();
            kernel_extra(rec, &before, ctx.remote().then_some(server));
            ctx.common(rec);
            let all = hists.borrow();
            let samples = crate::measured(&all, rec);
            let merged: [LatencyHist; 3] =
                std::array::from_fn(|i| crate::merged(samples.iter().map(|x| &x[i])));
            let corrected = merged[0].fill_stats(&mut rec.stats);
            rec.extra.insert("rtt".into(), json!(corrected));
            rec.extra
                .insert("rtt_uncorrected".into(), json!(merged[1].summary()));
            rec.extra
                .insert("send_lateness".into(), json!(merged[2].summary()));
            let (bps, every, cap) = used.borrow().unwrap_or((0.0, 1, None));
            rec.extra.insert("reply_every".into(), json!(every));
            if let Some(c) = cap {
                rec.extra.insert("capacity_bps".into(), json!(c.bps));
                rec.extra.insert("capacity_from".into(), json!(c.how));
                rec.extra
                    .insert("load_share".into(), json!(bps / c.bps.max(1.0)));
            }
            rec.extra.insert(
                "measures".into(),
                json!(format!(
                    "round-trip time (RTT) of one in {every} {block}-byte {} messages of a \
                     stream paced at the offered load; timed from when each message was due, so a sender \
                     stall counts (coordinated-omission corrected); value = median of the \
                     samples' p50; rtt_uncorrected times from the actual send, as sockperf does",
                    proto.name().to_uppercase()
                )),
            );
            let lost = rec
                .extra
                .get("load_lost_fraction")
                .and_then(|v| v.as_f64())
                .unwrap_or(0.0);
            if lost > 0.01 {
                rec.warnings.push(format!(
                    "the load stream lost {:.1} % of its datagrams: past the path's capacity, \
                     the round trips time a queue that overflows",
                    lost * 100.0
                ));
            }
            sender_behind(rec, crate::measured(&paces.borrow(), rec));
            let late = merged[2].percentile_ns(50.0) as f64 / 1e9;
            let uncorrected = merged[1].percentile_ns(50.0) as f64 / 1e9;
            if late > uncorrected {
                rec.warnings.push(format!(
                    "the sender ran late (median {}): at this load the sending CPU, not the path, \
                     sets the corrected round trip (rtt_uncorrected, from the actual send, has a \
                     median of {})",
                    format_value(late, "s"),
                    format_value(uncorrected, "s")
                ));
            }
            if with_reference && bps > 0.0 && rec.incomplete.is_none() {
                let mps = (bps / (block as f64 * 8.0)).round() as u64;
                crate::attach(
                    rec,
                    reference::sockperf(
                        proto,
                        block,
                        cfg.duration.as_secs_f64().ceil() as u64,
                        ctx.pair_cpu.map(|server| {
                            let client = ctx.split.as_ref().and_then(|o| o.first().copied());
                            (server, client.unwrap_or(server))
                        }),
                        &ctx.peer,
                        rec.value,
                        Some((mps, every)),
                    ),
                    crate::SOCKPERF_APART,
                );
            }
            rec.set_peak(limit::latency_peak(ctx.spec));
        },
    );
    link.borrow_mut().placed = None;
    result
}

/// How one sample's sender kept the schedule of its paced stream.
struct Pace {
    /// Why its round trips are partly the sender's wait, where they are: it fell behind (sent
    /// less than [`KEEP_UP`] of the messages due), or it sent them all but late.
    why: Option<String>,
    /// The share of the messages due that it sent.
    sent: f64,
}

/// Say which measured samples' sender fell behind its schedule or sent late
/// (`extra.behind_samples`, 0-based; `extra.sent_share_min`, the least share of the messages
/// due that a sample sent) and why, in a warning. A warm-up sample's does not count. Where only
/// some did, their round trips include the sender's wait and the spread is the sender's: one
/// sample of three at 194 ms beside 29 and 37 µs read as a CV of 173 % with no cause named.
fn sender_behind(rec: &mut Record, measured: &[Pace]) {
    if let Some(least) = measured.iter().map(|p| p.sent).min_by(f64::total_cmp) {
        rec.extra.insert("sent_share_min".into(), json!(least));
    }
    let behind: Vec<(usize, &Pace)> = measured
        .iter()
        .enumerate()
        .filter(|(_, p)| p.why.is_some())
        .collect();
    // The worst: the one that sent least, the first of those that sent all.
    let Some((_, worst)) = behind
        .iter()
        .min_by(|a, b| a.1.sent.total_cmp(&b.1.sent).then(a.0.cmp(&b.0)))
    else {
        return;
    };
    let which: Vec<usize> = behind.iter().map(|b| b.0).collect();
    let when = if which.len() == measured.len() {
        String::new()
    } else {
        format!(" in {} of {}", sample_list(&which), measured.len())
    };
    rec.warnings.push(format!(
        "the sender fell behind its schedule at this load{when} ({}{}): the corrected round \
         trips include its wait",
        if which.len() > 1 { "at worst " } else { "" },
        worst.why.as_deref().unwrap_or_default()
    ));
    rec.extra.insert("behind_samples".into(), json!(which));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reply_every_aims_for_enough_timed_messages_and_no_more_than_sockperf() {
        let cfg = NetConfig::default();
        // 1472-byte datagrams: 10 Mbit/s is 849 a second, all timed.
        assert_eq!(reply_every(&cfg, 10e6, 1472), 1);
        // 1 Gbit/s is 84 900 a second: one in 42.
        assert_eq!(reply_every(&cfg, 1e9, 1472), 42);
        // 40 Gbit/s: capped at sockperf's one in 100.
        assert_eq!(reply_every(&cfg, 40e9, 1472), 100);
        let fixed = NetConfig {
            reply_every: Some(7),
            ..NetConfig::default()
        };
        assert_eq!(reply_every(&fixed, 1e9, 1472), 7);
    }

    #[test]
    fn a_share_above_the_capacity_or_a_short_message_is_refused() {
        let over = NetConfig {
            loads: vec![Load::Share(1.5)],
            ..NetConfig::default()
        };
        let e = over.validate().expect_err("150 %").to_string();
        assert!(
            e.contains("--load 150%") && e.contains("at most 100 %"),
            "{e}"
        );
        let short = NetConfig {
            udp_blocks: Some(vec![16]),
            protos: vec![Proto::Tcp],
            ..NetConfig::default()
        };
        let e = short.validate().expect_err("16 B").to_string();
        assert!(e.contains("--block 16"), "{e}");
        assert_eq!(Load::Share(0.5).label(), json!("50%"));
        assert_eq!(Load::Bps(1e9).label(), json!(1e9));
    }

    #[test]
    fn the_samples_whose_sender_fell_behind_are_named() {
        let case = Case::new("net.latency", Metric::Latency, "s");
        let pace = |sent: f64, why: Option<&str>| Pace {
            why: why.map(String::from),
            sent,
        };
        // The first of three measured samples fell behind.
        let mut rec = hostbench_core::runner::record_from_samples(&case, vec![0.19, 3e-5, 4e-5]);
        let kept = || pace(0.99, None);
        sender_behind(
            &mut rec,
            &[pace(0.51, Some("it sent 51 %")), kept(), kept()],
        );
        assert_eq!(rec.extra["behind_samples"], json!([0]));
        assert_eq!(rec.extra["sent_share_min"], json!(0.51));
        assert!(
            rec.warnings.last().unwrap().starts_with(
                "the sender fell behind its schedule at this load in sample 1 of 3 (it sent 51 %)"
            ),
            "{:?}",
            rec.warnings
        );
        // Two of three: one behind, one that sent all but late; the worst is the one behind.
        let mut rec = hostbench_core::runner::record_from_samples(&case, vec![0.1; 3]);
        let late = pace(1.0, Some("its messages went out 44 ms late"));
        sender_behind(&mut rec, &[late, kept(), pace(0.6, Some("it sent 60 %"))]);
        assert_eq!(rec.extra["behind_samples"], json!([0, 2]));
        assert!(
            rec.warnings[0].contains("in samples 1, 3 of 3 (at worst it sent 60 %)"),
            "{:?}",
            rec.warnings
        );
        // None behind: only the least share sent is kept.
        let mut rec = hostbench_core::runner::record_from_samples(&case, vec![3e-5; 2]);
        sender_behind(&mut rec, &[kept(), pace(0.98, None)]);
        assert!(rec.warnings.is_empty() && !rec.extra.contains_key("behind_samples"));
        assert_eq!(rec.extra["sent_share_min"], json!(0.98));
    }
}

//! `hostbench burn`: the burn-in verb. Parses and checks every input before anything runs, runs
//! the CPU and memory burns from their crates, reads the hardware error counters before and after,
//! and prints the verdict on the first line (the failing CPU or address and unit, or `PASS`); an
//! EDAC count that rose meanwhile fails it (uncorrectable) or warns (corrected), see `edac`; so do
//! the GPU's NVML counters and, with the GPU in the plan, the XIDs watched while it ran.

mod edac;

use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use hostbench_core::burn::{Fault, TimelinePoint, UnitRun, UnitStatus};
use hostbench_core::model::Health;
use hostbench_core::{affinity, host, units, BenchError};
use hostbench_gpu::xid::{XidReport, XidWatch};
use serde::{Deserialize, Serialize};

use crate::cli::BurnArgs;
use crate::Exit;

const RESOURCES: [&str; 4] = ["cpu", "mem", "gpu", "disk"];
/// The burn record's schema (`hostbench report` tells it from a run by this).
const SCHEMA: &str = "hostbench/burn/v1";

/// The saved burn record (`hostbench/burn/v1`).
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct BurnRecord {
    schema: String,
    verdict: String,
    reason: String,
    duration_s: f64,
    cpu_model: String,
    cpus: Vec<usize>,
    /// The fault injected through `HOSTBENCH_FAULT`, when one was: such a record is a test.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    fault_injected: Option<String>,
    mem_bytes: u64,
    mem_huge_bytes: Option<u64>,
    units: Vec<UnitRun>,
    timeline: Vec<TimelinePoint>,
    warnings: Vec<String>,
    /// The units the warnings are about (drawn ringed on burn.html's timeline); not saved, found
    /// again from the timeline when a saved record is read back.
    #[serde(skip)]
    warned: Vec<String>,
    health_before: Health,
    health_after: Health,
    /// The EDAC counters that rose between `health_before` and `health_after`.
    #[serde(default)]
    edac_rises: Vec<edac::EdacRise>,
    /// Each burned GPU: the SMs covered, errors per SM, the bytes under the pattern test, and
    /// what stopped.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    gpus: Vec<hostbench_gpu::burn::BurnedGpu>,
    /// The GPU (NVML) counters that rose between `health_before` and `health_after`.
    #[serde(default)]
    gpu_rises: Vec<edac::GpuRise>,
    /// The XID events watched while the GPU was burned; absent when it was not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    xid: Option<XidReport>,
}

struct Plan {
    duration: Duration,
    only: Vec<&'static str>,
    mem_share: f64,
    fault: Option<Fault>,
    /// The GPUs to burn, or why there are none (when the GPU is planned).
    gpus: Result<Vec<hostbench_gpu::DeviceInfo>, String>,
}

fn parse(args: &BurnArgs) -> Result<Plan, BenchError> {
    let duration = units::parse_duration(&args.duration)
        .map_err(|e| BenchError::invalid(format!("--duration: {e}")))?;
    if duration.is_zero() {
        return Err(BenchError::invalid("--duration: must be above zero"));
    }
    let backend = args
        .gpu_backend
        .as_deref()
        .map(|b| {
            hostbench_gpu::Backend::parse(b).map_err(|_| {
                BenchError::invalid(format!("--gpu-backend: {b:?} is not cuda or opencl"))
            })
        })
        .transpose()?;
    let named: Option<Vec<&'static str>> = args
        .only
        .as_ref()
        .map(|list| {
            list.split(',')
                .map(|w| {
                    RESOURCES
                        .iter()
                        .copied()
                        .find(|r| *r == w.trim())
                        .ok_or_else(|| {
                            BenchError::invalid(format!(
                                "--only: unknown resource {w:?} (cpu, mem, gpu, disk)"
                            ))
                        })
                })
                .collect::<Result<_, _>>()
        })
        .transpose()?;
    let mem_share = mem_share(&args.mem_share)?;
    let fault = Fault::from_env()?;
    hostbench_cpu::burn::validate_fault(&fault)?;
    // Every input checked, the devices are listed once: for the default plan, which burns the
    // GPUs a node has (asking for a backend plans them too), or where `--only` names the GPU.
    let gpus = if named.as_ref().is_none_or(|o| o.contains(&"gpu")) {
        hostbench_gpu::burn::plan(backend)
    } else {
        Err("not planned".to_string())
    };
    let only = named.unwrap_or_else(|| {
        let mut only = vec!["cpu", "mem"];
        if gpus.is_ok() || backend.is_some() {
            only.push("gpu");
        }
        if args.disk_dir.is_some() {
            only.push("disk");
        }
        only
    });
    Ok(Plan {
        duration,
        only,
        mem_share,
        fault,
        gpus,
    })
}

/// `--mem-share` (of `burn` and of `check --level long`): a share above 0 and at most 0.9 of
/// min(MemAvailable, cgroup limit); more would leave the node's own processes nothing.
pub(crate) fn mem_share(text: &str) -> Result<f64, BenchError> {
    text.parse()
        .ok()
        .filter(|f: &f64| f.is_finite() && *f > 0.0 && *f <= 0.9)
        .ok_or_else(|| {
            BenchError::invalid(format!(
                "--mem-share: {text:?} is not a share above 0 and at most 0.9"
            ))
        })
}

/// Timeline interval: per minute for long runs, per 10 s under 10 min, finer for short tests.
fn interval(d: Duration) -> Duration {
    if d >= Duration::from_secs(600) {
        Duration::from_secs(60)
    } else if d >= Duration::from_secs(60) {
        Duration::from_secs(10)
    } else {
        (d / 6).max(Duration::from_millis(200))
    }
}

pub fn run(args: &BurnArgs) -> anyhow::Result<Exit> {
    let plan = parse(args)?;
    if let Some(dir) = &args.out {
        std::fs::create_dir_all(dir).with_context(|| format!("--out {}", dir.display()))?;
    }
    let (record, exit) = soak(args, &plan)?;
    let text = render(&record);
    let json = serde_json::to_string_pretty(&record)?;
    match args.json.as_deref() {
        Some("-") => {
            eprint!("{text}");
            outln!("{json}");
        }
        Some(path) => {
            out!("{text}");
            write(Path::new(path), &json)?;
        }
        None => out!("{text}"),
    }
    if let Some(dir) = &args.out {
        write(&dir.join("burn.json"), &json)?;
        write(&dir.join("burn.md"), &markdown(&record))?;
        write(&dir.join("burn.html"), &page(&record)?)?;
    }
    Ok(exit)
}

/// The burn itself, printing nothing: its record and the exit code its verdict maps to
/// (`check --level long` folds it into the node's verdict).
fn soak(args: &BurnArgs, plan: &Plan) -> anyhow::Result<(BurnRecord, Exit)> {
    let cpus = affinity::allowed_cpus();
    let inv = host::inventory();
    let health_before = super::health_counters();
    let wants = |r: &str| plan.only.contains(&r);
    let xid_watch = wants("gpu").then(XidWatch::start);
    let parts = plan
        .only
        .iter()
        .filter(|r| matches!(**r, "cpu" | "mem" | "gpu" | "disk"))
        .count()
        .max(1);
    let share = plan.duration / parts as u32;
    let step = interval(plan.duration);
    let mut units = Vec::new();
    let mut timeline = Vec::new();
    // Each burn times its points from its own start; the record's are from the burn's start.
    let t0 = std::time::Instant::now();
    let from_start = |points: Vec<TimelinePoint>, began: f64| {
        points.into_iter().map(move |mut p| {
            p.t_s += began;
            p
        })
    };
    if wants("cpu") {
        let began = t0.elapsed().as_secs_f64();
        let cfg = hostbench_cpu::burn::CpuBurnConfig {
            cpus: cpus.clone(),
            each: share / 2,
            all: share / 2,
            interval: step,
            fault: plan.fault.clone(),
            linpack_n: if share >= Duration::from_secs(20) {
                2000
            } else {
                256
            },
        };
        let b = hostbench_cpu::burn::run(&cfg)?;
        units.extend(b.units);
        timeline.extend(from_start(b.timeline, began));
    }
    let mem_bytes =
        (host::available_memory_bytes() as f64 * plan.mem_share) as u64 & !((2 << 20) - 1);
    let mut mem_huge_bytes = None;
    if wants("mem") {
        let began = t0.elapsed().as_secs_f64();
        let cfg = hostbench_mem::burn::MemBurnConfig {
            bytes: mem_bytes as usize,
            cpus: cpus.clone(),
            duration: share,
            interval: step,
            fault: plan.fault.clone(),
            llc_bytes: hostbench_mem::sizing::llc_total(&inv.cpu.caches),
        };
        let b = hostbench_mem::burn::run(&cfg)?;
        mem_huge_bytes = b.huge_bytes;
        units.extend(b.units);
        timeline.extend(from_start(b.timeline, began));
    }
    let mut gpus = Vec::new();
    if wants("gpu") {
        match &plan.gpus {
            Err(why) => units.push(UnitRun::not_run("gpu", "-", "gpu", why.clone())),
            Ok(devices) => {
                let began = t0.elapsed().as_secs_f64();
                let b = hostbench_gpu::burn::run(&hostbench_gpu::burn::GpuBurnConfig {
                    devices: devices.clone(),
                    duration: share,
                    interval: step,
                    fault: plan.fault.clone(),
                });
                units.extend(b.units);
                timeline.extend(from_start(b.timeline, began));
                gpus = b.devices;
            }
        }
    }
    if wants("disk") {
        match &args.disk_dir {
            None => units.push(UnitRun::not_run("disk", "-", "disk", "needs --disk-dir")),
            Some(dir) => {
                let began = t0.elapsed().as_secs_f64();
                let cfg = hostbench_disk::burn::DiskBurnConfig {
                    dir: dir.clone(),
                    duration: share,
                    interval: step,
                };
                let b = hostbench_disk::burn::run(&cfg)?;
                units.push(b.unit);
                timeline.extend(from_start(b.timeline, began));
            }
        }
    }
    let health_after = super::health_counters();
    let (warned, mut warnings): (Vec<_>, Vec<String>) = slowdowns(&timeline).into_iter().unzip();
    let warned = warned.into_iter().flatten().collect();
    let edac_rises = edac::rises(&health_before, &health_after);
    warnings.extend(edac::warnings(&edac_rises));
    let stopped: Vec<String> = gpus
        .iter()
        .flat_map(|g| g.stopped.iter().map(move |s| format!("{} {s}", g.place)))
        .collect();
    // A GPU is named with its PCI address too: that is what finds it in the machine.
    let labels: Vec<(String, String)> = gpus
        .iter()
        .filter_map(|g| {
            Some((
                g.place.clone(),
                format!("{} ({})", g.place, g.pci_bus.as_ref()?),
            ))
        })
        .collect();
    let (verdict, reason, exit) =
        edac::fold(verdict(&units, &plan.only, &stopped, &labels), &edac_rises);
    let xid = xid_watch.map(|w| w.map_or_else(XidReport::unwatched, XidWatch::finish));
    let gpu_rises = edac::gpu_rises(&health_before, &health_after);
    warnings.extend(edac::gpu_warnings(
        &health_before,
        &health_after,
        &gpu_rises,
        xid.as_ref(),
    ));
    let (verdict, reason, exit) = edac::gpu_fold(
        (verdict, reason, exit),
        (&health_before, &health_after),
        &gpu_rises,
        xid.as_ref(),
    );
    let record = BurnRecord {
        schema: SCHEMA.into(),
        verdict,
        reason,
        duration_s: plan.duration.as_secs_f64(),
        cpu_model: inv.cpu.model.clone(),
        cpus,
        fault_injected: plan.fault.as_ref().map(Fault::describe),
        mem_bytes,
        mem_huge_bytes,
        units,
        timeline,
        warnings,
        warned,
        health_before,
        health_after,
        edac_rises,
        gpus,
        gpu_rises,
        xid,
    };
    Ok((record, exit))
}

/// `check --level long --duration D`: the burn of CPU and memory (and the disk with
/// `disk_dir`) for `duration`, as a check row: `burn`, pass or fail with its first-line reason,
/// unknown where a planned unit could not run.
pub(crate) fn soak_check(
    duration: &str,
    mem_share: &str,
    disk_dir: Option<&Path>,
) -> anyhow::Result<hostbench_core::check::Check> {
    use hostbench_core::check::{Check, Verdict};
    let args = BurnArgs {
        duration: duration.to_string(),
        only: None,
        mem_share: mem_share.into(),
        disk_dir: disk_dir.map(Path::to_path_buf),
        gpu_backend: None,
        json: None,
        out: None,
    };
    let plan = parse(&args)?;
    let (record, _) = soak(&args, &plan)?;
    let checked: u64 = record.units.iter().map(|u| u.checks).sum();
    Ok(Check {
        id: "burn".into(),
        kind: "burn".into(),
        measured: serde_json::Value::from(checked),
        unit: Some("results checked".into()),
        expected: None,
        verdict: match record.verdict.as_str() {
            "pass" => Verdict::Pass,
            "fail" => Verdict::Fail,
            _ => Verdict::Unknown,
        },
        reason: format!(
            "burn {:.0} s: {}",
            plan.duration.as_secs_f64(),
            record.reason
        ),
        diagnosis: Vec::new(),
        retry: None,
    })
}

fn write(path: &Path, text: &str) -> anyhow::Result<()> {
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

/// The verdict, its first-line reason, and the exit code. `labels` names a place more fully
/// where it can (a GPU with its PCI address).
fn verdict(
    units: &[UnitRun],
    only: &[&str],
    stopped: &[String],
    labels: &[(String, String)],
) -> (String, String, Exit) {
    if let Some(u) = units.iter().find(|u| u.status == UnitStatus::Fail) {
        let place = match u.resource.as_str() {
            "mem" => format!(
                "memory {}",
                u.first_error
                    .as_ref()
                    .map_or(u.place.clone(), |m| m.location.clone())
            ),
            _ => labels
                .iter()
                .find(|(p, _)| *p == u.place)
                .map_or(u.place.clone(), |(_, l)| l.clone()),
        };
        let first = u
            .first_error
            .as_ref()
            .map_or(String::new(), |m| format!(" (first at {})", m.describe()));
        let total: u64 = units
            .iter()
            .filter(|v| v.place == u.place && v.unit == u.unit)
            .map(|v| v.errors)
            .sum();
        let reason = format!("{place} {}: {total} wrong results{first}", u.unit);
        return ("fail".into(), reason, Exit::Failure);
    }
    // A planned resource none of whose units ran is not a pass.
    let missing: Vec<&str> = only
        .iter()
        .copied()
        .filter(|r| {
            !units
                .iter()
                .any(|u| u.resource == *r && u.status == UnitStatus::Pass)
        })
        .collect();
    // A device error that stopped a GPU unit midway (a lost device, a failed launch) leaves its
    // work unchecked: not a pass, and not a wrong result either. Where it stopped every unit of
    // a resource, the reason says both.
    let mut reasons = Vec::new();
    if !missing.is_empty() {
        reasons.push(format!("not run: {}", missing.join(", ")));
    }
    if !stopped.is_empty() {
        reasons.push(format!("stopped: {}", stopped.join("; ")));
    }
    if !reasons.is_empty() {
        return ("unknown".into(), reasons.join("; "), Exit::Unknown);
    }
    let checks: u64 = units.iter().map(|u| u.checks).sum();
    (
        "pass".into(),
        format!("{checks} results checked, 0 wrong"),
        Exit::Ok,
    )
}

/// Units whose rate fell more than 10 % over the run: the median of the first third of the full
/// intervals against the median of the last third (the first and last intervals are partial), so
/// one disturbed interval is not a slowdown. Each is (the unit when it is a warning, the line).
/// A fall while other processes and the hypervisor took at least a tenth of a CPU more than at
/// the start is put down to them: a note, not a warning (a neighbour is not the hardware).
fn slowdowns(timeline: &[TimelinePoint]) -> Vec<(Option<String>, String)> {
    // Each unit once, in order of first appearance (the GPU's units take turns, so their
    // points interleave).
    let mut names: Vec<&str> = Vec::new();
    for p in timeline {
        if !names.contains(&p.unit.as_str()) {
            names.push(&p.unit);
        }
    }
    // The middle value, the upper one of an even count: a two-interval window compares its best
    // interval with the other window's best, so one bad interval on either side decides nothing.
    let median = |mut v: Vec<f64>| -> Option<f64> {
        v.sort_by(f64::total_cmp);
        (!v.is_empty()).then(|| v[v.len() / 2])
    };
    let mut out = Vec::new();
    for name in names {
        let pts: Vec<&TimelinePoint> = timeline.iter().filter(|p| p.unit == name).collect();
        if pts.len() < 4 {
            continue;
        }
        let full = &pts[1..pts.len() - 1];
        let w = (full.len() / 3).max(1);
        let (early, late) = (&full[..w], &full[full.len() - w..]);
        let rate = |s: &[&TimelinePoint]| median(s.iter().map(|p| p.rate).collect()).unwrap_or(0.0);
        let (a, b) = (rate(early), rate(late));
        if b >= 0.9 * a {
            continue;
        }
        let others =
            |s: &[&TimelinePoint]| median(s.iter().filter_map(|p| p.others_cpus).collect());
        let cond = |p: &TimelinePoint| {
            format!(
                "clock {} MHz, {} °C",
                p.clock_mhz.map_or("?".into(), |c| format!("{c:.0}")),
                p.temp_c.map_or("?".into(), |t| format!("{t:.0}"))
            )
        };
        let fell = format!(
            "{name}: rate fell {:.0} % over the run ({a:.3e} → {b:.3e} {}",
            100.0 * (1.0 - b / a),
            early[0].rate_unit,
        );
        match (others(early), others(late)) {
            (Some(oa), Some(ob)) if ob - oa >= 0.1 => out.push((
                None,
                format!(
                    "note {fell}) while other processes and the hypervisor took {ob:.2} CPUs \
                     (against {oa:.2} at the start): a neighbour, not counted as a slowdown"
                ),
            )),
            _ => out.push((
                Some(name.to_string()),
                format!(
                    "warn {fell}; {} → {})",
                    cond(early[early.len() / 2]),
                    cond(late[late.len() / 2])
                ),
            )),
        }
    }
    out
}

fn render(r: &BurnRecord) -> String {
    let mut s = format!("{} {}\n", r.verdict.to_uppercase(), r.reason);
    if let Some(f) = &r.fault_injected {
        s += &format!("fault injected: HOSTBENCH_FAULT={f} (this record is a test)\n");
    }
    let cpu_ran = r.units.iter().any(|u| u.cpu.is_some());
    for &cpu in r.cpus.iter().filter(|_| cpu_ran) {
        let mine: Vec<&UnitRun> = r.units.iter().filter(|u| u.cpu == Some(cpu)).collect();
        let bad: Vec<String> = mine
            .iter()
            .filter(|u| u.errors > 0)
            .map(|u| format!("{} {} ({} errors)", u.unit, u.phase, u.errors))
            .collect();
        let checks: u64 = mine.iter().map(|u| u.checks).sum();
        let mut names: Vec<&str> = mine.iter().map(|u| u.unit.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        if bad.is_empty() && checks > 0 {
            s += &format!(
                "cpu{cpu}: pass ({} units, {checks} results checked)\n",
                names.len()
            );
        } else if bad.is_empty() {
            s += &format!("cpu{cpu}: not run\n");
        } else {
            s += &format!("cpu{cpu}: fail: {}\n", bad.join(", "));
        }
    }
    for u in r.units.iter().filter(|u| u.cpu.is_none()) {
        match u.status {
            UnitStatus::NotRun => {
                // The device or directory it was meant for, where one was chosen, and the
                // unit unless the whole resource did not run (`gpu: not run (no GPU …)`).
                let mut name = u.resource.clone();
                if u.place != "-" {
                    name += &format!(" {}", u.place);
                }
                if u.unit != u.resource {
                    name += &format!(" {}", u.unit);
                }
                s += &format!("{name}: not run ({})\n", u.note.as_deref().unwrap_or("-"))
            }
            st => {
                s += &format!(
                    "{} {} {}: {} ({} errors, {:.2} {}{})\n",
                    u.resource,
                    u.place,
                    u.unit,
                    st.name(),
                    u.errors,
                    if u.rate_unit == "GB/s" {
                        u.rate
                    } else {
                        u.rate / 1e9
                    },
                    if u.rate_unit == "GB/s" { "GB/s" } else { "G" },
                    if u.rate_unit == "GB/s" {
                        ""
                    } else {
                        &u.rate_unit
                    },
                )
            }
        }
    }
    for g in &r.gpus {
        s += &gpu_line(g);
        s += "\n";
    }
    for w in &r.warnings {
        s += &format!("{w}\n");
    }
    s
}

/// "cuda0 (NVIDIA H200): 132 of 132 SMs covered, 126.4 GiB under patterns; errors by SM: sm5 3".
fn gpu_line(g: &hostbench_gpu::burn::BurnedGpu) -> String {
    let covered = match g.sms_covered {
        Some(c) => format!("{c} of {} SMs covered", g.sms),
        None => format!(
            "{} compute units (the backend does not say which ran what)",
            g.sms
        ),
    };
    let mut s = format!(
        "{} ({}): {covered}, {:.1} GiB under patterns",
        g.place,
        g.name,
        g.mem_bytes as f64 / f64::from(1u32 << 30)
    );
    if !g.errors_by_sm.is_empty() {
        let by: Vec<String> = g
            .errors_by_sm
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        s += &format!("; errors by SM: {}", by.join(", "));
    }
    for why in &g.stopped {
        s += &format!("; stopped: {why}");
    }
    s
}

fn markdown(r: &BurnRecord) -> String {
    let mut s = format!(
        "# Burn-in: {} — {}\n\n{} for {:.0} s on {} (CPUs {:?})\n\n",
        r.verdict.to_uppercase(),
        r.reason,
        r.schema,
        r.duration_s,
        r.cpu_model,
        r.cpus
    );
    s += "| unit | place | phase | status | checks | errors | rate |\n|---|---|---|---|---:|---:|---:|\n";
    for u in &r.units {
        s += &row(&[
            u.unit.clone(),
            u.place.clone(),
            u.phase.clone(),
            u.status.name().into(),
            u.checks.to_string(),
            u.errors.to_string(),
            format!("{:.3e} {}", u.rate, u.rate_unit),
        ]);
    }
    s += "\n## Timeline\n\n| t (s) | unit | rate | clock (MHz) | temp (°C) |\n|---:|---|---:|---:|---:|\n";
    for p in &r.timeline {
        s += &row(&[
            format!("{:.1}", p.t_s),
            p.unit.clone(),
            format!("{:.3e} {}", p.rate, p.rate_unit),
            p.clock_mhz.map_or("-".into(), |c| format!("{c:.0}")),
            p.temp_c.map_or("-".into(), |t| format!("{t:.0}")),
        ]);
    }
    if !r.gpus.is_empty() {
        s += "\n## GPUs\n\n";
        for g in &r.gpus {
            s += &format!("- {}\n", gpu_line(g));
        }
    }
    for w in &r.warnings {
        s += &format!("\n- {w}");
    }
    s += &edac::markdown(&r.edac_rises);
    s += &edac::gpu_markdown(
        &r.gpu_rises,
        r.xid.as_ref(),
        (&r.health_before, &r.health_after),
    );
    s
}

/// burn.html: the verdict, the units table and the timeline charts (hostbench-report's `burn`).
fn page(r: &BurnRecord) -> anyhow::Result<String> {
    let verdict_line = format!("{} {}", r.verdict.to_uppercase(), r.reason);
    let mut meta = format!(
        "{} for {:.0} s on {} (CPUs {:?})",
        r.schema, r.duration_s, r.cpu_model, r.cpus
    );
    if let Some(f) = &r.fault_injected {
        meta += &format!("; fault injected: HOSTBENCH_FAULT={f} (this record is a test)");
    }
    Ok(hostbench_report::burn::html(
        &hostbench_report::burn::BurnPage {
            verdict_line: &verdict_line,
            meta: &meta,
            units: &r.units,
            timeline: &r.timeline,
            warnings: &r.warnings,
            warned: &r.warned,
        },
    )?)
}

/// `hostbench report burn.json`: a saved burn record (told from a run by its schema) rendered
/// again: `--html` the page, `--md` the Markdown, else the terminal lines. `None` when `path` is
/// not a readable burn record, so the run loader reports what it is.
pub(crate) fn report(path: &Path, args: &crate::cli::ReportArgs) -> anyhow::Result<Option<Exit>> {
    use hostbench_report::ReportError;
    let Ok(text) = std::fs::read_to_string(path) else {
        return Ok(None);
    };
    let Ok(value) = serde_json::from_str::<serde_json::Value>(&text) else {
        return Ok(None);
    };
    if value.get("schema").and_then(serde_json::Value::as_str) != Some(SCHEMA) {
        return Ok(None);
    }
    let bad = |why: String| ReportError::bad(format!("{}: {why}", path.display()));
    for (name, given) in [
        ("csv", args.csv.is_some()),
        ("openmetrics", args.openmetrics.is_some()),
        ("png", args.png.is_some()),
    ] {
        if given {
            return Err(bad(format!(
                "--{name}: a burn record renders only as --html, --md or on the terminal"
            ))
            .into());
        }
    }
    let mut rec: BurnRecord = serde_json::from_value(value).map_err(|e| {
        bad(format!(
            "does not follow {SCHEMA}: {}",
            e.to_string()
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
        ))
    })?;
    rec.warned = slowdowns(&rec.timeline)
        .into_iter()
        .filter_map(|(u, _)| u)
        .collect();
    // Resolve every target before writing anything, so a bad one writes nothing.
    let mut targets = Vec::new();
    for (name, value) in [("html", &args.html), ("md", &args.md)] {
        if let Some(v) = value {
            targets.push((name, crate::settings::out_target(name, v)?));
        }
    }
    let mut to_stdout = false;
    for (name, target) in targets {
        let text = if name == "html" {
            page(&rec)?
        } else {
            markdown(&rec)
        };
        match target {
            crate::settings::JsonTarget::Stdout => {
                out!("{text}");
                to_stdout = true;
            }
            crate::settings::JsonTarget::File(p) => {
                hostbench_report::export::write_atomic(&p, &text)
                    .map_err(|e| ReportError::bad(format!("--{name}: {e}")))?;
                eprintln!("wrote {}", p.display());
            }
        }
    }
    if !args.quiet && !to_stdout {
        out!("{}", render(&rec));
    }
    Ok(Some(Exit::Ok))
}

/// One Markdown table row.
fn row(cells: &[String]) -> String {
    format!("| {} |\n", cells.join(" | "))
}

#[cfg(test)]
mod tests;

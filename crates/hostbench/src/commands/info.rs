//! `hostbench info`: what this machine is and what it could do at most.

use std::fmt::Write as _;

use hostbench_core::health::HealthExt;
use hostbench_core::model::{Health, Severity};
use hostbench_core::spec::Spec;
use hostbench_core::units::{format_bytes_iec, format_value};
use serde_json::json;

use crate::cli::InfoArgs;
use crate::registry::SUBSYSTEMS;
use crate::Exit;
use hostbench_core::subsystem::PeakLine;

pub fn run(args: &InfoArgs) -> anyhow::Result<Exit> {
    let spec = match &args.spec {
        Some(p) => Spec::load(p)?,
        None => Spec::default(),
    };
    let mut host = super::host_inventory(&spec);
    let order = hostbench_core::affinity::placement_order();
    if order.len() > 1 {
        if let Ok(e) = hostbench_cpu::effective::probe(&order) {
            host.cpu.effective_cores = Some(e.value);
            host.cpu.effective_cores_note = Some(e.summary());
            host.cpu.effective_cores_basis = Some(e.basis);
        }
    }
    // Every subsystem states its own peaks (the registry's order).
    let peaks: Vec<PeakLine> = SUBSYSTEMS
        .iter()
        .flat_map(|s| s.peaks(&host, &spec))
        .collect();
    if args.json {
        let dram = peaks
            .iter()
            .find(|p| p.subsystem == "mem")
            .and_then(|p| p.peak.clone());
        let doc = json!({
            "schema": "hostbench/info/v1",
            "tool": {"name": "hostbench", "version": env!("CARGO_PKG_VERSION")},
            "host": host,
            "peaks": peaks,
            "dram_peak": dram,
        });
        outln!("{}", serde_json::to_string_pretty(&doc)?);
        return Ok(Exit::Ok);
    }
    let c = &host.cpu;
    let mut o = String::new();
    let unknown = |v: &Option<f64>| v.map_or("unknown".to_string(), |hz| format_value(hz, "Hz"));
    writeln!(
        o,
        "Host        {} — {}, kernel {}",
        host.hostname, host.os, host.kernel
    )?;
    writeln!(o, "Virtual     {}", host.virtualization)?;
    writeln!(
        o,
        "CPU         {} {}{}",
        c.vendor,
        c.model,
        c.microarch
            .as_deref()
            .map_or(String::new(), |u| format!(" ({u})"))
    )?;
    if let Some(basis) = &c.microarch_basis {
        writeln!(o, "Identified  {basis}")?;
    }
    writeln!(
        o,
        "Topology    {} socket(s), {} cores, {} threads, {} NUMA node(s)",
        c.sockets, c.cores, c.threads, host.numa_nodes
    )?;
    if let (Some(note), Some(basis)) = (&c.effective_cores_note, &c.effective_cores_basis) {
        writeln!(o, "Effective   {note}")?;
        writeln!(o, "            ({basis})")?;
    }
    writeln!(o, "ISA         {}", c.isa.join(" "))?;
    writeln!(
        o,
        "Clock       measured {} (dependent-add chain); nominal {}; governor {}",
        unknown(&c.measured_hz),
        unknown(&c.nominal_hz),
        host.governor.as_deref().unwrap_or("none exposed")
    )?;
    for cache in &c.caches {
        writeln!(
            o,
            "Cache       L{} {:<11} {} x {}",
            cache.level,
            cache.kind,
            format_bytes_iec(cache.size_bytes),
            cache.instances
        )?;
    }
    writeln!(
        o,
        "Memory      {} total",
        format_bytes_iec(host.memory.total_bytes)
    )?;
    if let Some(h) = &host.health {
        write_health(&mut o, h)?;
    }
    writeln!(
        o,
        "\nTheoretical peaks (all cores; the widest general ISA, then each dot-product or matrix unit; GFLOP/s = 10^9 FLOP/s):"
    )?;
    for p in &peaks {
        match &p.peak {
            Some(pk) => writeln!(
                o,
                "  {:<7} {:<16} {:>14}   = {}",
                p.subsystem,
                p.what,
                format_value(pk.value, &p.unit),
                pk.basis
            )?,
            None => writeln!(
                o,
                "  {:<7} {:<16} {:>14}   ({})",
                p.subsystem, p.what, "unknown", p.note
            )?,
        }
    }
    out!("{o}");
    Ok(Exit::Ok)
}

/// The hardware counters in a few lines: what was read, each finding above `info`, and each
/// source that could not be read with why (so "no errors" is never said of a counter not read).
fn write_health(o: &mut String, h: &Health) -> std::fmt::Result {
    // Each source read, with its count of devices, in the order read.
    let mut read: Vec<(&str, usize)> = Vec::new();
    for r in &h.readings {
        let id = r.id.trim_start_matches("health.");
        match read.iter_mut().find(|(s, _)| *s == id) {
            Some((_, n)) => *n += 1,
            None => read.push((id, 1)),
        }
    }
    let read: Vec<String> = read.iter().map(|(id, n)| format!("{id} ({n})")).collect();
    let worst = match h.worst() {
        Some(Severity::Fail) => "FAULTS FOUND",
        Some(Severity::Warn) => "worth a look",
        _ if h.readings.is_empty() => "nothing readable",
        _ => "no fault found",
    };
    writeln!(
        o,
        "Health      {worst}; read: {}",
        if read.is_empty() {
            "nothing".into()
        } else {
            read.join(", ")
        }
    )?;
    if let Some(root) = &h.root {
        writeln!(
            o,
            "            (read from the fixture tree {root}, not this host)"
        )?;
    }
    for r in &h.readings {
        for f in r.findings.iter().filter(|f| f.severity > Severity::Info) {
            writeln!(o, "  {:<5} {}", f.severity.name(), f.text)?;
        }
    }
    for (id, why) in &h.unavailable {
        writeln!(
            o,
            "  {:<5} {}: {why}",
            "n/a",
            id.trim_start_matches("health.")
        )?;
    }
    Ok(())
}

//! The kernel log since boot (`/dev/kmsg`), read for what the hardware reported there: the NVIDIA
//! driver's XID lines (`health.xid`, per GPU) and machine-check "Hardware Error" lines, with the
//! machine-check exception count of `/proc/interrupts` (`health.mce`).
//!
//! Why `/dev/kmsg` and not `dmesg`: no fork, and it reads the ring buffer record by record with
//! its own framing. It needs root where `kernel.dmesg_restrict` is set (the default on Debian), and
//! is absent in many containers; then the XID source is unavailable with that reason, never "no
//! XIDs".
//!
//! Which XIDs fail a GPU follows NVIDIA's XID catalogue: double-bit and uncontained ECC errors,
//! row-remap failures, NVLink errors, a GPU fallen off the bus and GSP errors are the hardware's;
//! the others (13, 31, 43, 45: an application's fault) are context.

use std::collections::BTreeMap;
use std::path::Path;

use super::source::{at, finding, put, read_trim, reading, Part};
use crate::model::{HealthReading, Severity};

/// XIDs that mean the GPU (or its memory or links) is at fault, and what each is.
const HARDWARE_XIDS: [(u32, &str); 10] = [
    (48, "double-bit ECC error"),
    (62, "internal micro-controller halt"),
    (64, "ECC page retirement or row remapping failure"),
    (74, "NVLink error"),
    (79, "GPU has fallen off the bus"),
    (95, "uncontained ECC error"),
    (109, "context switch timeout"),
    (119, "GSP RPC timeout"),
    (120, "GSP error"),
    (140, "unrecovered ECC error"),
];

/// XIDs worth a look but not a fault on their own.
const WARN_XIDS: [(u32, &str); 3] = [
    (63, "ECC page retirement or row remapping event"),
    (92, "high single-bit ECC error rate"),
    (94, "contained ECC error"),
];

/// XIDs an application's own fault raises as a rule (a bad address, an exception in its kernel,
/// a killed process): context, not a hardware verdict on their own.
const APPLICATION_XIDS: [(u32, &str); 4] = [
    (
        13,
        "graphics engine exception: as a rule an application's kernel fault",
    ),
    (
        31,
        "GPU memory page fault: as a rule an application's illegal address",
    ),
    (
        43,
        "GPU stopped processing: as a rule an application's fault",
    ),
    (
        45,
        "preemptive cleanup after an earlier error or a killed application",
    ),
];

/// What NVIDIA's XID catalogue says `code` is, for the well-known ones, with the class the
/// since-boot reading gives it: `Fail` the hardware's fault, `Warn` a hardware event worth a look,
/// `Info` an application's fault as a rule. `None`: look it up in the catalogue. Shared with the
/// GPU crate's XID watch during `hostbench burn`, which judges by the same table.
pub fn xid_meaning(code: u64) -> Option<(Severity, &'static str)> {
    let find = |table: &[(u32, &'static str)]| {
        table
            .iter()
            .find(|(c, _)| u64::from(*c) == code)
            .map(|(_, w)| *w)
    };
    find(&HARDWARE_XIDS)
        .map(|w| (Severity::Fail, w))
        .or_else(|| find(&WARN_XIDS).map(|w| (Severity::Warn, w)))
        .or_else(|| find(&APPLICATION_XIDS).map(|w| (Severity::Info, w)))
}

/// The log's messages, one per record (the text after the `prio,seq,ts,flags;` prefix).
pub(crate) fn read(root: &Path) -> Result<Vec<String>, String> {
    let path = at(root, "dev/kmsg");
    let text = if root == Path::new("/") {
        read_live(&path)?
    } else {
        std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?
    };
    Ok(text
        .lines()
        // Continuation lines (the record's key=value dictionary) start with a space.
        .filter(|l| !l.starts_with(' '))
        .map(|l| l.split_once(';').map_or(l, |(_, m)| m).to_string())
        .collect())
}

/// Every record of `/dev/kmsg`: one `read` returns one record, and EAGAIN marks the end.
fn read_live(path: &Path) -> Result<String, String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| {
            format!(
                "the kernel log is not readable (open {}: {e}; it needs root where \
                 kernel.dmesg_restrict is set)",
                path.display()
            )
        })?;
    let mut out = String::new();
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match f.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                out.push_str(&String::from_utf8_lossy(&buf[..n]));
                if !out.ends_with('\n') {
                    out.push('\n');
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
            // EPIPE: the record we were at was overwritten; the next read resumes at the oldest.
            Err(e) if e.raw_os_error() == Some(libc::EPIPE) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(format!("reading {}: {e}", path.display())),
        }
    }
    Ok(out)
}

/// "NVRM: Xid (PCI:0000:41:00): 79, pid=…" → ("0000:41:00", 79, the message).
fn parse_xid(msg: &str) -> Option<(String, u32)> {
    let rest = &msg[msg.find("NVRM: Xid (")? + "NVRM: Xid (".len()..];
    let (dev, rest) = rest.split_once(')')?;
    let dev = dev.trim_start_matches("PCI:").to_string();
    let code = rest
        .trim_start_matches(':')
        .trim()
        .split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()?;
    Some((dev, code))
}

/// `health.xid`: per GPU (by PCI address as the driver prints it), the XIDs seen since boot; one
/// reading with a zero count where there were none, so "read, none" differs from "not read".
pub(crate) fn xids(log: &[String]) -> Vec<HealthReading> {
    let mut by_dev: BTreeMap<String, (BTreeMap<u32, u64>, String)> = BTreeMap::new();
    for msg in log {
        if let Some((dev, code)) = parse_xid(msg) {
            let e = by_dev.entry(dev).or_default();
            *e.0.entry(code).or_insert(0) += 1;
            e.1.clone_from(msg);
        }
    }
    if by_dev.is_empty() {
        let mut r = reading("health.xid", "kernel log", None);
        put(&mut r, "xid_events", Some(0));
        return vec![r];
    }
    by_dev
        .into_iter()
        .map(|(dev, (codes, last))| {
            let mut r = reading("health.xid", &dev, None);
            put(&mut r, "xid_events", Some(codes.values().sum::<u64>()));
            let list: Vec<String> = codes.iter().map(|(c, n)| format!("{c} x{n}")).collect();
            put(&mut r, "xids", Some(list.join(", ")));
            // Each code's count as a number too, so a reader comparing two readings (the
            // burn's before and after) needs no parsing of the list above.
            for (c, n) in &codes {
                put(&mut r, &format!("xid_{c}"), Some(*n));
            }
            put(&mut r, "last", Some(last));
            for (&code, &n) in &codes {
                let (severity, what) = xid_meaning(u64::from(code))
                    .unwrap_or((Severity::Info, "an application's or driver's event"));
                finding(
                    &mut r,
                    severity,
                    format!("GPU {dev}: XID {code} x{n} since boot ({what})"),
                );
            }
            r
        })
        .collect()
}

/// `health.mce`: machine-check exceptions counted in `/proc/interrupts` (x86's `MCE:` line) and
/// the kernel log's "Hardware Error" lines. Unavailable where neither exists.
pub(crate) fn machine_checks(root: &Path, log: Option<&Vec<String>>) -> Part {
    let exceptions = read_trim(&at(root, "proc/interrupts")).and_then(|t| {
        let line = t.lines().find(|l| l.trim_start().starts_with("MCE:"))?;
        Some(
            line.split_whitespace()
                .skip(1)
                .map_while(|w| w.parse::<u64>().ok())
                .sum::<u64>(),
        )
    });
    if exceptions.is_none() && log.is_none() {
        return Err(
            "neither an MCE line in /proc/interrupts (not x86, or a VM without \
                    machine checks) nor a readable kernel log"
                .to_string(),
        );
    }
    let mut r = reading("health.mce", "cpus", None);
    put(&mut r, "machine_check_exceptions", exceptions);
    let hw: Vec<&String> = log
        .into_iter()
        .flatten()
        .filter(|m| m.contains("Hardware Error"))
        .collect();
    if log.is_some() {
        put(&mut r, "hardware_error_lines", Some(hw.len()));
    }
    if let Some(n) = exceptions.filter(|&n| n > 0) {
        finding(
            &mut r,
            Severity::Warn,
            format!("{n} machine-check exception(s) since boot"),
        );
    }
    if let Some(first) = hw.first() {
        let text: String = first.chars().take(160).collect();
        finding(
            &mut r,
            Severity::Warn,
            format!(
                "{} \"Hardware Error\" line(s) in the kernel log, first: {text}",
                hw.len()
            ),
        );
    }
    Ok(vec![r])
}

#[cfg(test)]
mod tests {
    use super::super::test_util::put as write;
    use super::*;

    const LOG: &str = "6,1,100,-;Linux version 6.1.0\n \
SUBSYSTEM=pci\n\
4,2,200,-;NVRM: Xid (PCI:0000:41:00): 79, pid=1234, name=python, GPU has fallen off the bus.\n\
4,3,300,-;NVRM: Xid (PCI:0000:41:00): 13, pid=1, Graphics SM Warp Exception\n\
4,4,400,-;NVRM: Xid (PCI:0000:41:00): 13, pid=1, Graphics SM Warp Exception\n\
4,5,500,-;NVRM: Xid (0000:c1:00): 92, High single-bit ECC error rate\n\
3,6,600,-;mce: [Hardware Error]: Machine check events logged\n";

    #[test]
    fn xids_are_counted_per_gpu_and_the_hardware_ones_fail() {
        let dir = tempfile::tempdir().expect("tempdir");
        write(dir.path(), "dev/kmsg", LOG);
        let log = read(dir.path()).expect("log");
        assert_eq!(log.len(), 6, "continuation lines dropped: {log:?}");
        let r = xids(&log);
        assert_eq!(r.len(), 2);
        assert_eq!(r[0].device, "0000:41:00");
        assert_eq!(r[0].values["xid_events"], 3);
        assert_eq!(r[0].values["xids"], "13 x2, 79 x1");
        assert_eq!(
            (r[0].values["xid_13"].clone(), r[0].values["xid_79"].clone()),
            (2.into(), 1.into())
        );
        let sev: Vec<Severity> = r[0].findings.iter().map(|f| f.severity).collect();
        assert_eq!(sev, [Severity::Info, Severity::Fail]);
        assert!(r[0].findings[1].text.contains("fallen off the bus"));
        assert!(
            r[0].findings[0].text.contains("application's kernel fault"),
            "{:?}",
            r[0].findings[0]
        );
        assert_eq!(r[1].device, "0000:c1:00");
        assert_eq!(r[1].findings[0].severity, Severity::Warn);
    }

    #[test]
    fn a_log_without_xids_reads_zero_and_machine_checks_are_counted() {
        let dir = tempfile::tempdir().expect("tempdir");
        write(dir.path(), "dev/kmsg", "6,1,100,-;Linux version 6.1.0\n");
        write(
            dir.path(),
            "proc/interrupts",
            "           CPU0       CPU1\n  0:         10          0   IO-APIC   2-edge  timer\n\
             MCE:          1          2   Machine check exceptions\n\
             MCP:         40         40   Machine check polls\n",
        );
        let log = read(dir.path()).expect("log");
        let r = xids(&log);
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].values["xid_events"], 0);
        let m = machine_checks(dir.path(), Some(&log)).expect("mce");
        assert_eq!(m[0].values["machine_check_exceptions"], 3);
        assert_eq!(m[0].values["hardware_error_lines"], 0);
        assert_eq!(m[0].findings[0].severity, Severity::Warn);
        assert!(machine_checks(Path::new("/nonexistent"), None).is_err());
    }

    #[test]
    fn hardware_error_lines_are_quoted() {
        let log: Vec<String> = LOG
            .lines()
            .map(|l| l.split_once(';').map_or(l, |x| x.1).to_string())
            .collect();
        let m = machine_checks(Path::new("/nonexistent"), Some(&log)).expect("mce");
        assert_eq!(m[0].values.get("machine_check_exceptions"), None);
        assert_eq!(m[0].values["hardware_error_lines"], 1);
        assert!(m[0].findings[0]
            .text
            .contains("Machine check events logged"));
    }
}

//! `health.nvme`: each NVMe controller's SMART / health log (log page 0x02): the critical-warning
//! bits, media and data-integrity errors, percentage of rated endurance used, available spare,
//! temperature and unsafe shutdowns.
//!
//! Read with the kernel's admin pass-through ioctl on `/dev/nvmeN` (what `nvme smart-log` sends),
//! so no nvme-cli is needed; it needs root, and where it is refused the reading says so rather
//! than showing no errors. In a fixture tree the page is the 512-byte file `dev/nvmeN.smart-log`.

use std::path::Path;

use super::source::{at, finding, numbered, put, read_trim, reading, Part};
use crate::model::{HealthReading, Severity};

const NVME: &str = "sys/class/nvme";
const LOG_BYTES: usize = 512;

/// The critical-warning bits (NVMe base specification, SMART / Health Information log, byte 0).
const CRITICAL: [(u8, &str); 6] = [
    (0x01, "available spare below its threshold"),
    (0x02, "temperature beyond a threshold"),
    (0x04, "reliability degraded by media or internal errors"),
    (0x08, "media placed in read-only mode"),
    (0x10, "volatile memory backup failed"),
    (0x20, "persistent memory region read-only"),
];

/// The health log's fields, as read from its 512 bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SmartLog {
    pub critical_warning: u8,
    pub temperature_k: u16,
    pub available_spare_pct: u8,
    pub spare_threshold_pct: u8,
    pub percentage_used: u8,
    pub power_on_hours: u128,
    pub unsafe_shutdowns: u128,
    pub media_errors: u128,
    pub error_log_entries: u128,
}

/// Decode a SMART / health log page; None when it is not 512 bytes.
pub fn parse_smart_log(page: &[u8]) -> Option<SmartLog> {
    if page.len() != LOG_BYTES {
        return None;
    }
    let u128_at = |o: usize| {
        let mut b = [0u8; 16];
        b.copy_from_slice(&page[o..o + 16]);
        u128::from_le_bytes(b)
    };
    Some(SmartLog {
        critical_warning: page[0],
        temperature_k: u16::from_le_bytes([page[1], page[2]]),
        available_spare_pct: page[3],
        spare_threshold_pct: page[4],
        percentage_used: page[5],
        power_on_hours: u128_at(128),
        unsafe_shutdowns: u128_at(144),
        media_errors: u128_at(160),
        error_log_entries: u128_at(176),
    })
}

pub(crate) fn read(root: &Path) -> Part {
    let ctrls = numbered(&at(root, NVME), "nvme");
    if ctrls.is_empty() {
        return Err(format!("no NVMe controller (/{NVME} empty or absent)"));
    }
    let live = root == Path::new("/");
    Ok(ctrls
        .into_iter()
        .map(|(name, dir)| {
            let page = if live {
                admin_log(&name)
            } else {
                std::fs::read(at(root, &format!("dev/{name}.smart-log")))
                    .map_err(|e| format!("dev/{name}.smart-log: {e}"))
            };
            one(&name, &dir, page)
        })
        .collect())
}

fn one(name: &str, dir: &Path, page: Result<Vec<u8>, String>) -> HealthReading {
    let model = read_trim(&dir.join("model"));
    let mut r = reading("health.nvme", name, model);
    put(&mut r, "firmware", read_trim(&dir.join("firmware_rev")));
    let log = page.and_then(|p| {
        parse_smart_log(&p).ok_or_else(|| format!("a health log of {} bytes, not 512", p.len()))
    });
    let log = match log {
        Ok(l) => l,
        Err(why) => {
            put(&mut r, "health_log", Some(format!("unreadable: {why}")));
            return r;
        }
    };
    let clamp = |v: u128| u64::try_from(v).unwrap_or(u64::MAX);
    put(&mut r, "critical_warning", Some(log.critical_warning));
    put(&mut r, "media_errors", Some(clamp(log.media_errors)));
    put(&mut r, "percentage_used", Some(log.percentage_used));
    put(&mut r, "available_spare_pct", Some(log.available_spare_pct));
    put(&mut r, "spare_threshold_pct", Some(log.spare_threshold_pct));
    put(
        &mut r,
        "error_log_entries",
        Some(clamp(log.error_log_entries)),
    );
    put(
        &mut r,
        "unsafe_shutdowns",
        Some(clamp(log.unsafe_shutdowns)),
    );
    put(&mut r, "power_on_hours", Some(clamp(log.power_on_hours)));
    if log.temperature_k > 0 {
        put(
            &mut r,
            "temperature_c",
            Some(f64::from(log.temperature_k) - 273.15),
        );
    }
    let bits: Vec<&str> = CRITICAL
        .iter()
        .filter(|(b, _)| log.critical_warning & b != 0)
        .map(|(_, w)| *w)
        .collect();
    if !bits.is_empty() {
        finding(
            &mut r,
            Severity::Fail,
            format!(
                "{name} critical warning 0x{:02x}: {}",
                log.critical_warning,
                bits.join(", ")
            ),
        );
    }
    if log.media_errors > 0 {
        finding(
            &mut r,
            Severity::Fail,
            format!(
                "{name}: {} unrecovered media or data-integrity error(s)",
                log.media_errors
            ),
        );
    }
    if log.percentage_used >= 100 {
        finding(
            &mut r,
            Severity::Warn,
            format!(
                "{name} has used {} % of its rated endurance",
                log.percentage_used
            ),
        );
    }
    r
}

/// The kernel's `struct nvme_passthru_cmd` (linux/nvme_ioctl.h), 72 bytes.
#[repr(C)]
#[derive(Default)]
struct Passthru {
    opcode: u8,
    flags: u8,
    rsvd1: u16,
    nsid: u32,
    cdw2: u32,
    cdw3: u32,
    metadata: u64,
    addr: u64,
    metadata_len: u32,
    data_len: u32,
    cdw10: u32,
    cdw11: u32,
    cdw12: u32,
    cdw13: u32,
    cdw14: u32,
    cdw15: u32,
    timeout_ms: u32,
    result: u32,
}

/// `_IOWR('N', 0x41, struct nvme_passthru_cmd)`.
const NVME_IOCTL_ADMIN_CMD: u64 = (3 << 30) | (72 << 16) | ((b'N' as u64) << 8) | 0x41;

/// Get Log Page (admin opcode 0x02), log 0x02, for all namespaces, 512 bytes.
fn admin_log(name: &str) -> Result<Vec<u8>, String> {
    use std::os::fd::AsRawFd;
    let path = format!("/dev/{name}");
    let f = std::fs::File::open(&path).map_err(|e| format!("open {path}: {e}"))?;
    let mut page = vec![0u8; LOG_BYTES];
    let mut cmd = Passthru {
        opcode: 0x02,
        nsid: 0xffff_ffff,
        addr: page.as_mut_ptr() as u64,
        data_len: LOG_BYTES as u32,
        // Number of dwords minus one in the upper half, the log identifier in the lower.
        cdw10: (((LOG_BYTES / 4 - 1) as u32) << 16) | 0x02,
        timeout_ms: 5000,
        ..Passthru::default()
    };
    // SAFETY: the command points at `page`, which outlives the call and is `data_len` bytes long;
    // the kernel writes at most that many bytes into it and fills `cmd.result`.
    let rc = unsafe { libc::ioctl(f.as_raw_fd(), NVME_IOCTL_ADMIN_CMD as _, &mut cmd) };
    match rc {
        0 => Ok(page),
        rc if rc < 0 => Err(format!(
            "the health-log command on {path} failed: {}",
            std::io::Error::last_os_error()
        )),
        status => Err(format!(
            "the controller {path} answered status 0x{status:x}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_util::put;
    use super::*;

    fn page(critical: u8, used: u8, media: u128) -> Vec<u8> {
        let mut p = vec![0u8; LOG_BYTES];
        p[0] = critical;
        p[1..3].copy_from_slice(&313u16.to_le_bytes());
        p[3] = 100;
        p[4] = 10;
        p[5] = used;
        p[160..176].copy_from_slice(&media.to_le_bytes());
        p[128..144].copy_from_slice(&8760u128.to_le_bytes());
        p
    }

    #[test]
    fn the_passthru_struct_has_the_kernels_size() {
        assert_eq!(std::mem::size_of::<Passthru>(), 72);
        assert_eq!(NVME_IOCTL_ADMIN_CMD, 0xC048_4E41);
    }

    #[test]
    fn a_healthy_log_has_no_finding_and_critical_bits_and_media_errors_fail() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        put(
            root,
            &format!("{NVME}/nvme0/model"),
            "Samsung SSD 990 PRO 2TB\n",
        );
        put(root, &format!("{NVME}/nvme1/model"), "Worn drive\n");
        put(root, &format!("{NVME}/nvme2/model"), "No log here\n");
        std::fs::create_dir_all(root.join("dev")).expect("dev");
        std::fs::write(root.join("dev/nvme0.smart-log"), page(0, 3, 0)).expect("log");
        std::fs::write(root.join("dev/nvme1.smart-log"), page(0x05, 104, 2)).expect("log");
        let r = read(root).expect("read");
        assert_eq!(r[0].values["percentage_used"], 3);
        assert_eq!(r[0].values["power_on_hours"], 8760);
        assert!((r[0].values["temperature_c"].as_f64().expect("temp") - 39.85).abs() < 1e-9);
        assert!(r[0].findings.is_empty(), "{:?}", r[0].findings);
        let sev: Vec<Severity> = r[1].findings.iter().map(|f| f.severity).collect();
        assert_eq!(sev, [Severity::Fail, Severity::Fail, Severity::Warn]);
        assert!(r[1].findings[0]
            .text
            .contains("available spare below its threshold"));
        assert!(r[1].findings[0].text.contains("reliability degraded"));
        assert!(r[2].values["health_log"]
            .as_str()
            .expect("why")
            .starts_with("unreadable"));
        assert_eq!(r[2].values.get("media_errors"), None, "unread is not zero");
    }
}

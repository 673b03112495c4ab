//! `health.gpu`: each NVIDIA GPU's error and link counters through NVML: ECC counts (volatile
//! since the driver loaded, and aggregate over the board's life, with SRAM and DRAM apart where the
//! GPU tells them), retired pages and their pending state (up to Volta), row remapping (Ampere
//! on: correctable and uncorrectable rows, pending, failed), the PCIe link (current against the
//! GPU's and the system's maximum generation and width, replay count) and the clock event reasons.
//!
//! What fails on its own follows the operators' experience rather than a watch on every bit: an
//! uncorrectable error since the driver loaded, a pending or failed row remap (Azure's H100 rule),
//! retired pages pending, a link narrower than both ends allow. A software power cap is context
//! (hostbench has seen it set at 250–300 W of 700 W on a healthy H200), and hardware slowdown or
//! the power brake read once at rest is worth a look, not a verdict: DCGM's users saw a 0.0 s
//! violation fail a run (DCGM #242) and a power watch flag 69 % of a healthy cluster (#285).
//! A counter NVML does not support or refuses is listed with why, never read as zero.
//!
//! The answers are gathered first (`GpuAnswers`, one per GPU) and judged apart (`reading`), so the
//! judgement is tested on any answer NVML could give without a GPU.

use std::ffi::{c_char, c_int, c_uint, c_ulonglong, c_void};

use hostbench_core::health::link_peak_bps;
use hostbench_core::model::{HealthFinding, HealthReading, Params, Severity};
use serde_json::Value;

use crate::nvml::{load, reason_names};

type Device = *mut c_void;
type Ret = c_int;

const NOT_SUPPORTED: Ret = 3;
const NO_PERMISSION: Ret = 4;
/// Not an NVML code: the symbol is not in this driver's library.
const NO_SYMBOL: Ret = -1;

/// What NVML answered for one GPU: each counter by name, or NVML's return code.
#[derive(Debug, Clone, Default)]
pub struct GpuAnswers {
    pub index: u32,
    pub name: Option<String>,
    /// "0000:41:00.0"
    pub bus: Option<String>,
    pub counters: Vec<(&'static str, Result<u64, i32>)>,
}

impl GpuAnswers {
    fn get(&self, key: &str) -> Option<u64> {
        self.counters
            .iter()
            .find(|(k, _)| *k == key)
            .and_then(|(_, v)| v.ok())
    }
}

/// Every GPU NVML lists, read now; why not where NVML is absent or lists none.
pub fn read() -> Result<Vec<HealthReading>, String> {
    let lib = load()?;
    // SAFETY: NVML's documented signatures; handles come from NVML and live as long as `lib`.
    unsafe {
        let count = lib
            .get::<unsafe extern "C" fn(*mut c_uint) -> Ret>(b"nvmlDeviceGetCount_v2\0")
            .map_err(|_| "NVML has no nvmlDeviceGetCount_v2".to_string())?;
        let by_index = lib
            .get::<unsafe extern "C" fn(c_uint, *mut Device) -> Ret>(
                b"nvmlDeviceGetHandleByIndex_v2\0",
            )
            .map_err(|_| "NVML has no nvmlDeviceGetHandleByIndex_v2".to_string())?;
        let mut n: c_uint = 0;
        let rc = count(&mut n);
        if rc != 0 {
            return Err(format!("nvmlDeviceGetCount_v2 failed (NVML error {rc})"));
        }
        if n == 0 {
            return Err("NVML lists no GPU".to_string());
        }
        let mut out = Vec::new();
        for i in 0..n {
            let mut dev: Device = std::ptr::null_mut();
            let rc = by_index(i, &mut dev);
            let a = if rc == 0 && !dev.is_null() {
                ask(&lib, dev, i)
            } else {
                GpuAnswers {
                    index: i,
                    counters: vec![("handle", Err(rc))],
                    ..GpuAnswers::default()
                }
            };
            out.push(reading(&a));
        }
        Ok(out)
    }
}

/// One query of a `(Device, …out) -> Ret` function.
macro_rules! query {
    ($lib:expr, $name:literal, $ty:ty, |$f:ident| $call:expr) => {
        match $lib.get::<$ty>(concat!($name, "\0").as_bytes()) {
            Ok($f) => $call,
            Err(_) => NO_SYMBOL,
        }
    };
}

/// Ask NVML everything `reading` judges.
///
/// # Safety
/// `dev` is a handle NVML returned from `lib`.
unsafe fn ask(lib: &libloading::Library, dev: Device, index: u32) -> GpuAnswers {
    type U32 = unsafe extern "C" fn(Device, *mut c_uint) -> Ret;
    type U64 = unsafe extern "C" fn(Device, *mut c_ulonglong) -> Ret;
    type Ecc = unsafe extern "C" fn(Device, c_int, c_int, *mut c_ulonglong) -> Ret;
    type Loc = unsafe extern "C" fn(Device, c_int, c_int, c_int, *mut c_ulonglong) -> Ret;
    type Pages = unsafe extern "C" fn(Device, c_int, *mut c_uint, *mut c_ulonglong) -> Ret;
    type Mode = unsafe extern "C" fn(Device, *mut c_uint, *mut c_uint) -> Ret;
    type Remap =
        unsafe extern "C" fn(Device, *mut c_uint, *mut c_uint, *mut c_uint, *mut c_uint) -> Ret;
    type Name = unsafe extern "C" fn(Device, *mut c_char, c_uint) -> Ret;

    // SAFETY: every call is one of NVML's documented functions with the signature declared
    // above, on the caller's valid handle, with out-pointers to locals that outlive the call.
    unsafe {
        let mut a = GpuAnswers {
            index,
            ..GpuAnswers::default()
        };
        let mut buf = [0 as c_char; 96];
        if query!(lib, "nvmlDeviceGetName", Name, |f| f(
            dev,
            buf.as_mut_ptr(),
            96
        )) == 0
        {
            a.name = Some(cstr(&buf));
        }
        a.bus = bus(lib, dev);
        let mut push = |k: &'static str, rc: Ret, v: u64| {
            a.counters.push((k, (rc == 0).then_some(v).ok_or(rc)))
        };

        let (mut cur, mut pend): (c_uint, c_uint) = (0, 0);
        let rc = query!(lib, "nvmlDeviceGetEccMode", Mode, |f| f(
            dev, &mut cur, &mut pend
        ));
        push("ecc_enabled", rc, u64::from(cur));
        // errorType: 0 corrected, 1 uncorrected; counterType: 0 volatile, 1 aggregate.
        for (k, err, ctr) in [
            ("ecc_volatile_corrected", 0, 0),
            ("ecc_volatile_uncorrected", 1, 0),
            ("ecc_aggregate_corrected", 0, 1),
            ("ecc_aggregate_uncorrected", 1, 1),
        ] {
            let mut v: c_ulonglong = 0;
            let rc = query!(lib, "nvmlDeviceGetTotalEccErrors", Ecc, |f| f(
                dev, err, ctr, &mut v
            ));
            push(k, rc, v);
        }
        // Memory locations: 2 device memory (DRAM), 7 SRAM; aggregate counts.
        for (k, err, loc) in [
            ("dram_aggregate_corrected", 0, 2),
            ("dram_aggregate_uncorrected", 1, 2),
            ("sram_aggregate_corrected", 0, 7),
            ("sram_aggregate_uncorrected", 1, 7),
        ] {
            let mut v: c_ulonglong = 0;
            let rc = query!(lib, "nvmlDeviceGetMemoryErrorCounter", Loc, |f| f(
                dev, err, 1, loc, &mut v
            ));
            push(k, rc, v);
        }
        // Cause 0: multiple single-bit errors; 1: a double-bit error. A zero-length query gives the
        // count (NVML answers "insufficient size", 7, when there are pages to list).
        for (k, cause) in [("retired_pages_sbe", 0), ("retired_pages_dbe", 1)] {
            let mut n: c_uint = 0;
            let rc = query!(lib, "nvmlDeviceGetRetiredPages", Pages, |f| f(
                dev,
                cause,
                &mut n,
                std::ptr::null_mut()
            ));
            push(k, if rc == 7 { 0 } else { rc }, u64::from(n));
        }
        let mut p: c_uint = 0;
        let rc = query!(lib, "nvmlDeviceGetRetiredPagesPendingStatus", U32, |f| f(
            dev, &mut p
        ));
        push("retired_pages_pending", rc, u64::from(p));
        let (mut corr, mut unc, mut pending, mut failed): (c_uint, c_uint, c_uint, c_uint) =
            (0, 0, 0, 0);
        let rc = query!(lib, "nvmlDeviceGetRemappedRows", Remap, |f| f(
            dev,
            &mut corr,
            &mut unc,
            &mut pending,
            &mut failed
        ));
        push("remapped_rows_correctable", rc, u64::from(corr));
        push("remapped_rows_uncorrectable", rc, u64::from(unc));
        push("remap_pending", rc, u64::from(pending));
        push("remap_failed", rc, u64::from(failed));
        for (k, name) in [
            ("pcie_link_gen", "nvmlDeviceGetCurrPcieLinkGeneration"),
            ("pcie_link_width", "nvmlDeviceGetCurrPcieLinkWidth"),
            ("pcie_max_link_gen", "nvmlDeviceGetMaxPcieLinkGeneration"),
            ("pcie_max_link_width", "nvmlDeviceGetMaxPcieLinkWidth"),
            (
                "pcie_gpu_max_link_gen",
                "nvmlDeviceGetGpuMaxPcieLinkGeneration",
            ),
            ("pcie_replay_errors", "nvmlDeviceGetPcieReplayCounter"),
        ] {
            let mut v: c_uint = 0;
            let sym = format!("{name}\0");
            let rc = match lib.get::<U32>(sym.as_bytes()) {
                Ok(f) => f(dev, &mut v),
                Err(_) => NO_SYMBOL,
            };
            push(k, rc, u64::from(v));
        }
        let mut bits: c_ulonglong = 0;
        let mut rc = query!(lib, "nvmlDeviceGetCurrentClocksEventReasons", U64, |f| f(
            dev, &mut bits
        ));
        if rc == NO_SYMBOL {
            rc = query!(
                lib,
                "nvmlDeviceGetCurrentClocksThrottleReasons",
                U64,
                |f| f(dev, &mut bits)
            );
        }
        push("clock_event_reasons", rc, bits);
        a
    }
}

/// The GPU's PCI address ("0000:41:00.0"), where NVML tells it.
///
/// # Safety
/// `dev` is a handle NVML returned from `lib`.
pub(crate) unsafe fn bus(lib: &libloading::Library, dev: Device) -> Option<String> {
    type Pci = unsafe extern "C" fn(Device, *mut PciInfo) -> Ret;
    let mut pci = PciInfo::default();
    // SAFETY: NVML's documented signature, the caller's valid handle, an out-struct of
    // nvmlPciInfo_t's size that outlives the call.
    let rc = unsafe { query!(lib, "nvmlDeviceGetPciInfo_v3", Pci, |f| f(dev, &mut pci)) };
    (rc == 0).then(|| format!("{:04x}:{:02x}:{:02x}.0", pci.domain, pci.bus, pci.device))
}

/// NVML's `nvmlPciInfo_t` (the v3 layout, 68 bytes).
#[repr(C)]
#[derive(Default)]
struct PciInfo {
    bus_id_legacy: [c_char; 16],
    domain: c_uint,
    bus: c_uint,
    device: c_uint,
    pci_device_id: c_uint,
    pci_subsystem_id: c_uint,
    bus_id: [c_char; 32],
}

fn cstr(buf: &[c_char]) -> String {
    let bytes: Vec<u8> = buf
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).trim().to_string()
}

pub(crate) fn why_unread(rc: i32) -> &'static str {
    match rc {
        NOT_SUPPORTED => "not supported by this GPU",
        NO_PERMISSION => "no permission",
        NO_SYMBOL => "not in this driver's NVML",
        _ => "NVML error",
    }
}

/// Judge one GPU's answers (see the module header for what fails on its own).
pub fn reading(a: &GpuAnswers) -> HealthReading {
    let gpu = format!("gpu{}", a.index);
    let mut values = Params::new();
    if let Some(b) = &a.bus {
        values.insert("pci_bus".into(), Value::from(b.clone()));
    }
    let mut unread = Vec::new();
    for (k, v) in &a.counters {
        match v {
            Ok(x) => {
                values.insert((*k).into(), Value::from(*x));
            }
            Err(rc) => unread.push(format!("{k} ({}, {rc})", why_unread(*rc))),
        }
    }
    if !unread.is_empty() {
        values.insert("not_read".into(), Value::from(unread.join(", ")));
    }
    let mut findings = Vec::new();
    let mut say = |severity, text: String| findings.push(HealthFinding { severity, text });
    let g = |k: &str| a.get(k);
    let who = match &a.bus {
        Some(b) => format!("{gpu} ({b})"),
        None => gpu.clone(),
    };
    if g("ecc_enabled") == Some(0) {
        say(
            Severity::Warn,
            format!("{who}: ECC is disabled, so memory errors go unseen"),
        );
    }
    if let Some(n) = g("ecc_volatile_uncorrected").filter(|&n| n > 0) {
        say(
            Severity::Fail,
            format!("{who}: {n} uncorrectable ECC error(s) since the driver loaded"),
        );
    } else if let Some(n) = g("ecc_aggregate_uncorrected").filter(|&n| n > 0) {
        say(Severity::Warn, format!("{who}: {n} uncorrectable ECC error(s) over the board's life (none since the driver loaded)"));
    }
    if g("remap_pending").is_some_and(|p| p > 0) {
        say(
            Severity::Fail,
            format!("{who}: a row remap is pending (the GPU needs a reset before it is trusted)"),
        );
    }
    if g("remap_failed").is_some_and(|p| p > 0) {
        say(
            Severity::Fail,
            format!("{who}: a row remap failed (no spare row left: a repair case)"),
        );
    }
    if let Some(n) = g("remapped_rows_uncorrectable").filter(|&n| n > 0) {
        say(
            Severity::Info,
            format!("{who}: {n} row(s) remapped after uncorrectable errors"),
        );
    }
    if g("retired_pages_pending").is_some_and(|p| p > 0) {
        say(
            Severity::Fail,
            format!("{who}: page retirement pending (the GPU needs a reset)"),
        );
    }
    if let (Some(cur), Some(max)) = (g("pcie_link_width"), g("pcie_max_link_width")) {
        if cur > 0 && cur < max {
            say(Severity::Fail, format!("{who}: PCIe link x{cur} of x{max}"));
        }
    }
    if let (Some(cur), Some(max)) = (g("pcie_link_gen"), g("pcie_max_link_gen")) {
        if cur < max {
            say(Severity::Info, format!("{who}: PCIe Gen{cur} of Gen{max} at rest (GPUs lower the link's speed while idle)"));
        }
    }
    if let (Some(sys), Some(own)) = (g("pcie_max_link_gen"), g("pcie_gpu_max_link_gen")) {
        if sys < own {
            say(
                Severity::Info,
                format!("{who}: the slot allows Gen{sys}; the GPU could run Gen{own}"),
            );
        }
    }
    if let Some(bits) = g("clock_event_reasons") {
        let hw: Vec<String> = reason_names(bits & (0x8 | 0x40 | 0x80));
        if !hw.is_empty() {
            say(
                Severity::Warn,
                format!("{who}: clock held by {} when read", hw.join(", ")),
            );
        }
    }
    HealthReading {
        id: "health.gpu".into(),
        device: gpu,
        label: a.name.clone(),
        values,
        findings,
    }
}

/// One direction's PCIe payload limit of the GPU's link, in B/s, from NVML's maximum generation
/// and width (the lower of the GPU's and the slot's), and its basis; None where NVML gives none.
pub fn link_limit(a: &GpuAnswers) -> Option<(f64, String)> {
    let gen = a.get("pcie_max_link_gen")?;
    let width = a.get("pcie_max_link_width")?;
    let bps = link_peak_bps(u32::try_from(gen).ok()?, u32::try_from(width).ok()?)?;
    Some((bps, format!("PCIe Gen{gen} x{width} (NVML's maximum for this GPU in this slot), one direction after line encoding")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h100(extra: &[(&'static str, Result<u64, i32>)]) -> GpuAnswers {
        let mut counters = vec![
            ("ecc_enabled", Ok(1)),
            ("ecc_volatile_corrected", Ok(0)),
            ("ecc_volatile_uncorrected", Ok(0)),
            ("ecc_aggregate_corrected", Ok(12)),
            ("ecc_aggregate_uncorrected", Ok(0)),
            ("retired_pages_sbe", Err(NOT_SUPPORTED)),
            ("retired_pages_dbe", Err(NOT_SUPPORTED)),
            ("retired_pages_pending", Err(NOT_SUPPORTED)),
            ("remapped_rows_correctable", Ok(0)),
            ("remapped_rows_uncorrectable", Ok(0)),
            ("remap_pending", Ok(0)),
            ("remap_failed", Ok(0)),
            ("pcie_link_gen", Ok(1)),
            ("pcie_link_width", Ok(16)),
            ("pcie_max_link_gen", Ok(5)),
            ("pcie_max_link_width", Ok(16)),
            ("pcie_gpu_max_link_gen", Ok(5)),
            ("pcie_replay_errors", Ok(0)),
            ("clock_event_reasons", Ok(0x1 | 0x4)),
        ];
        for (k, v) in extra {
            counters.retain(|(c, _)| c != k);
            counters.push((k, *v));
        }
        GpuAnswers {
            index: 0,
            name: Some("NVIDIA H100 80GB HBM3".into()),
            bus: Some("0000:41:00.0".into()),
            counters,
        }
    }

    fn severities(r: &HealthReading) -> Vec<Severity> {
        r.findings.iter().map(|f| f.severity).collect()
    }

    #[test]
    fn a_healthy_idle_gpu_under_a_power_cap_has_no_warning() {
        let r = reading(&h100(&[]));
        assert_eq!(severities(&r), [Severity::Info], "{:?}", r.findings);
        assert!(r.findings[0].text.contains("Gen1 of Gen5 at rest"));
        assert_eq!(r.values["ecc_aggregate_corrected"], 12);
        assert_eq!(
            r.values.get("retired_pages_sbe"),
            None,
            "unsupported is not zero"
        );
        let why = r.values["not_read"].as_str().expect("not_read");
        assert!(
            why.contains("retired_pages_sbe (not supported by this GPU, 3)"),
            "{why}"
        );
        assert_eq!(r.values["pci_bus"], "0000:41:00.0");
    }

    #[test]
    fn pending_or_failed_remaps_uncorrectable_errors_and_a_narrow_link_fail() {
        for (extra, text) in [
            (("remap_pending", Ok(1)), "row remap is pending"),
            (("remap_failed", Ok(1)), "row remap failed"),
            (
                ("ecc_volatile_uncorrected", Ok(2)),
                "2 uncorrectable ECC error(s) since the driver loaded",
            ),
            (("pcie_link_width", Ok(8)), "PCIe link x8 of x16"),
        ] {
            let r = reading(&h100(&[extra]));
            let fail: Vec<&str> = r
                .findings
                .iter()
                .filter(|f| f.severity == Severity::Fail)
                .map(|f| f.text.as_str())
                .collect();
            assert_eq!(fail.len(), 1, "{extra:?}: {:?}", r.findings);
            assert!(fail[0].contains(text), "{}", fail[0]);
            assert!(fail[0].starts_with("gpu0 (0000:41:00.0)"), "{}", fail[0]);
        }
    }

    #[test]
    fn the_hardware_brake_is_worth_a_look_and_a_disabled_ecc_too_but_neither_fails() {
        let r = reading(&h100(&[
            ("clock_event_reasons", Ok(0x80 | 0x4)),
            ("ecc_enabled", Ok(0)),
        ]));
        assert_eq!(
            severities(&r),
            [Severity::Warn, Severity::Info, Severity::Warn]
        );
        assert!(r.findings[2].text.contains("hw_power_brake"));
        assert!(!r.findings[2].text.contains("sw_power_cap"));
    }

    #[test]
    fn the_link_limit_is_the_lower_maximum_in_one_direction() {
        let (bps, basis) = link_limit(&h100(&[("pcie_max_link_gen", Ok(4))])).expect("limit");
        assert!((bps - 1.969e9 * 16.0).abs() < 1.0);
        assert!(basis.contains("Gen4 x16"), "{basis}");
        assert!(link_limit(&h100(&[("pcie_max_link_width", Err(NOT_SUPPORTED))])).is_none());
    }

    #[test]
    fn the_pci_info_struct_has_nvmls_size() {
        assert_eq!(std::mem::size_of::<PciInfo>(), 68);
    }
}

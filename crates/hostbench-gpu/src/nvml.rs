//! A CUDA device's telemetry over a record's samples through NVML (`libnvidia-ml.so.1`, part of
//! the NVIDIA driver), loaded at run time like libcuda, so the binary runs where it is absent.
//!
//! Read after every sample: the SM and memory clocks, power draw, temperature and the clock
//! event reasons (why the clock is below its maximum: the software power cap, hardware slowdown,
//! thermal limits), plus the energy counter at the first and last sample. A GPU that reads 80 %
//! of its FMA peak because its power cap held the clock at 1410 MHz then says so instead of
//! looking slow. Reasons are the union over the samples; clocks and power are medians; the
//! temperature is the highest reading.

use std::ffi::{c_char, c_int, c_uint, c_ulonglong, c_void, CString};

use hostbench_core::conditions::GpuConditions;

type Device = *mut c_void;
type Ret = c_int;
type Init = unsafe extern "C" fn() -> Ret;
type ByBus = unsafe extern "C" fn(*const c_char, *mut Device) -> Ret;
type ByIndex = unsafe extern "C" fn(c_uint, *mut Device) -> Ret;
type Clock = unsafe extern "C" fn(Device, c_int, *mut c_uint) -> Ret;
type Uint = unsafe extern "C" fn(Device, *mut c_uint) -> Ret;
type Temp = unsafe extern "C" fn(Device, c_int, *mut c_uint) -> Ret;
type U64 = unsafe extern "C" fn(Device, *mut c_ulonglong) -> Ret;

const CLOCK_SM: c_int = 1;
const CLOCK_MEM: c_int = 2;
const TEMPERATURE_GPU: c_int = 0;

/// NVML's clock event (formerly "throttle") reason bits and the names records use.
const REASONS: [(u64, &str); 8] = [
    (0x1, "gpu_idle"),
    (0x2, "applications_clocks"),
    (0x4, "sw_power_cap"),
    (0x8, "hw_slowdown"),
    (0x10, "sync_boost"),
    (0x20, "sw_thermal"),
    (0x40, "hw_thermal"),
    (0x80, "hw_power_brake"),
];

/// The reason names set in `bits`, in NVML's order.
pub fn reason_names(bits: u64) -> Vec<String> {
    REASONS
        .iter()
        .filter(|(b, _)| bits & b != 0)
        .map(|(_, n)| n.to_string())
        .collect()
}

/// NVML loaded and initialised; dropping it shuts NVML down once (`nvmlShutdown`), so each
/// `nvmlInit_v2` is paired as NVML's reference count wants. Derefs to the library for symbols.
pub(crate) struct Nvml(libloading::Library);

impl std::ops::Deref for Nvml {
    type Target = libloading::Library;
    fn deref(&self) -> &libloading::Library {
        &self.0
    }
}

impl Drop for Nvml {
    fn drop(&mut self) {
        // SAFETY: nvmlShutdown takes no arguments; this value's nvmlInit_v2 succeeded, and no
        // handle from it outlives it (they live in the structs that own this value).
        unsafe {
            if let Ok(shutdown) = self.0.get::<Init>(b"nvmlShutdown\0") {
                shutdown();
            }
        }
    }
}

/// NVML loaded and initialised, or why not. Each caller holds its own; NVML counts its
/// initialisations, so several may be open at once.
pub(crate) fn load() -> Result<Nvml, String> {
    // SAFETY: loading the driver's NVML library runs its constructors only.
    let lib = unsafe { libloading::Library::new("libnvidia-ml.so.1") }.map_err(|_| {
        "NVML not found (libnvidia-ml.so.1, installed with the NVIDIA driver)".to_string()
    })?;
    // SAFETY: nvmlInit_v2 is NVML's documented entry point and takes no arguments.
    unsafe {
        let init = lib
            .get::<Init>(b"nvmlInit_v2\0")
            .map_err(|_| "NVML has no nvmlInit_v2".to_string())?;
        let rc = init();
        if rc != 0 {
            return Err(format!("nvmlInit_v2 failed (NVML error {rc})"));
        }
    }
    Ok(Nvml(lib))
}

/// One device's NVML handle and the readings so far.
pub struct Telemetry {
    lib: Nvml,
    dev: Device,
    readings: Vec<Reading>,
    energy_start_mj: Option<u64>,
    energy_end_mj: Option<u64>,
    /// When the energy counter was first read, and seconds from then to its last reading.
    opened: std::time::Instant,
    energy_secs: f64,
}

#[derive(Debug, Clone, Copy, Default)]
struct Reading {
    sm_mhz: Option<u32>,
    mem_mhz: Option<u32>,
    power_mw: Option<u32>,
    limit_mw: Option<u32>,
    temp_c: Option<u32>,
    reasons: Option<u64>,
    pcie_gen: Option<u32>,
    pcie_width: Option<u32>,
}

impl Telemetry {
    /// NVML for the device at PCI address `bus_id` ("0000:41:00.0"), or by index where the
    /// address is unknown; why not where NVML is absent or refuses.
    pub fn open(bus_id: Option<&str>, index: usize) -> Result<Telemetry, String> {
        let lib = load()?;
        // SAFETY: the symbols are NVML's documented C functions with these signatures.
        unsafe {
            let mut dev: Device = std::ptr::null_mut();
            let rc = match bus_id.and_then(|b| CString::new(b).ok()) {
                Some(b) => match lib.get::<ByBus>(b"nvmlDeviceGetHandleByPciBusId_v2\0") {
                    Ok(f) => f(b.as_ptr(), &mut dev),
                    Err(_) => -1,
                },
                None => match lib.get::<ByIndex>(b"nvmlDeviceGetHandleByIndex_v2\0") {
                    Ok(f) => f(index as c_uint, &mut dev),
                    Err(_) => -1,
                },
            };
            if rc != 0 || dev.is_null() {
                return Err(format!(
                    "NVML has no handle for the device (NVML error {rc})"
                ));
            }
            let mut t = Telemetry {
                lib,
                dev,
                readings: Vec::new(),
                energy_start_mj: None,
                energy_end_mj: None,
                opened: std::time::Instant::now(),
                energy_secs: 0.0,
            };
            t.energy_start_mj = t.energy_mj();
            Ok(t)
        }
    }

    fn energy_mj(&self) -> Option<u64> {
        let mut v: c_ulonglong = 0;
        // SAFETY: NVML's documented signature; the handle came from NVML.
        let rc = unsafe {
            let f = self
                .lib
                .get::<U64>(b"nvmlDeviceGetTotalEnergyConsumption\0")
                .ok()?;
            f(self.dev, &mut v)
        };
        (rc == 0).then_some(v)
    }

    fn read_uint(&self, name: &[u8]) -> Option<u32> {
        let mut v: c_uint = 0;
        // SAFETY: as above.
        let rc = unsafe {
            let f = self.lib.get::<Uint>(name).ok()?;
            f(self.dev, &mut v)
        };
        (rc == 0).then_some(v)
    }

    fn clock(&self, kind: c_int) -> Option<u32> {
        let mut v: c_uint = 0;
        // SAFETY: as above.
        let rc = unsafe {
            let f = self.lib.get::<Clock>(b"nvmlDeviceGetClockInfo\0").ok()?;
            f(self.dev, kind, &mut v)
        };
        (rc == 0).then_some(v)
    }

    fn reasons(&self) -> Option<u64> {
        // The newer name first (NVML 12.2+), then the one older drivers export.
        for name in [
            &b"nvmlDeviceGetCurrentClocksEventReasons\0"[..],
            &b"nvmlDeviceGetCurrentClocksThrottleReasons\0"[..],
        ] {
            let mut v: c_ulonglong = 0;
            // SAFETY: as above.
            let rc = unsafe {
                match self.lib.get::<U64>(name) {
                    Ok(f) => f(self.dev, &mut v),
                    Err(_) => continue,
                }
            };
            return (rc == 0).then_some(v);
        }
        None
    }

    /// Read the device now (call right after a sample, while its clocks still hold).
    pub fn sample(&mut self) {
        let mut t: c_uint = 0;
        // SAFETY: as above.
        let temp = unsafe {
            self.lib
                .get::<Temp>(b"nvmlDeviceGetTemperature\0")
                .ok()
                .and_then(|f| (f(self.dev, TEMPERATURE_GPU, &mut t) == 0).then_some(t))
        };
        let r = Reading {
            sm_mhz: self.clock(CLOCK_SM),
            mem_mhz: self.clock(CLOCK_MEM),
            power_mw: self.read_uint(b"nvmlDeviceGetPowerUsage\0"),
            limit_mw: self.read_uint(b"nvmlDeviceGetEnforcedPowerLimit\0"),
            temp_c: temp,
            reasons: self.reasons(),
            pcie_gen: self.read_uint(b"nvmlDeviceGetCurrPcieLinkGeneration\0"),
            pcie_width: self.read_uint(b"nvmlDeviceGetCurrPcieLinkWidth\0"),
        };
        self.readings.push(r);
        self.energy_end_mj = self.energy_mj();
        self.energy_secs = self.opened.elapsed().as_secs_f64();
    }

    /// The last reading's SM clock (MHz), temperature (°C) and power (W), each where NVML read
    /// it: the burn's timeline point for the interval that just ended.
    pub fn latest(&self) -> (Option<f64>, Option<f64>, Option<f64>) {
        let r = self.readings.last().copied().unwrap_or_default();
        (
            r.sm_mhz.map(f64::from),
            r.temp_c.map(f64::from),
            r.power_mw.map(|mw| f64::from(mw) / 1e3),
        )
    }

    /// The conditions over the samples read so far.
    pub fn conditions(&self) -> GpuConditions {
        let mut c = summarize(&self.readings, self.energy_start_mj, self.energy_end_mj);
        c.pcie_max_gen = self.read_uint(b"nvmlDeviceGetMaxPcieLinkGeneration\0");
        c.pcie_max_width = self.read_uint(b"nvmlDeviceGetMaxPcieLinkWidth\0");
        // The instantaneous reading after a sample can miss the load (an H200 under tensor
        // load read 245-430 W); the energy counter over the case cannot.
        if self.energy_secs > 0.0 {
            c.power_avg_w = c.energy_j.map(|e| e / self.energy_secs);
        }
        c
    }
}

fn summarize(readings: &[Reading], e0: Option<u64>, e1: Option<u64>) -> GpuConditions {
    let median = |f: &dyn Fn(&Reading) -> Option<u32>| {
        let mut v: Vec<u32> = readings.iter().filter_map(f).collect();
        v.sort_unstable();
        v.get(v.len() / 2).map(|x| *x as f64)
    };
    let bits = readings
        .iter()
        .filter_map(|r| r.reasons)
        .fold(0u64, |a, b| a | b);
    GpuConditions {
        sm_clock_hz: median(&|r| r.sm_mhz).map(|m| m * 1e6),
        sm_clock_max_hz: None,
        mem_clock_hz: median(&|r| r.mem_mhz).map(|m| m * 1e6),
        power_w: median(&|r| r.power_mw).map(|m| m / 1e3),
        power_limit_w: median(&|r| r.limit_mw).map(|m| m / 1e3),
        energy_j: e0.zip(e1).map(|(a, b)| b.saturating_sub(a) as f64 / 1e3),
        power_avg_w: None,
        temperature_c: readings
            .iter()
            .filter_map(|r| r.temp_c)
            .max()
            .map(f64::from),
        clock_reasons: reason_names(bits),
        pcie_gen: readings.iter().filter_map(|r| r.pcie_gen).min(),
        pcie_width: readings.iter().filter_map(|r| r.pcie_width).min(),
        pcie_max_gen: None,
        pcie_max_width: None,
        work_per_joule: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readings_summarize_as_medians_with_the_union_of_reasons() {
        let r = |sm, p, reasons| Reading {
            sm_mhz: Some(sm),
            mem_mhz: Some(2619),
            power_mw: Some(p),
            limit_mw: Some(700_000),
            temp_c: Some(sm / 30),
            reasons: Some(reasons),
            pcie_gen: Some(if sm > 1500 { 5 } else { 4 }),
            pcie_width: Some(16),
        };
        let c = summarize(
            &[
                r(1980, 690_000, 0),
                r(1410, 700_000, 0x4),
                r(1755, 699_000, 0x4 | 0x20),
            ],
            Some(1_000_000),
            Some(1_350_000),
        );
        assert_eq!(c.sm_clock_hz, Some(1755e6));
        assert_eq!(c.power_w, Some(699.0));
        assert_eq!(c.power_limit_w, Some(700.0));
        assert_eq!(c.energy_j, Some(350.0));
        assert_eq!(c.temperature_c, Some(66.0));
        assert_eq!(c.clock_reasons, ["sw_power_cap", "sw_thermal"]);
        assert_eq!(
            (c.pcie_gen, c.pcie_width),
            (Some(4), Some(16)),
            "the lowest under load"
        );
    }

    #[test]
    fn reason_bits_have_names() {
        assert!(reason_names(0).is_empty());
        assert_eq!(reason_names(0x8 | 0x80), ["hw_slowdown", "hw_power_brake"]);
    }

    #[test]
    fn without_the_driver_nvml_says_why() {
        if std::path::Path::new("/dev/nvidiactl").exists() {
            return; // a GPU host: NVML may well open
        }
        let e = Telemetry::open(None, 0)
            .err()
            .expect("no NVML without a driver");
        assert!(e.contains("NVML"), "{e}");
    }
}

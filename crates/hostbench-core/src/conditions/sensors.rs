//! The CPU's own telemetry in sysfs, where the platform exposes it: the cpufreq clock, the
//! thermal-throttle counters, hwmon temperatures and RAPL energy. Most VMs expose none of it;
//! each reader is found once ([`Sensors::find`]) and says why it is missing.

use std::path::{Path, PathBuf};

/// The sensor files found under a sysfs root, or why each kind is missing.
#[derive(Debug, Clone)]
pub struct Sensors {
    sys: PathBuf,
    pub cpufreq: Result<(), String>,
    pub thermal: Result<(), String>,
    /// `temp*_input` files of CPU sensors (coretemp, k10temp, zenpower, cpu_thermal…).
    pub temps: Result<Vec<PathBuf>, String>,
    /// Package-level RAPL zones: (energy_uj file, wrap range in µJ).
    pub energy: Result<Vec<(PathBuf, u64)>, String>,
}

/// hwmon drivers whose temperatures are the CPU's.
const CPU_HWMON: &[&str] = &[
    "coretemp",
    "k10temp",
    "zenpower",
    "cpu_thermal",
    "soc_thermal",
    "k8temp",
];

impl Sensors {
    pub fn find(sys: &Path) -> Sensors {
        let cpu0 = sys.join("devices/system/cpu/cpu0");
        let cpufreq = if cpu0.join("cpufreq/scaling_cur_freq").exists() {
            Ok(())
        } else {
            Err(
                "no cpufreq in /sys/devices/system/cpu/cpu0 (common in VMs): no OS clock reading"
                    .into(),
            )
        };
        let thermal = if cpu0.join("thermal_throttle").is_dir() {
            Ok(())
        } else {
            Err("no /sys/devices/system/cpu/cpu0/thermal_throttle: the CPU or hypervisor exposes no throttle counters".into())
        };
        Sensors {
            sys: sys.to_path_buf(),
            cpufreq,
            thermal,
            temps: find_temps(sys),
            energy: find_rapl(sys),
        }
    }

    /// Mean `scaling_cur_freq` over `cpus`, in Hz.
    pub fn cpufreq_hz(&self, cpus: &[usize]) -> Option<f64> {
        self.cpufreq.as_ref().ok()?;
        let v: Vec<f64> = cpus
            .iter()
            .filter_map(|c| {
                let p = self.cpu_dir(*c).join("cpufreq/scaling_cur_freq");
                read_num(&p).map(|khz| khz * 1e3)
            })
            .collect();
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    }

    /// Core and package thermal-throttle events so far on `cpus`.
    pub fn throttle_events(&self, cpus: &[usize]) -> Option<u64> {
        self.thermal.as_ref().ok()?;
        let mut n = 0u64;
        for c in cpus {
            let d = self.cpu_dir(*c).join("thermal_throttle");
            for f in ["core_throttle_count", "package_throttle_count"] {
                n += read_num(&d.join(f)).unwrap_or(0.0) as u64;
            }
        }
        Some(n)
    }

    /// The hottest CPU sensor now, in °C.
    pub fn temperature_c(&self) -> Option<f64> {
        let files = self.temps.as_ref().ok()?;
        files
            .iter()
            .filter_map(|f| read_num(f).map(|m| m / 1000.0))
            .max_by(f64::total_cmp)
    }

    /// Package energy counters now, in µJ, one per zone (subtract with [`energy_delta_j`]).
    pub fn energy_uj(&self) -> Option<Vec<u64>> {
        let zones = self.energy.as_ref().ok()?;
        zones
            .iter()
            .map(|(f, _)| read_num(f).map(|v| v as u64))
            .collect()
    }

    /// Joules between two readings of [`Sensors::energy_uj`], each zone unwrapped once.
    pub fn energy_delta_j(&self, start: &[u64], end: &[u64]) -> Option<f64> {
        let zones = self.energy.as_ref().ok()?;
        (start.len() == end.len() && start.len() == zones.len()).then(|| {
            zones
                .iter()
                .zip(start.iter().zip(end))
                .map(|((_, range), (&a, &b))| {
                    if b >= a {
                        b - a
                    } else {
                        range.saturating_sub(a) + b
                    }
                })
                .sum::<u64>() as f64
                / 1e6
        })
    }

    fn cpu_dir(&self, cpu: usize) -> PathBuf {
        self.sys.join(format!("devices/system/cpu/cpu{cpu}"))
    }
}

fn read_num(p: &Path) -> Option<f64> {
    std::fs::read_to_string(p).ok()?.trim().parse().ok()
}

fn find_temps(sys: &Path) -> Result<Vec<PathBuf>, String> {
    let dir = sys.join("class/hwmon");
    let entries = std::fs::read_dir(&dir)
        .map_err(|_| "no /sys/class/hwmon: the platform exposes no sensors".to_string())?;
    let mut files = Vec::new();
    for e in entries.flatten() {
        let name = std::fs::read_to_string(e.path().join("name")).unwrap_or_default();
        if !CPU_HWMON.contains(&name.trim()) {
            continue;
        }
        let Ok(inner) = std::fs::read_dir(e.path()) else {
            continue;
        };
        for f in inner.flatten() {
            let n = f.file_name().to_string_lossy().into_owned();
            if n.starts_with("temp") && n.ends_with("_input") {
                files.push(f.path());
            }
        }
    }
    files.sort();
    if files.is_empty() {
        Err(format!(
            "no CPU temperature sensor in /sys/class/hwmon (looked for {})",
            CPU_HWMON.join(", ")
        ))
    } else {
        Ok(files)
    }
}

fn find_rapl(sys: &Path) -> Result<Vec<(PathBuf, u64)>, String> {
    let dir = sys.join("class/powercap");
    let entries = std::fs::read_dir(&dir).map_err(|_| {
        "no /sys/class/powercap: the platform (or hypervisor) exposes no RAPL".to_string()
    })?;
    let mut zones = Vec::new();
    for e in entries.flatten() {
        let n = e.file_name().to_string_lossy().into_owned();
        // Package zones are `intel-rapl:N` (AMD's driver uses the same name); `intel-rapl:N:M`
        // are their subzones (core, uncore, dram), already inside the package's count.
        let top = n
            .strip_prefix("intel-rapl:")
            .is_some_and(|rest| !rest.contains(':'));
        if !top {
            continue;
        }
        let f = e.path().join("energy_uj");
        let range = read_num(&e.path().join("max_energy_range_uj")).unwrap_or(0.0) as u64;
        match std::fs::read_to_string(&f) {
            Ok(_) => zones.push((f, range)),
            Err(err) if err.kind() == std::io::ErrorKind::PermissionDenied => {
                return Err(
                    "powercap energy_uj is readable by root only (Linux ≥ 5.10): run as root for energy"
                        .into(),
                )
            }
            Err(_) => {}
        }
    }
    zones.sort();
    if zones.is_empty() {
        Err("no RAPL package zone in /sys/class/powercap".into())
    } else {
        Ok(zones)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::tests::put as write;

    #[test]
    fn a_fixture_tree_reads_every_sensor() {
        let d = tempfile::tempdir().unwrap();
        let sys = d.path();
        for cpu in 0..2 {
            let c = format!("devices/system/cpu/cpu{cpu}");
            write(
                sys,
                &format!("{c}/cpufreq/scaling_cur_freq"),
                &format!("{}\n", 3_000_000 + cpu * 1_000_000),
            );
            write(
                sys,
                &format!("{c}/thermal_throttle/core_throttle_count"),
                "5\n",
            );
            write(
                sys,
                &format!("{c}/thermal_throttle/package_throttle_count"),
                "1\n",
            );
        }
        write(sys, "class/hwmon/hwmon0/name", "nvme\n");
        write(sys, "class/hwmon/hwmon0/temp1_input", "99000\n");
        write(sys, "class/hwmon/hwmon1/name", "k10temp\n");
        write(sys, "class/hwmon/hwmon1/temp1_input", "61250\n");
        write(sys, "class/hwmon/hwmon1/temp3_input", "58000\n");
        write(sys, "class/powercap/intel-rapl:0/energy_uj", "999000000\n");
        write(
            sys,
            "class/powercap/intel-rapl:0/max_energy_range_uj",
            "1000000000\n",
        );
        write(sys, "class/powercap/intel-rapl:0:0/energy_uj", "5\n");
        let s = Sensors::find(sys);
        assert_eq!(s.cpufreq_hz(&[0, 1]), Some(3.5e9));
        assert_eq!(s.throttle_events(&[0, 1]), Some(12));
        // The NVMe drive's sensor is not the CPU's.
        assert_eq!(s.temperature_c(), Some(61.25));
        let e0 = s.energy_uj().unwrap();
        assert_eq!(e0, vec![999_000_000]);
        // The counter wrapped: 1 J before the wrap, 2 J after.
        assert_eq!(s.energy_delta_j(&e0, &[2_000_000]), Some(3.0));
    }

    #[test]
    fn an_empty_tree_says_why_for_each_sensor() {
        let d = tempfile::tempdir().unwrap();
        let s = Sensors::find(d.path());
        assert!(s.cpufreq.unwrap_err().contains("cpufreq"));
        assert!(s.thermal.unwrap_err().contains("thermal_throttle"));
        assert!(s.temps.unwrap_err().contains("hwmon"));
        assert!(s.energy.unwrap_err().contains("RAPL"));
        let s = Sensors::find(d.path());
        assert_eq!(s.cpufreq_hz(&[0]), None);
        assert_eq!(s.throttle_events(&[0]), None);
        assert_eq!(s.temperature_c(), None);
        assert_eq!(s.energy_uj(), None);
    }
}

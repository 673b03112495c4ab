//! Host inventory: hostname, OS, kernel, hypervisor, CPU identity and microarchitecture, topology
//! (sockets / cores / threads), run-time ISA, caches, memory, NUMA nodes and cpufreq governor.
//!
//! Every result file carries this, because a number means little without the machine that produced
//! it, and the peak calculations (cores × clock × operations per cycle, STREAM sizing from the
//! last-level cache) read it. The facts come straight from sysfs, procfs, `/etc/os-release`, uname
//! and CPUID rather than from external tools (lscpu, dmidecode), so `hostbench info` needs nothing
//! installed and the whole inventory takes milliseconds.
//!
//! Gathering never fails and never panics: a fact that cannot be read becomes `"unknown"`, `None` or
//! 0 and the rest still fills. [`inventory_from`] reads the same files under another root so tests
//! can use fixture trees; there the hypervisor is judged from the files alone (the cpuinfo
//! `hypervisor` flag and DMI strings) so tests are deterministic, but the ISA list is always the
//! live CPU's: it comes from CPUID / HWCAP through `is_x86_feature_detected!` and friends, and no
//! file can stand in for it.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::{BufRead, BufReader};
use std::path::Path;

use crate::error::BenchError;
use crate::microarch;
use crate::model::{Cache, Cpu, Host, Memory};

const UNKNOWN: &str = "unknown";
/// Where the kernel describes logical CPUs, relative to the root.
pub(crate) const CPU_DIR: &str = "sys/devices/system/cpu";
/// Largest CPU number a CPU list may name: far above any kernel's NR_CPUS, yet low enough that a
/// hostile list such as `0-4000000000` cannot make us allocate gigabytes.
const MAX_CPU_ID: usize = 1 << 20;

/// Inventory of the live machine (reads `/`).
pub fn inventory() -> Host {
    collect(Path::new("/"), Source::Live)
}

/// Inventory read from a directory tree laid out like `/` (`proc/`, `sys/`, `etc/`), for tests.
///
/// Hostname, kernel and OS come only from files under `root` (no uname fallback), and the
/// hypervisor only from the fixture's cpuinfo flags and DMI files. The ISA list is still the live
/// CPU's, because it is detected from the processor itself.
pub fn inventory_from(root: &Path) -> Host {
    collect(root, Source::Fixture)
}

/// Available memory (`MemAvailable` in `/proc/meminfo`) in bytes; 0 if unknown.
pub fn available_memory_bytes() -> u64 {
    meminfo_bytes(Path::new("/"), "MemAvailable").unwrap_or(0)
}

/// Parse a kernel CPU list such as `0-3,8-11` or `5` into sorted, distinct CPU numbers.
///
/// Surrounding whitespace (the trailing newline of a sysfs file) is ignored and an empty string is
/// an empty list (that is how sysfs writes "no CPUs"). The error names the offending text.
pub fn parse_cpu_list(s: &str) -> Result<Vec<usize>, BenchError> {
    let text = s.trim();
    let mut cpus = BTreeSet::new();
    if text.is_empty() {
        return Ok(Vec::new());
    }
    let bad = |part: &str, why: &str| {
        BenchError::invalid(format!("invalid CPU list {text:?}: {part:?} {why}"))
    };
    for part in text.split(',') {
        let part = part.trim();
        let parse = |n: &str| -> Result<usize, BenchError> {
            let n = n.trim();
            let v: usize = n
                .parse()
                .map_err(|_| bad(part, "is not a CPU number or range"))?;
            if v > MAX_CPU_ID {
                return Err(bad(part, "names a CPU number beyond any real machine"));
            }
            Ok(v)
        };
        match part.split_once('-') {
            Some((lo, hi)) => {
                let (lo, hi) = (parse(lo)?, parse(hi)?);
                if lo > hi {
                    return Err(bad(part, "is a descending range"));
                }
                cpus.extend(lo..=hi);
            }
            None => {
                cpus.insert(parse(part)?);
            }
        }
    }
    Ok(cpus.into_iter().collect())
}

/// Parse a sysfs cache size (`32K`, `1024K`, `32M`, also `1G`, `512`, `32KiB`, `32 KB`) into
/// bytes; units are binary, as the kernel means them. `None` for anything else.
pub fn parse_cache_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let digits_end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(digits_end);
    let value: u64 = num.parse().ok()?;
    let unit = unit.trim().to_ascii_uppercase();
    let unit = unit
        .strip_suffix("IB")
        .or_else(|| unit.strip_suffix('B'))
        .unwrap_or(&unit);
    let scale: u64 = match unit {
        "" => 1,
        "K" => 1 << 10,
        "M" => 1 << 20,
        "G" => 1 << 30,
        _ => return None,
    };
    value.checked_mul(scale)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    Live,
    Fixture,
}

fn collect(root: &Path, source: Source) -> Host {
    let live = source == Source::Live;
    let uts = if live { uname() } else { None };

    let hostname = read_trimmed(root, "proc/sys/kernel/hostname")
        .filter(|s| !s.is_empty())
        .or_else(|| uts.as_ref().map(|u| u.nodename.clone()))
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| UNKNOWN.to_string());
    let kernel = read_trimmed(root, "proc/sys/kernel/osrelease")
        .filter(|s| !s.is_empty())
        .or_else(|| uts.as_ref().map(|u| u.release.clone()))
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| UNKNOWN.to_string());
    let os = os_name(root).unwrap_or_else(|| {
        if live && std::env::consts::OS != "linux" {
            std::env::consts::OS.to_string()
        } else {
            UNKNOWN.to_string()
        }
    });

    let info = cpuinfo_first_block(root);
    let ident = identify(root, &info);
    let flags = info
        .get("flags")
        .or_else(|| info.get("Features"))
        .map(|f| f.split_whitespace().map(str::to_string).collect::<Vec<_>>());
    let virtualization = virtualization(root, source, flags.as_deref());

    let online = read_trimmed(root, &format!("{CPU_DIR}/online"))
        .and_then(|s| parse_cpu_list(&s).ok())
        .filter(|l| !l.is_empty());
    let cpus = online.unwrap_or_else(|| cpu_dirs(root));
    let mut threads = u32::try_from(cpus.len()).unwrap_or(u32::MAX);
    if threads == 0 && live {
        threads = std::thread::available_parallelism()
            .map(|n| u32::try_from(n.get()).unwrap_or(u32::MAX))
            .unwrap_or(0);
    }

    let places: Vec<CpuPlace> = cpus.iter().filter_map(|&c| cpu_place(root, c)).collect();
    let sockets = places
        .iter()
        .filter_map(|p| p.package)
        .collect::<BTreeSet<_>>()
        .len();
    let cores = places.iter().map(|p| p.core).collect::<BTreeSet<_>>().len();

    let nominal_hz = nominal_hz(root, &ident.model);

    Host {
        hostname,
        os,
        kernel,
        virtualization,
        cpu: Cpu {
            vendor: ident.vendor,
            model: ident.model,
            sockets: u32::try_from(sockets).unwrap_or(u32::MAX),
            cores: u32::try_from(cores).unwrap_or(u32::MAX),
            threads,
            isa: live_isa(),
            nominal_hz,
            measured_hz: None,
            caches: caches(root, &cpus),
            family: ident.family,
            model_id: ident.model_id,
            microarch: ident.microarch,
            microarch_basis: ident.microarch_basis,
        },
        memory: Memory {
            total_bytes: meminfo_bytes(root, "MemTotal").unwrap_or(0),
        },
        numa_nodes: numa_nodes(root),
        governor: read_trimmed(root, &format!("{CPU_DIR}/cpu0/cpufreq/scaling_governor"))
            .filter(|s| !s.is_empty()),
    }
}

/// A file under `root`, lossily decoded (DMI strings are not always UTF-8) and trimmed.
fn read_trimmed(root: &Path, rel: &str) -> Option<String> {
    let bytes = fs::read(root.join(rel)).ok()?;
    Some(String::from_utf8_lossy(&bytes).trim().to_string())
}

/// CPU numbers of the `cpuN` directories, for trees without an `online` file.
fn cpu_dirs(root: &Path) -> Vec<usize> {
    let Ok(entries) = fs::read_dir(root.join(CPU_DIR)) else {
        return Vec::new();
    };
    let mut cpus: Vec<usize> = entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            e.file_name()
                .to_str()
                .and_then(|n| n.strip_prefix("cpu"))
                .and_then(|n| n.parse().ok())
        })
        .collect();
    cpus.sort_unstable();
    cpus
}

struct Uname {
    nodename: String,
    release: String,
}

#[cfg(unix)]
fn uname() -> Option<Uname> {
    fn field(chars: &[libc::c_char]) -> String {
        let bytes: Vec<u8> = chars
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c.to_ne_bytes()[0]) // c_char is i8 on x86, u8 on Arm
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    }
    // SAFETY: utsname is plain data (arrays of c_char), for which all zeroes is a valid value.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: `u` is a valid, writable utsname that outlives the call.
    if unsafe { libc::uname(&mut u) } != 0 {
        return None;
    }
    Some(Uname {
        nodename: field(&u.nodename),
        release: field(&u.release),
    })
}

#[cfg(not(unix))]
fn uname() -> Option<Uname> {
    None
}

/// `PRETTY_NAME` from os-release (either location the spec allows), else `NAME VERSION`.
fn os_name(root: &Path) -> Option<String> {
    let text = read_trimmed(root, "etc/os-release")
        .or_else(|| read_trimmed(root, "usr/lib/os-release"))?;
    let field = |key: &str| {
        text.lines().find_map(|line| {
            line.trim()
                .strip_prefix(key)
                .and_then(|v| v.strip_prefix('='))
                .map(unquote)
                .filter(|v| !v.is_empty())
        })
    };
    field("PRETTY_NAME").or_else(|| match (field("NAME"), field("VERSION")) {
        (Some(n), Some(v)) => Some(format!("{n} {v}")),
        (n, _) => n,
    })
}

/// Undo os-release's shell-style quoting.
fn unquote(v: &str) -> String {
    let v = v.trim();
    let inner = v
        .strip_prefix('"')
        .and_then(|r| r.strip_suffix('"'))
        .or_else(|| v.strip_prefix('\'').and_then(|r| r.strip_suffix('\'')))
        .unwrap_or(v);
    let mut out = String::with_capacity(inner.len());
    let mut escaped = false;
    for c in inner.chars() {
        if escaped || c != '\\' {
            out.push(c);
            escaped = false;
        } else {
            escaped = true;
        }
    }
    out
}

/// The key/value pairs of the first processor block of `/proc/cpuinfo`.
///
/// Only the first block is read: the others repeat it, and on large machines generating all of
/// them costs the kernel real time.
fn cpuinfo_first_block(root: &Path) -> BTreeMap<String, String> {
    let mut map = BTreeMap::new();
    let Ok(file) = fs::File::open(root.join("proc/cpuinfo")) else {
        return map;
    };
    for line in BufReader::with_capacity(8192, file).lines() {
        let Ok(line) = line else { break };
        if line.trim().is_empty() {
            if map.is_empty() {
                continue;
            }
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            map.entry(k.trim().to_string())
                .or_insert_with(|| v.trim().to_string());
        }
    }
    map
}

/// Who made the CPU and what it is.
#[derive(Debug, Default)]
struct Ident {
    vendor: String,
    model: String,
    family: Option<u32>,
    model_id: Option<u32>,
    microarch: Option<String>,
    microarch_basis: Option<String>,
}

/// Decimal, or hexadecimal with a `0x` prefix.
fn parse_u32(s: &str) -> Option<u32> {
    let s = s.trim();
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u32::from_str_radix(hex, 16).ok(),
        None => s.parse().ok(),
    }
}

fn identify(root: &Path, info: &BTreeMap<String, String>) -> Ident {
    if let Some(vendor) = info.get("vendor_id").filter(|v| !v.is_empty()) {
        // x86 (the key also appears on s390, where the table below simply finds nothing).
        let family = info.get("cpu family").and_then(|s| parse_u32(s));
        let model_id = info.get("model").and_then(|s| parse_u32(s));
        let stepping = info.get("stepping").and_then(|s| parse_u32(s));
        let model = info
            .get("model name")
            .map(|m| m.split_whitespace().collect::<Vec<_>>().join(" "))
            .filter(|m| !m.is_empty())
            .unwrap_or_else(|| UNKNOWN.to_string());
        let flags: Vec<&str> = info
            .get("flags")
            .map(|f| f.split_whitespace().collect())
            .unwrap_or_default();
        let id = microarch::identify_x86(vendor, family, model_id, stepping, &flags);
        return Ident {
            vendor: vendor.clone(),
            model,
            family,
            model_id,
            microarch: id.as_ref().map(|i| i.name.to_string()),
            microarch_basis: id.map(|i| i.basis),
        };
    }
    // Arm: the MIDR fields, from cpuinfo or (when cpuinfo is terse) from sysfs.
    let from_cpuinfo = info
        .get("CPU implementer")
        .and_then(|s| parse_u32(s))
        .zip(info.get("CPU part").and_then(|s| parse_u32(s)));
    let midr = || {
        let raw = read_trimmed(
            root,
            &format!("{CPU_DIR}/cpu0/regs/identification/midr_el1"),
        )?;
        let hex = raw.strip_prefix("0x").unwrap_or(&raw);
        let v = u64::from_str_radix(hex, 16).ok()?;
        Some((((v >> 24) & 0xff) as u32, ((v >> 4) & 0xfff) as u32))
    };
    if let Some((implementer, part)) = from_cpuinfo.or_else(midr) {
        let vendor = arm_implementer(implementer)
            .map(str::to_string)
            .unwrap_or_else(|| format!("0x{implementer:02x}"));
        let model = arm_part(implementer, part)
            .map(str::to_string)
            .unwrap_or_else(|| format!("0x{part:03x}"));
        return Ident {
            vendor,
            model,
            family: Some(implementer),
            model_id: Some(part),
            microarch: arm_microarch(implementer, part).map(str::to_string),
            microarch_basis: arm_microarch(implementer, part)
                .map(|_| format!("MIDR implementer 0x{implementer:02x} part 0x{part:03x}")),
        };
    }
    Ident {
        vendor: UNKNOWN.to_string(),
        model: info
            .get("model name")
            .filter(|m| !m.is_empty())
            .cloned()
            .unwrap_or_else(|| UNKNOWN.to_string()),
        ..Ident::default()
    }
}

fn arm_implementer(implementer: u32) -> Option<&'static str> {
    Some(match implementer {
        0x41 => "ARM",
        0x42 => "Broadcom",
        0x43 => "Cavium",
        0x46 => "Fujitsu",
        0x48 => "HiSilicon",
        0x4e => "NVIDIA",
        0x50 => "APM",
        0x51 => "Qualcomm",
        0x61 => "Apple",
        0x6d => "Microsoft",
        0xc0 => "Ampere",
        _ => return None,
    })
}

fn arm_part(implementer: u32, part: u32) -> Option<&'static str> {
    Some(match (implementer, part) {
        (0x41, 0xd03) => "Cortex-A53",
        (0x41, 0xd05) => "Cortex-A55",
        (0x41, 0xd07) => "Cortex-A57",
        (0x41, 0xd08) => "Cortex-A72",
        (0x41, 0xd0b) => "Cortex-A76",
        (0x41, 0xd41) => "Cortex-A78",
        (0x41, 0xd0c) => "Neoverse N1",
        (0x41, 0xd40) => "Neoverse V1",
        (0x41, 0xd49) => "Neoverse N2",
        (0x41, 0xd4f) => "Neoverse V2",
        (0x41, 0xd8e) => "Neoverse N3",
        (0x41, 0xd84) => "Neoverse V3",
        (0x43, 0x0af) => "ThunderX2",
        (0x46, 0x001) => "A64FX",
        (0x48, 0xd01) => "Kunpeng 920",
        (0xc0, 0xac3) => "AmpereOne",
        _ => return None,
    })
}

fn arm_microarch(implementer: u32, part: u32) -> Option<&'static str> {
    match (implementer, part) {
        (0x41, 0xd0c | 0xd40 | 0xd49 | 0xd4f | 0xd8e | 0xd84) => arm_part(implementer, part),
        _ => None,
    }
}

/// Advertised clock: cpufreq's `cpuinfo_max_freq`, else the model string's `@ x GHz`.
///
/// cpuinfo's `cpu MHz` is deliberately not used: it is a snapshot of a moving clock, and in VMs
/// often the host's TSC rate rather than anything the guest runs at.
fn nominal_hz(root: &Path, model: &str) -> Option<f64> {
    read_trimmed(root, &format!("{CPU_DIR}/cpu0/cpufreq/cpuinfo_max_freq"))
        .and_then(|s| s.parse::<u64>().ok())
        .filter(|&khz| khz > 0)
        .map(|khz| khz as f64 * 1e3)
        .or_else(|| model_name_hz(model))
}

/// The clock in a model name such as `Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz`.
fn model_name_hz(model: &str) -> Option<f64> {
    let (_, after) = model.rsplit_once('@')?;
    let after = after.trim_start();
    let end = after
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(after.len());
    let (num, unit) = after.split_at(end);
    let value: f64 = num.parse().ok()?;
    let scale = match unit
        .trim_start()
        .get(..3)
        .map(str::to_ascii_lowercase)?
        .as_str()
    {
        "ghz" => 1e9,
        "mhz" => 1e6,
        _ => return None,
    };
    Some(value * scale).filter(|hz| hz.is_finite() && *hz > 0.0)
}

/// Identifies a physical core machine-wide.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum CoreKey {
    /// Lowest CPU number in the core's thread-sibling list.
    Siblings(usize),
    /// (package, die, core_id), when no sibling list is readable. The die is included because
    /// `core_id` is only unique within a die on some multi-die parts.
    Ids(i64, i64, i64),
}

/// Where a logical CPU sits: its package (socket) and physical core.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CpuPlace {
    pub(crate) package: Option<i64>,
    pub(crate) core: CoreKey,
}

/// A logical CPU's package and core from sysfs `topology/`; `None` if the core cannot be told.
pub(crate) fn cpu_place(root: &Path, cpu: usize) -> Option<CpuPlace> {
    let dir = format!("{CPU_DIR}/cpu{cpu}/topology");
    let id = |name: &str| {
        read_trimmed(root, &format!("{dir}/{name}")).and_then(|s| s.parse::<i64>().ok())
    };
    let package = id("physical_package_id");
    let siblings = ["thread_siblings_list", "core_cpus_list"]
        .iter()
        .find_map(|name| {
            read_trimmed(root, &format!("{dir}/{name}"))
                .and_then(|s| parse_cpu_list(&s).ok())
                .and_then(|l| l.first().copied())
        });
    let core = match siblings {
        Some(first) => CoreKey::Siblings(first),
        None => CoreKey::Ids(
            package.unwrap_or(-1),
            id("die_id").unwrap_or(0),
            id("core_id")?,
        ),
    };
    Some(CpuPlace { package, core })
}

/// One entry per (level, kind), sorted by level then kind.
fn caches(root: &Path, cpus: &[usize]) -> Vec<Cache> {
    #[derive(Default)]
    struct Seen {
        size: Option<u64>,
        instances: BTreeSet<Vec<usize>>,
    }
    let mut seen: BTreeMap<(u32, String), Seen> = BTreeMap::new();
    // CPUs already known to share index i with an earlier CPU need not be read again: this
    // keeps a many-core machine at a few reads per core rather than per thread.
    let mut covered: Vec<BTreeSet<usize>> = Vec::new();
    for &cpu in cpus {
        for index in 0..64usize {
            if covered.get(index).is_some_and(|c| c.contains(&cpu)) {
                continue;
            }
            let dir = format!("{CPU_DIR}/cpu{cpu}/cache/index{index}");
            let Some(level) =
                read_trimmed(root, &format!("{dir}/level")).and_then(|s| parse_u32(&s))
            else {
                break;
            };
            let kind = match read_trimmed(root, &format!("{dir}/type"))
                .map(|t| t.to_ascii_lowercase())
                .as_deref()
            {
                Some("data") => "data",
                Some("instruction") => "instruction",
                Some("unified") => "unified",
                _ => continue,
            };
            let entry = seen.entry((level, kind.to_string())).or_default();
            if entry.size.is_none() {
                entry.size =
                    read_trimmed(root, &format!("{dir}/size")).and_then(|s| parse_cache_size(&s));
            }
            if let Some(shared) = read_trimmed(root, &format!("{dir}/shared_cpu_list"))
                .and_then(|s| parse_cpu_list(&s).ok())
                .filter(|l| !l.is_empty())
            {
                if covered.len() <= index {
                    covered.resize_with(index + 1, BTreeSet::new);
                }
                if let Some(c) = covered.get_mut(index) {
                    c.extend(shared.iter().copied());
                }
                entry.instances.insert(shared);
            }
        }
    }
    seen.into_iter()
        .map(|((level, kind), s)| Cache {
            level,
            kind,
            size_bytes: s.size.unwrap_or(0),
            instances: u32::try_from(s.instances.len()).unwrap_or(u32::MAX),
        })
        .collect()
}

/// A `/proc/meminfo` field in bytes (the file says `kB` and means KiB).
fn meminfo_bytes(root: &Path, key: &str) -> Option<u64> {
    let text = read_trimmed(root, "proc/meminfo")?;
    text.lines().find_map(|line| {
        let (k, rest) = line.split_once(':')?;
        if k.trim() != key {
            return None;
        }
        let mut parts = rest.split_whitespace();
        let value: u64 = parts.next()?.parse().ok()?;
        match parts.next() {
            None => Some(value),
            Some(u) if u.eq_ignore_ascii_case("kb") => value.checked_mul(1024),
            Some(_) => None,
        }
    })
}

/// Number of `nodeN` directories, at least 1 (a machine without NUMA is one node).
fn numa_nodes(root: &Path) -> u32 {
    let count = fs::read_dir(root.join("sys/devices/system/node"))
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter(|e| {
                    e.file_name()
                        .to_str()
                        .and_then(|n| n.strip_prefix("node"))
                        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
                })
                .count()
        })
        .unwrap_or(0);
    u32::try_from(count.max(1)).unwrap_or(u32::MAX)
}

/// What the CPU (or the fixture's cpuinfo) says about running under a hypervisor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum HvProbe {
    /// The hypervisor bit is clear.
    Absent,
    /// The bit is set; the vendor signature when it was readable and recognised.
    Present(Option<&'static str>),
    /// Nothing to go on.
    Unknown,
}

/// `none`, the hypervisor's name, or `unknown`.
fn virtualization(root: &Path, source: Source, flags: Option<&[String]>) -> String {
    let probe = match source {
        Source::Live => live_hypervisor_probe(),
        Source::Fixture => match flags {
            Some(f) if f.iter().any(|x| x == "hypervisor") => HvProbe::Present(None),
            Some(_) => HvProbe::Absent,
            None => HvProbe::Unknown,
        },
    };
    let name = match probe {
        HvProbe::Present(Some(name)) => name,
        HvProbe::Present(None) => dmi_hint(root).unwrap_or(UNKNOWN),
        HvProbe::Absent => dmi_hint(root).unwrap_or("none"),
        HvProbe::Unknown => dmi_hint(root).unwrap_or(UNKNOWN),
    };
    name.to_string()
}

#[cfg(target_arch = "x86_64")]
fn live_hypervisor_probe() -> HvProbe {
    if cpuid(1, 0).ecx & (1 << 31) == 0 {
        return HvProbe::Absent;
    }
    let base = hypervisor_from_signature(&cpuid_signature(0x4000_0000));
    // KVM with Hyper-V enlightenments answers as Hyper-V at the base leaf and as itself 0x100
    // higher; an unsupported leaf returns zeroes or basic-leaf data, never a KVM signature.
    if base == Some("hyperv")
        && hypervisor_from_signature(&cpuid_signature(0x4000_0100)) == Some("kvm")
    {
        return HvProbe::Present(Some("kvm"));
    }
    HvProbe::Present(base)
}

/// Without CPUID the only evidence is DMI and friends; finding none means bare metal.
#[cfg(not(target_arch = "x86_64"))]
fn live_hypervisor_probe() -> HvProbe {
    HvProbe::Absent
}

#[cfg(target_arch = "x86_64")]
#[allow(unused_unsafe)] // `__cpuid_count` became a safe function in newer Rust releases.
fn cpuid(leaf: u32, subleaf: u32) -> core::arch::x86_64::CpuidResult {
    // SAFETY: CPUID exists on every x86-64 processor and only reads identification registers.
    unsafe { core::arch::x86_64::__cpuid_count(leaf, subleaf) }
}

/// The 12-byte vendor signature in EBX, ECX, EDX of a hypervisor leaf.
#[cfg(target_arch = "x86_64")]
fn cpuid_signature(leaf: u32) -> [u8; 12] {
    let r = cpuid(leaf, 0);
    let mut sig = [0u8; 12];
    sig[..4].copy_from_slice(&r.ebx.to_le_bytes());
    sig[4..8].copy_from_slice(&r.ecx.to_le_bytes());
    sig[8..].copy_from_slice(&r.edx.to_le_bytes());
    sig
}

/// Hypervisor name from a CPUID leaf 0x40000000 signature.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
fn hypervisor_from_signature(sig: &[u8]) -> Option<&'static str> {
    let end = sig.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
    Some(match sig.get(..end)? {
        b"KVMKVMKVM" | b"Linux KVM Hv" => "kvm",
        b"Microsoft Hv" => "hyperv",
        b"VMwareVMware" => "vmware",
        b"XenVMMXenVMM" => "xen",
        b"TCGTCGTCGTCG" => "qemu",
        b"bhyve bhyve " | b"bhyve bhyve" => "bhyve",
        b"VBoxVBoxVBox" => "virtualbox",
        b" lrpepyh  vr" | b"prl hyperv  " | b"prl hyperv" => "parallels",
        b"ACRNACRNACRN" => "acrn",
        b"QNXQVMBSQG" => "qnx",
        b"OpenBSDVMM58" => "openbsd-vmm",
        b"Jailhouse" => "jailhouse",
        b"SRESRESRESRE" => "sre",
        _ => return None,
    })
}

/// A hypervisor named by DMI, `/sys/hypervisor` or the device tree. Only strings that cannot
/// describe bare metal count (an `Amazon EC2` `*.metal` instance is bare metal, for example).
fn dmi_hint(root: &Path) -> Option<&'static str> {
    if let Some(t) = read_trimmed(root, "sys/hypervisor/type") {
        match t.as_str() {
            "xen" => return Some("xen"),
            "s390" | "" => {}
            _ => return Some(UNKNOWN),
        }
    }
    if read_trimmed(root, "proc/device-tree/hypervisor/compatible")
        .is_some_and(|c| c.contains("xen"))
    {
        return Some("xen");
    }
    let vendor = read_trimmed(root, "sys/class/dmi/id/sys_vendor")
        .unwrap_or_default()
        .to_ascii_lowercase();
    let product = read_trimmed(root, "sys/class/dmi/id/product_name")
        .unwrap_or_default()
        .to_ascii_lowercase();
    let either = |s: &str| vendor.contains(s) || product.contains(s);
    Some(if product.contains("kvm") {
        "kvm"
    } else if vendor.contains("qemu") {
        "qemu"
    } else if either("vmware") {
        "vmware"
    } else if either("virtualbox") || vendor.contains("innotek") {
        "virtualbox"
    } else if vendor == "xen" || product.contains("hvm domu") {
        "xen"
    } else if vendor.contains("microsoft") && product.contains("virtual machine") {
        "hyperv"
    } else if either("bhyve") {
        "bhyve"
    } else if either("parallels") {
        "parallels"
    } else if product.contains("google compute engine") {
        "kvm"
    } else if vendor.contains("amazon ec2") && !product.is_empty() && !product.contains("metal") {
        // Nitro is KVM-based; its x86 guests report a KVM signature in CPUID too.
        "kvm"
    } else if product.contains("apple virtualization") {
        "apple"
    } else {
        return None;
    })
}

/// ISA extensions the live CPU and OS support, in the contract's fixed order.
fn live_isa() -> Vec<String> {
    #[allow(unused_mut)]
    let mut isa: Vec<&str> = Vec::new();
    #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
    {
        let checks = [
            ("sse2", is_x86_feature_detected!("sse2")),
            ("sse4.2", is_x86_feature_detected!("sse4.2")),
            ("avx", is_x86_feature_detected!("avx")),
            ("avx2", is_x86_feature_detected!("avx2")),
            ("fma", is_x86_feature_detected!("fma")),
            ("avx512f", is_x86_feature_detected!("avx512f")),
            ("avx512bw", is_x86_feature_detected!("avx512bw")),
            ("avx512vl", is_x86_feature_detected!("avx512vl")),
            ("avx512vnni", is_x86_feature_detected!("avx512vnni")),
            ("avx512bf16", is_x86_feature_detected!("avx512bf16")),
            ("avx512fp16", is_x86_feature_detected!("avx512fp16")),
            ("amx", amx_usable()),
        ];
        isa.extend(checks.iter().filter(|(_, on)| *on).map(|(name, _)| *name));
    }
    #[cfg(target_arch = "aarch64")]
    {
        use std::arch::is_aarch64_feature_detected;
        let checks = [
            ("neon", is_aarch64_feature_detected!("neon")),
            ("fp16", is_aarch64_feature_detected!("fp16")),
            ("dotprod", is_aarch64_feature_detected!("dotprod")),
            ("sve", is_aarch64_feature_detected!("sve")),
            ("sve2", is_aarch64_feature_detected!("sve2")),
            ("i8mm", is_aarch64_feature_detected!("i8mm")),
            ("bf16", is_aarch64_feature_detected!("bf16")),
        ];
        isa.extend(checks.iter().filter(|(_, on)| *on).map(|(name, _)| *name));
    }
    isa.into_iter().map(str::to_string).collect()
}

/// AMX tiles present and enabled by the OS (XCR0 bits 17 and 18). Done by hand because
/// `is_x86_feature_detected!("amx-tile")` is still unstable.
#[cfg(target_arch = "x86_64")]
fn amx_usable() -> bool {
    if cpuid(0, 0).eax < 7 || cpuid(1, 0).ecx & (1 << 27) == 0 || cpuid(7, 0).edx & (1 << 24) == 0 {
        return false;
    }
    let (lo, _hi): (u32, u32);
    // SAFETY: CPUID.1:ECX.OSXSAVE (checked above) means the OS enabled XGETBV; reading XCR0 has
    // no side effects and touches no memory.
    unsafe {
        core::arch::asm!(
            "xgetbv",
            in("ecx") 0u32,
            out("eax") lo,
            out("edx") _hi,
            options(nomem, nostack, preserves_flags),
        );
    }
    lo & (0b11 << 17) == 0b11 << 17
}

#[cfg(target_arch = "x86")]
fn amx_usable() -> bool {
    false
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::path::PathBuf;

    /// Write `content` at `rel` under `root`, creating parents.
    pub(crate) fn put(root: &Path, rel: &str, content: &str) {
        let path: PathBuf = root.join(rel);
        fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        fs::write(path, content).expect("write");
    }

    /// 4 logical CPUs = 2 cores × 2 SMT threads, siblings (0,1) and (2,3), one socket, with L1d,
    /// L1i, L2 per core and one shared L3, two NUMA nodes.
    pub(crate) fn smt_tree(root: &Path) {
        put(root, "sys/devices/system/cpu/online", "0-3\n");
        put(root, "sys/devices/system/cpu/possible", "0-3\n");
        for cpu in 0..4usize {
            let core = cpu / 2;
            let siblings = if core == 0 { "0-1" } else { "2-3" };
            let t = format!("sys/devices/system/cpu/cpu{cpu}/topology");
            put(root, &format!("{t}/physical_package_id"), "0\n");
            put(root, &format!("{t}/die_id"), "0\n");
            put(root, &format!("{t}/core_id"), &format!("{core}\n"));
            put(
                root,
                &format!("{t}/thread_siblings_list"),
                &format!("{siblings}\n"),
            );
            let c = format!("sys/devices/system/cpu/cpu{cpu}/cache");
            for (i, level, ty, size, shared) in [
                (0, 1, "Data", "32K", siblings),
                (1, 1, "Instruction", "32K", siblings),
                (2, 2, "Unified", "1024K", siblings),
                (3, 3, "Unified", "32768K", "0-3"),
            ] {
                put(root, &format!("{c}/index{i}/level"), &format!("{level}\n"));
                put(root, &format!("{c}/index{i}/type"), &format!("{ty}\n"));
                put(root, &format!("{c}/index{i}/size"), &format!("{size}\n"));
                put(
                    root,
                    &format!("{c}/index{i}/shared_cpu_list"),
                    &format!("{shared}\n"),
                );
            }
        }
        put(root, "sys/devices/system/node/node0/cpulist", "0-1\n");
        put(root, "sys/devices/system/node/node1/cpulist", "2-3\n");
        put(root, "sys/devices/system/node/possible", "0-1\n");
        put(
            root,
            "proc/meminfo",
            "MemTotal:       16318404 kB\nMemFree:         1000000 kB\nMemAvailable:   12000000 kB\n",
        );
        put(
            root,
            "etc/os-release",
            "NAME=\"Debian GNU/Linux\"\nVERSION_ID=\"12\"\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n",
        );
        put(root, "proc/sys/kernel/hostname", "bench01\n");
        put(root, "proc/sys/kernel/osrelease", "6.1.0-18-amd64\n");
    }

    const EPYC_CPUINFO: &str = "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\n\
model\t\t: 17\nmodel name\t: AMD EPYC 9654 96-Core Processor\nstepping\t: 1\ncpu MHz\t\t: 2596.142\n\
flags\t\t: fpu sse2 avx avx2 fma hypervisor avx512f\n\nprocessor\t: 1\nvendor_id\t: Bogus\n";

    const XEON_CPUINFO: &str = "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\n\
model\t\t: 106\nmodel name\t: Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz\nstepping\t: 6\n\
cpu MHz\t\t: 1234.000\nflags\t\t: fpu sse2 avx avx2 fma avx512f\n\n";

    const ARM_CPUINFO: &str = "processor\t: 0\nBogoMIPS\t: 243.75\n\
Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm lrcpc dcpop asimddp\n\
CPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x3\nCPU part\t: 0xd0c\nCPU revision\t: 1\n\n";

    #[test]
    fn epyc_fixture_inventory() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        smt_tree(root);
        put(root, "proc/cpuinfo", EPYC_CPUINFO);
        put(
            root,
            "sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq",
            "3700000\n",
        );
        put(
            root,
            "sys/devices/system/cpu/cpu0/cpufreq/scaling_governor",
            "performance\n",
        );
        put(root, "sys/class/dmi/id/sys_vendor", "QEMU\n");
        put(
            root,
            "sys/class/dmi/id/product_name",
            "Standard PC (Q35 + ICH9, 2009)\n",
        );

        let h = inventory_from(root);
        assert_eq!(h.hostname, "bench01");
        assert_eq!(h.kernel, "6.1.0-18-amd64");
        assert_eq!(h.os, "Debian GNU/Linux 12 (bookworm)");
        assert_eq!(h.virtualization, "qemu");
        assert_eq!(h.cpu.vendor, "AuthenticAMD");
        assert_eq!(h.cpu.model, "AMD EPYC 9654 96-Core Processor");
        assert_eq!(h.cpu.family, Some(0x19));
        assert_eq!(h.cpu.model_id, Some(0x11));
        assert_eq!(h.cpu.microarch.as_deref(), Some("Zen 4"));
        assert_eq!((h.cpu.sockets, h.cpu.cores, h.cpu.threads), (1, 2, 4));
        assert_eq!(h.cpu.nominal_hz, Some(3.7e9));
        assert_eq!(h.cpu.measured_hz, None);
        assert_eq!(h.memory.total_bytes, 16_318_404 * 1024);
        assert_eq!(h.numa_nodes, 2);
        assert_eq!(h.governor.as_deref(), Some("performance"));
        let cache = |level, kind: &str, size_bytes, instances| Cache {
            level,
            kind: kind.to_string(),
            size_bytes,
            instances,
        };
        assert_eq!(
            h.cpu.caches,
            vec![
                cache(1, "data", 32 * 1024, 2),
                cache(1, "instruction", 32 * 1024, 2),
                cache(2, "unified", 1024 * 1024, 2),
                cache(3, "unified", 32 * 1024 * 1024, 1),
            ]
        );
        assert_eq!(meminfo_bytes(root, "MemAvailable"), Some(12_000_000 * 1024));
    }

    #[test]
    fn xeon_fixture_inventory() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        smt_tree(root);
        put(root, "proc/cpuinfo", XEON_CPUINFO);
        // No cpufreq directory: the clock comes from the model name, not "cpu MHz".
        let h = inventory_from(root);
        assert_eq!(h.cpu.vendor, "GenuineIntel");
        assert_eq!(h.cpu.model, "Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz");
        assert_eq!((h.cpu.family, h.cpu.model_id), (Some(6), Some(0x6a)));
        assert_eq!(h.cpu.microarch.as_deref(), Some("Ice Lake-SP"));
        assert_eq!(h.cpu.nominal_hz, Some(2.9e9));
        assert_eq!(h.virtualization, "none");
        assert_eq!(h.governor, None);
    }

    #[test]
    fn a_disguised_xeon_is_named_from_its_features() {
        // A KVM guest as seen in issue 13: model 167 is Rocket Lake's number, but the flags carry
        // AMX and AVX512-FP16, which only Sapphire Rapids and later have.
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        put(
            root,
            "proc/cpuinfo",
            "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 167\n\
             model name\t: Intel Xeon Processor\nstepping\t: 1\nflags\t\t: fpu sse2 avx avx2 fma \
             hypervisor avx512f avx512ifma avx512_vnni avx512_bf16 avx512_fp16 amx_bf16 amx_tile \
             amx_int8\n\n",
        );
        let h = inventory_from(root);
        assert_eq!(h.cpu.microarch.as_deref(), Some("Sapphire Rapids"));
        let basis = h.cpu.microarch_basis.expect("basis");
        assert!(basis.contains("names Rocket Lake"), "{basis}");
        // A consistent model number is named from the number alone.
        assert_eq!(
            inventory_from_cpuinfo(XEON_CPUINFO)
                .cpu
                .microarch_basis
                .as_deref(),
            Some("CPUID family 6 model 0x6a")
        );
    }

    fn inventory_from_cpuinfo(cpuinfo: &str) -> Host {
        let dir = tempfile::tempdir().expect("tempdir");
        put(dir.path(), "proc/cpuinfo", cpuinfo);
        inventory_from(dir.path())
    }

    #[test]
    fn hypervisor_flag_without_vendor_is_unknown_and_dmi_names_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        put(root, "proc/cpuinfo", EPYC_CPUINFO);
        assert_eq!(inventory_from(root).virtualization, "unknown");
        put(
            root,
            "sys/class/dmi/id/sys_vendor",
            "Microsoft Corporation\n",
        );
        put(root, "sys/class/dmi/id/product_name", "Virtual Machine\n");
        assert_eq!(inventory_from(root).virtualization, "hyperv");
        // Bare-metal cloud hardware is not a VM.
        put(root, "proc/cpuinfo", XEON_CPUINFO);
        put(root, "sys/class/dmi/id/sys_vendor", "Amazon EC2\n");
        put(root, "sys/class/dmi/id/product_name", "c6i.metal\n");
        assert_eq!(inventory_from(root).virtualization, "none");
        put(root, "sys/class/dmi/id/product_name", "c6i.large\n");
        assert_eq!(inventory_from(root).virtualization, "kvm");
    }

    #[test]
    fn arm_fixture_inventory() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        smt_tree(root);
        put(root, "proc/cpuinfo", ARM_CPUINFO);
        let h = inventory_from(root);
        assert_eq!(h.cpu.vendor, "ARM");
        assert_eq!(h.cpu.model, "Neoverse N1");
        assert_eq!((h.cpu.family, h.cpu.model_id), (Some(0x41), Some(0xd0c)));
        assert_eq!(h.cpu.microarch.as_deref(), Some("Neoverse N1"));
        assert_eq!(h.cpu.nominal_hz, None);
        assert_eq!(h.virtualization, "none");
    }

    #[test]
    fn arm_midr_fallback_and_unknown_part_in_hex() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        put(
            root,
            "proc/cpuinfo",
            "processor\t: 0\nBogoMIPS\t: 50.00\n\n",
        );
        put(
            root,
            "sys/devices/system/cpu/cpu0/regs/identification/midr_el1",
            "0x00000000c00fabc0\n",
        );
        let h = inventory_from(root);
        assert_eq!(h.cpu.vendor, "Ampere");
        assert_eq!(h.cpu.model, "0xabc");
        assert_eq!((h.cpu.family, h.cpu.model_id), (Some(0xc0), Some(0xabc)));
        assert_eq!(h.cpu.microarch, None);
    }

    #[test]
    fn empty_root_gives_unknowns_without_panicking() {
        let dir = tempfile::tempdir().expect("tempdir");
        let h = inventory_from(dir.path());
        assert_eq!(h.hostname, "unknown");
        assert_eq!(h.os, "unknown");
        assert_eq!(h.kernel, "unknown");
        assert_eq!(h.virtualization, "unknown");
        assert_eq!(h.cpu.vendor, "unknown");
        assert_eq!(h.cpu.model, "unknown");
        assert_eq!((h.cpu.sockets, h.cpu.cores, h.cpu.threads), (0, 0, 0));
        assert!(h.cpu.caches.is_empty());
        assert_eq!(h.cpu.nominal_hz, None);
        assert_eq!(
            (h.cpu.family, h.cpu.model_id, h.cpu.microarch.as_deref()),
            (None, None, None)
        );
        assert_eq!(h.memory.total_bytes, 0);
        assert_eq!(h.numa_nodes, 1);
        assert_eq!(h.governor, None);
        // The ISA is the live CPU's even for a fixture.
        #[cfg(target_arch = "x86_64")]
        assert!(h.cpu.isa.iter().any(|f| f == "sse2"));
        // A missing root is just as harmless.
        let h = inventory_from(&dir.path().join("does/not/exist"));
        assert_eq!(h.cpu.threads, 0);
    }

    #[test]
    fn garbage_files_are_tolerated() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        put(root, "sys/devices/system/cpu/online", "zero-three\n");
        put(root, "sys/devices/system/cpu/cpu0/topology/core_id", "x\n");
        put(
            root,
            "sys/devices/system/cpu/cpu0/cache/index0/level",
            "1\n",
        );
        put(
            root,
            "sys/devices/system/cpu/cpu0/cache/index0/type",
            "Data\n",
        );
        put(
            root,
            "sys/devices/system/cpu/cpu0/cache/index0/size",
            "lots\n",
        );
        put(
            root,
            "sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq",
            "fast\n",
        );
        put(root, "proc/meminfo", "MemTotal: many kB\n");
        put(root, "proc/cpuinfo", "\u{0}\u{1}garbage without colons\n");
        put(root, "etc/os-release", "PRETTY_NAME=\n");
        let h = inventory_from(root);
        // The online file is unreadable, so the cpuN directories are counted instead.
        assert_eq!(h.cpu.threads, 1);
        assert_eq!(h.cpu.cores, 0);
        assert_eq!(
            h.cpu.caches,
            vec![Cache {
                level: 1,
                kind: "data".into(),
                size_bytes: 0,
                instances: 0
            }]
        );
        assert_eq!(h.cpu.nominal_hz, None);
        assert_eq!(h.memory.total_bytes, 0);
        assert_eq!(h.os, "unknown");
    }

    #[test]
    fn live_inventory_fills() {
        let h = inventory();
        assert!(h.cpu.threads >= 1);
        assert!(h.numa_nodes >= 1);
        assert_ne!(h.hostname, "");
        assert_eq!(h.cpu.measured_hz, None);
        #[cfg(target_os = "linux")]
        {
            assert_ne!(h.kernel, "unknown");
            assert!(h.cpu.cores >= 1);
            assert!(h.memory.total_bytes > 0);
            assert!(available_memory_bytes() > 0);
            assert!(available_memory_bytes() <= h.memory.total_bytes);
        }
        #[cfg(target_arch = "x86_64")]
        assert!(h.cpu.isa.iter().any(|f| f == "sse2"));
    }

    #[test]
    fn isa_order_is_fixed() {
        let order = [
            "sse2",
            "sse4.2",
            "avx",
            "avx2",
            "fma",
            "avx512f",
            "avx512bw",
            "avx512vl",
            "avx512vnni",
            "avx512bf16",
            "avx512fp16",
            "amx",
            "neon",
            "fp16",
            "dotprod",
            "sve",
            "sve2",
            "i8mm",
            "bf16",
        ];
        let isa = live_isa();
        let positions: Vec<usize> = isa
            .iter()
            .map(|f| order.iter().position(|o| o == f).expect("known feature"))
            .collect();
        assert!(positions.windows(2).all(|w| w[0] < w[1]), "{isa:?}");
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(
            parse_cpu_list("0-3,8-11").expect("valid list"),
            vec![0, 1, 2, 3, 8, 9, 10, 11]
        );
        assert_eq!(parse_cpu_list("5").expect("valid list"), vec![5]);
        assert_eq!(parse_cpu_list(" 0-1 \n").expect("valid list"), vec![0, 1]);
        assert_eq!(
            parse_cpu_list("3, 1,1-2").expect("valid list"),
            vec![1, 2, 3]
        );
        assert_eq!(
            parse_cpu_list("\n").expect("valid list"),
            Vec::<usize>::new()
        );
        assert_eq!(parse_cpu_list("7-7").expect("valid list"), vec![7]);
        for bad in [
            "abc",
            "3-1",
            "0-",
            "-1",
            "1-2-3",
            "0,,1",
            "1.5",
            "0-99999999999",
        ] {
            let err = parse_cpu_list(bad).expect_err(bad).to_string();
            assert!(err.contains(bad), "{err} should name {bad}");
        }
    }

    #[test]
    fn cache_sizes() {
        assert_eq!(parse_cache_size("32K"), Some(32 * 1024));
        assert_eq!(parse_cache_size("1024K\n"), Some(1024 * 1024));
        assert_eq!(parse_cache_size("32M"), Some(32 << 20));
        assert_eq!(parse_cache_size("1G"), Some(1 << 30));
        assert_eq!(parse_cache_size("512"), Some(512));
        assert_eq!(parse_cache_size("48 KiB"), Some(48 * 1024));
        assert_eq!(parse_cache_size("2MB"), Some(2 << 20));
        for bad in [
            "",
            "K",
            "abc",
            "-1K",
            "32X",
            "1.5M",
            "99999999999999999999G",
            "18014398509481984G",
        ] {
            assert_eq!(parse_cache_size(bad), None, "{bad}");
        }
    }

    #[test]
    fn arm_microarch_table() {
        assert_eq!(arm_microarch(0x41, 0xd4f), Some("Neoverse V2"));
        assert_eq!(arm_microarch(0x41, 0xd08), None);
    }

    #[test]
    fn clock_from_model_name() {
        assert_eq!(
            model_name_hz("Intel(R) Xeon(R) CPU E5-2680 v4 @ 2.40GHz"),
            Some(2.4e9)
        );
        assert_eq!(model_name_hz("Some CPU @ 2450MHz"), Some(2.45e9));
        assert_eq!(model_name_hz("AMD EPYC 7763 64-Core Processor"), None);
        assert_eq!(model_name_hz("odd @ fast"), None);
        assert_eq!(model_name_hz("odd @ 3.0"), None);
    }

    #[test]
    fn hypervisor_signatures() {
        assert_eq!(hypervisor_from_signature(b"KVMKVMKVM\0\0\0"), Some("kvm"));
        assert_eq!(hypervisor_from_signature(b"Microsoft Hv"), Some("hyperv"));
        assert_eq!(hypervisor_from_signature(b"VMwareVMware"), Some("vmware"));
        assert_eq!(hypervisor_from_signature(b"XenVMMXenVMM"), Some("xen"));
        assert_eq!(hypervisor_from_signature(b"TCGTCGTCGTCG"), Some("qemu"));
        assert_eq!(hypervisor_from_signature(b"bhyve bhyve "), Some("bhyve"));
        assert_eq!(hypervisor_from_signature(b"NotAHypervsr"), None);
        assert_eq!(hypervisor_from_signature(&[0; 12]), None);
    }

    #[test]
    fn os_release_quoting() {
        assert_eq!(unquote("\"Debian GNU/Linux 12\""), "Debian GNU/Linux 12");
        assert_eq!(unquote("'Arch Linux'"), "Arch Linux");
        assert_eq!(unquote("Fedora"), "Fedora");
        assert_eq!(unquote("\"say \\\"hi\\\"\""), "say \"hi\"");
        assert_eq!(unquote("\""), "\"");
        let dir = tempfile::tempdir().expect("tempdir");
        put(
            dir.path(),
            "usr/lib/os-release",
            "NAME=Alpine\nVERSION=3.19\n",
        );
        assert_eq!(os_name(dir.path()).as_deref(), Some("Alpine 3.19"));
    }
}

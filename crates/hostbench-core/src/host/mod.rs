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
//!
//! The gathering is split by subject: `topology` (CPU lists, sockets / cores / threads, NUMA
//! nodes, memory), `caches`, `identify` (vendor, model, microarchitecture, nominal clock), `virt`
//! (hypervisor), `isa` (run-time ISA extensions) and `os` (hostname, kernel, OS name). This
//! module ties them together in [`inventory`] / [`inventory_from`] and holds the few helpers they
//! all share (`read_trimmed`, `parse_u32`, `CPU_DIR`).

mod caches;
mod identify;
mod isa;
mod os;
mod topology;
mod virt;

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

use crate::model::{Cpu, Host, Memory};

use caches::caches;
use identify::{cpuinfo_first_block, identify, nominal_hz};
use isa::live_isa;
use os::{os_name, uname};
use topology::{cpu_dirs, meminfo_bytes, numa_nodes};
use virt::virtualization;

pub use caches::parse_cache_size;
pub use topology::{
    available_memory_bytes, cpu_relation, cpu_relation_in, format_cpu_list, meminfo, numa_topology,
    numa_topology_from, parse_cpu_list, CpuRelation, NumaNode,
};
pub(crate) use topology::{cpu_place, CoreKey, CpuPlace};

const UNKNOWN: &str = "unknown";
/// Where the kernel describes logical CPUs, relative to the root.
pub(crate) const CPU_DIR: &str = "sys/devices/system/cpu";

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
            microcode: info.get("microcode").cloned().filter(|s| !s.is_empty()),
            effective_cores: None,
            effective_cores_basis: None,
            effective_cores_note: None,
        },
        memory: Memory {
            total_bytes: meminfo_bytes(root, "MemTotal").unwrap_or(0),
        },
        numa_nodes: numa_nodes(root),
        governor: read_trimmed(root, &format!("{CPU_DIR}/cpu0/cpufreq/scaling_governor"))
            .filter(|s| !s.is_empty()),
        thp: read_trimmed(root, "sys/kernel/mm/transparent_hugepage/enabled")
            .and_then(|s| selected_mode(&s)),
        kernel_cmdline: read_trimmed(root, "proc/cmdline").filter(|s| !s.is_empty()),
        health: None,
    }
}

/// The bracketed choice of a sysfs mode list (`always [madvise] never` → `madvise`).
fn selected_mode(list: &str) -> Option<String> {
    let start = list.find('[')? + 1;
    let len = list[start..].find(']')?;
    Some(list[start..start + len].to_string())
}

/// A file under `root`, lossily decoded (DMI strings are not always UTF-8) and trimmed.
fn read_trimmed(root: &Path, rel: &str) -> Option<String> {
    let bytes = fs::read(root.join(rel)).ok()?;
    Some(String::from_utf8_lossy(&bytes).trim().to_string())
}

/// Decimal, or hexadecimal with a `0x` prefix.
fn parse_u32(s: &str) -> Option<u32> {
    let s = s.trim();
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u32::from_str_radix(hex, 16).ok(),
        None => s.parse().ok(),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::model::Cache;
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
model\t\t: 17\nmodel name\t: AMD EPYC 9654 96-Core Processor\nstepping\t: 1\nmicrocode\t: 0xa10113e\n\
cpu MHz\t\t: 2596.142\nflags\t\t: fpu sse2 avx avx2 fma hypervisor avx512f\n\nprocessor\t: 1\nvendor_id\t: Bogus\n";

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
            "sys/kernel/mm/transparent_hugepage/enabled",
            "always [madvise] never\n",
        );
        put(
            root,
            "proc/cmdline",
            "BOOT_IMAGE=/vmlinuz quiet mitigations=off\n",
        );
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
        assert_eq!(h.thp.as_deref(), Some("madvise"));
        assert_eq!(
            h.kernel_cmdline.as_deref(),
            Some("BOOT_IMAGE=/vmlinuz quiet mitigations=off")
        );
        assert_eq!(h.cpu.microcode.as_deref(), Some("0xa10113e"));
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
}

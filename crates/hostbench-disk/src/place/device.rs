//! The block device under a directory and the link it hangs on (PCIe, SATA, SAS, NVMe-oF,
//! virtio, …), read from sysfs; and the theoretical peak a disk record is compared with.
//!
//! Why this is its own module: a result means more next to the interface limit (`disk_peak`), and
//! finding that limit is a walk through sysfs that differs per bus. The `_from` functions take the
//! sysfs root as a parameter so tests can use a fixture tree.
//!
//! Stacked devices are followed down (`Stack`): a loop device to the device holding its backing
//! file (`loop/backing_file`, `loop/dio`), device-mapper and md to their members (`slaves/`). A
//! loop device without direct I/O reads and writes its backing file through the host's page
//! cache, so O_DIRECT on it measures memory, as on tmpfs (`DeviceInfo::memory_note`); with direct
//! I/O, or under a dm or md device with one member, the device below is the one whose limits
//! apply (`DeviceInfo::limits`).

use std::path::{Path, PathBuf};

use hostbench_core::model::Peak;
use hostbench_core::spec::Spec;
use hostbench_core::units::format_value;
use serde::Serialize;

/// Where sysfs lives; the `_from` functions take it as a parameter so tests can use a fixture tree.
pub(super) const SYS_ROOT: &str = "/sys";

/// The block device under a directory and the link it hangs on.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeviceInfo {
    /// Kernel name of the whole disk (partitions resolved to their disk): nvme0n1, vda, sda, dm-0.
    pub name: String,
    pub model: Option<String>,
    pub rotational: Option<bool>,
    pub logical_block: Option<u32>,
    pub physical_block: Option<u32>,
    /// "PCIe 4.0 x4", "SATA 6.0 Gb/s", "virtio", …; None for stacked devices (dm, md, loop).
    pub interface: Option<String>,
    /// The link's payload rate in bytes/s after line encoding; None where there is no wire limit
    /// (virtio) or it could not be read.
    pub interface_bps: Option<f64>,
    /// What a stacked device (loop, dm, md) is built on, resolved down to disks; None for a disk.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stack: Option<Stack>,
}

/// What a loop, device-mapper or md device is built on.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Stack {
    /// "loop", "dm" or "md".
    pub kind: String,
    /// dm: the mapping's name (`dm/name`, e.g. vg0-data); md: its RAID level (`md/level`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// loop: the file it reads and writes (`loop/backing_file`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backing_file: Option<String>,
    /// loop: whether it reaches that file with direct I/O (`loop/dio`); without, every I/O goes
    /// through the host's page cache. None where the kernel does not say (before 4.4).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub direct_io: Option<bool>,
    /// loop: the filesystem holding the backing file (tmpfs makes it memory whatever `dio` is).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backing_fs: Option<String>,
    /// The devices below: a loop device's, the one holding its backing file (none where that
    /// filesystem has no block device); dm's and md's, their members.
    pub below: Vec<DeviceInfo>,
}

/// How deep a stack is followed: dm over md over loop over a partition is four; a cycle (which
/// sysfs should never show) stops here rather than recursing forever.
const MAX_STACK_DEPTH: u32 = 8;

/// The device number and filesystem name of a loop device's backing file (a parameter so the
/// fixture tests need not have a real file on a real device).
type BackingStat<'a> = &'a dyn Fn(&Path) -> (Option<(u32, u32)>, Option<String>);

fn backing_stat(path: &Path) -> (Option<(u32, u32)>, Option<String>) {
    (
        dev_of(path),
        super::fs::fs_info(path).ok().map(|f| f.fs_type),
    )
}

impl DeviceInfo {
    /// The device whose limits (interface peak, rotational flag) bound a figure measured here:
    /// below a loop device with direct I/O, the device holding its backing file; below a dm or md
    /// device with one member, that member; otherwise this device. A memory-backed stack has no
    /// device limit, so it stays here (whose interface is unknown, hence no peak).
    pub fn limits(&self) -> &DeviceInfo {
        let Some(s) = &self.stack else {
            return self;
        };
        let through = s.kind != "loop" || s.direct_io == Some(true);
        match s.below.as_slice() {
            [one] if through && self.memory_note().is_none() => one.limits(),
            _ => self,
        }
    }

    /// Why I/O to this device measures memory rather than storage, naming the layer: a RAM disk,
    /// a loop device that reaches its backing file without direct I/O (through the host's page
    /// cache) or whose backing file is on tmpfs, or any device stacked on one of those.
    pub fn memory_note(&self) -> Option<String> {
        if self.name.starts_with("zram") || self.name.starts_with("ram") {
            return Some(format!("memory, not storage: {} is a RAM disk", self.name));
        }
        let s = self.stack.as_ref()?;
        if s.kind == "loop" {
            let file = s.backing_file.as_deref().unwrap_or("(unknown)");
            if let Some(fs @ ("tmpfs" | "ramfs")) = s.backing_fs.as_deref() {
                return Some(format!(
                    "memory, not storage: {} is backed by {file}, a file on {fs}",
                    self.name
                ));
            }
            if s.direct_io != Some(true) {
                return Some(format!(
                    "memory, not storage: {} reaches its backing file {file} through the host's \
                     page cache (loop direct I/O off: set it up with losetup --direct-io=on to \
                     measure the device below)",
                    self.name
                ));
            }
        }
        s.below
            .iter()
            .find_map(DeviceInfo::memory_note)
            .map(|n| format!("{n} ({} is stacked on it)", self.name))
    }

    /// The stack from this device down, for the record: "dm-0 (vg0-data) → loop0 (file
    /// /srv/disk.img, direct I/O off) → vda"; just the name for a disk.
    pub fn chain(&self) -> String {
        let mut out = self.name.clone();
        let Some(s) = &self.stack else {
            return out;
        };
        let mut what: Vec<String> = Vec::new();
        what.extend(s.label.clone());
        if let Some(f) = &s.backing_file {
            what.push(format!("file {f}"));
        }
        if s.kind == "loop" {
            what.push(
                match s.direct_io {
                    Some(true) => "direct I/O on",
                    Some(false) => "direct I/O off",
                    None => "direct I/O unknown",
                }
                .to_string(),
            );
        }
        if !what.is_empty() {
            out.push_str(&format!(" ({})", what.join(", ")));
        }
        match s.below.as_slice() {
            [] => {
                if let Some(fs) = &s.backing_fs {
                    out.push_str(&format!(" → {fs}"));
                }
            }
            [one] => out.push_str(&format!(" → {}", one.chain())),
            many => {
                let each: Vec<String> = many.iter().map(DeviceInfo::chain).collect();
                out.push_str(&format!(" → [{}]", each.join(", ")));
            }
        }
        out
    }
}

/// Find the device holding `dir` via its `st_dev`. None for filesystems without one (tmpfs,
/// overlay, btrfs's anonymous device numbers, NFS) or where sysfs is not mounted.
pub fn device_info(dir: &Path) -> Option<DeviceInfo> {
    let (major, minor) = dev_of(dir)?;
    device_info_from(Path::new(SYS_ROOT), major, minor)
}

#[cfg(any(target_os = "linux", target_os = "android"))]
pub(super) fn dev_of(path: &Path) -> Option<(u32, u32)> {
    use std::os::unix::fs::MetadataExt;
    let dev = std::fs::metadata(path).ok()?.dev();
    // The casts only unify c_uint (glibc) and c_int (bionic); device numbers are non-negative.
    Some((libc::major(dev) as u32, libc::minor(dev) as u32))
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
pub(super) fn dev_of(_path: &Path) -> Option<(u32, u32)> {
    None
}

/// The sysfs directory of the whole disk for `major:minor` (a partition resolves to its parent).
fn disk_dir(sys_root: &Path, major: u32, minor: u32) -> Option<PathBuf> {
    let dir = sys_root
        .join("dev/block")
        .join(format!("{major}:{minor}"))
        .canonicalize()
        .ok()?;
    // A partition's directory sits inside its disk's and has no queue/ of its own.
    if dir.join("partition").exists() {
        return dir.parent().map(Path::to_path_buf);
    }
    Some(dir)
}

pub(super) fn logical_block_from(sys_root: &Path, major: u32, minor: u32) -> Option<u32> {
    let disk = disk_dir(sys_root, major, minor)?;
    read_num(&disk.join("queue/logical_block_size"))
}

/// `device_info` against a sysfs tree rooted at `sys_root` (normally `/sys`).
pub fn device_info_from(sys_root: &Path, major: u32, minor: u32) -> Option<DeviceInfo> {
    device_info_with(sys_root, major, minor, &backing_stat)
}

fn device_info_with(
    sys_root: &Path,
    major: u32,
    minor: u32,
    stat: BackingStat<'_>,
) -> Option<DeviceInfo> {
    let disk = disk_dir(sys_root, major, minor)?;
    info_at(sys_root, &disk, stat, MAX_STACK_DEPTH)
}

/// A whole disk's sysfs directory (not a partition's) → its `DeviceInfo`, stacks followed down
/// to `depth` more levels.
fn info_at(sys_root: &Path, disk: &Path, stat: BackingStat<'_>, depth: u32) -> Option<DeviceInfo> {
    let disk = disk.to_path_buf();
    let name = disk.file_name()?.to_string_lossy().into_owned();
    let queue = disk.join("queue");
    let mut info = DeviceInfo {
        model: read_trim(&disk.join("device/model")),
        rotational: read_trim(&queue.join("rotational")).map(|s| s != "0"),
        logical_block: read_num(&queue.join("logical_block_size")),
        physical_block: read_num(&queue.join("physical_block_size")),
        interface: None,
        interface_bps: None,
        stack: None,
        name,
    };
    let stacked = ["dm-", "md", "loop", "zram", "nbd", "ram", "drbd", "rbd"];
    if stacked.iter().any(|p| info.name.starts_with(p)) {
        // Stacked or virtual: the limit is that of the devices below (or of memory), found by
        // following the stack; guessing one for the stacked device itself would be worse than
        // saying nothing.
        if depth > 0 {
            info.stack = stack_of(sys_root, &disk, &info.name, stat, depth - 1);
        }
        return Some(info);
    }
    let components: Vec<String> = disk
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    let numbered = |prefix: &str| {
        components.iter().find_map(|c| {
            let rest = c.strip_prefix(prefix)?;
            (!rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit())).then(|| rest.to_string())
        })
    };
    if info.name.starts_with("nvme") {
        (info.interface, info.interface_bps) = nvme_link(sys_root, &disk, &info.name);
    } else if numbered("virtio").is_some() {
        info.interface = Some("virtio".to_string());
    } else if info.name.starts_with("xvd") {
        info.interface = Some("Xen virtual block device".to_string());
    } else if numbered("usb").is_some() {
        // The USB generation is in the hub's `speed` file, but a bridge chip usually limits more.
        info.interface = Some("USB".to_string());
    } else if let Some((iface, bps)) = sas_link(&disk) {
        (info.interface, info.interface_bps) = (Some(iface), bps);
    } else if let Some(port) = numbered("ata") {
        let spd = read_trim(
            &sys_root
                .join("class/ata_link")
                .join(format!("link{port}"))
                .join("sata_spd"),
        );
        if let Some(gbps) = spd.as_deref().and_then(leading_number) {
            // 8b/10b encoding: 10 line bits per byte.
            info.interface = Some(format!("SATA {gbps:.1} Gb/s"));
            info.interface_bps = Some(gbps * 1e9 / 10.0);
        } else {
            info.interface = Some("SATA".to_string());
        }
    }
    Some(info)
}

/// What a loop, dm or md device at `disk` is built on; None for other devices and for a loop
/// device with nothing bound.
fn stack_of(
    sys_root: &Path,
    disk: &Path,
    name: &str,
    stat: BackingStat<'_>,
    depth: u32,
) -> Option<Stack> {
    if name.starts_with("loop") {
        let file = read_trim(&disk.join("loop/backing_file"))?;
        // A backing file unlinked after setup is still the loop device's; sysfs says so.
        let file = file.strip_suffix(" (deleted)").unwrap_or(&file).to_string();
        let direct_io = read_trim(&disk.join("loop/dio")).map(|s| s != "0");
        let (dev, backing_fs) = stat(Path::new(&file));
        let below = dev
            .and_then(|(major, minor)| disk_dir(sys_root, major, minor))
            .and_then(|d| info_at(sys_root, &d, stat, depth))
            .into_iter()
            .collect();
        return Some(Stack {
            kind: "loop".to_string(),
            label: None,
            backing_file: Some(file),
            direct_io,
            backing_fs,
            below,
        });
    }
    let (kind, label) = if name.starts_with("dm-") {
        ("dm", read_trim(&disk.join("dm/name")))
    } else if name.starts_with("md") {
        ("md", read_trim(&disk.join("md/level")))
    } else {
        return None;
    };
    // Each member is a link to its sysfs directory, a partition's inside its disk's.
    let mut members: Vec<PathBuf> = std::fs::read_dir(disk.join("slaves"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.path().canonicalize().ok())
        .filter_map(|p| {
            if p.join("partition").exists() {
                p.parent().map(Path::to_path_buf)
            } else {
                Some(p)
            }
        })
        .collect();
    members.sort_by(|a, b| a.file_name().cmp(&b.file_name()));
    members.dedup();
    let below = members
        .iter()
        .filter_map(|m| info_at(sys_root, m, stat, depth))
        .collect();
    Some(Stack {
        kind: kind.to_string(),
        label,
        backing_file: None,
        direct_io: None,
        backing_fs: None,
        below,
    })
}

/// The SAS link of a disk behind a SAS transport (an `end_device-*` in its sysfs path): the
/// negotiated rate of each phy of the port just above the end device (the HBA's, or an
/// expander's for an expander-attached disk), summed over a wide port. None when the disk is not
/// on SAS; a rate-less "SAS" when the phys cannot be read.
fn sas_link(disk: &Path) -> Option<(String, Option<f64>)> {
    let end_device = disk.ancestors().find(|a| {
        a.file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("end_device-"))
    })?;
    let port = end_device.parent()?;
    let mut rates: Vec<f64> = std::fs::read_dir(port)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.starts_with("phy-").then(|| {
                read_trim(
                    &e.path()
                        .join("sas_phy")
                        .join(&name)
                        .join("negotiated_linkrate"),
                )
            })?
        })
        .filter_map(|r| leading_number(&r))
        .collect();
    rates.sort_by(f64::total_cmp);
    let Some(&fastest) = rates.last() else {
        return Some(("SAS".to_string(), None));
    };
    // SAS-1 to SAS-3 (1.5–12 Gb/s) use 8b/10b, SAS-4 ("22.5 Gbit") 128b/150b.
    let payload = |gbit: f64| {
        if gbit > 12.0 {
            gbit * 1e9 * 128.0 / 150.0 / 8.0
        } else {
            gbit * 1e9 / 10.0
        }
    };
    let lanes = rates.len();
    let name = if lanes > 1 {
        format!("SAS {fastest:.1} Gb/s x{lanes}")
    } else {
        format!("SAS {fastest:.1} Gb/s")
    };
    Some((name, Some(rates.iter().map(|&g| payload(g)).sum())))
}

/// PCIe link of an NVMe namespace's controller, or the fabric transport for NVMe-oF.
fn nvme_link(sys_root: &Path, disk: &Path, name: &str) -> (Option<String>, Option<f64>) {
    // nvme0n1/device is the controller and its device the PCI function; with native multipath
    // nvme0n1/device is the subsystem instead, so also try the controller named after the disk.
    let ctrl_name: String = {
        let digits: String = name["nvme".len()..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        format!("nvme{digits}")
    };
    let ctrls = [
        disk.join("device"),
        sys_root.join("class/nvme").join(&ctrl_name),
    ];
    for ctrl in &ctrls {
        if let Some(t) = read_trim(&ctrl.join("transport")) {
            if t != "pcie" {
                return (Some(format!("NVMe over {t}")), None);
            }
        }
        let speed = read_trim(&ctrl.join("device/current_link_speed"));
        let width = read_num(&ctrl.join("device/current_link_width"));
        if let (Some(speed), Some(width)) = (speed, width) {
            // The per-lane payload after line encoding, shared with the PCIe health reader.
            let gen = leading_number(&speed).and_then(hostbench_core::health::lane_payload_bps);
            return match gen {
                Some((gen, per_lane)) if width > 0 => (
                    Some(format!("PCIe {gen}.0 x{width}")),
                    Some(per_lane * f64::from(width)),
                ),
                // "Unknown" speed, link down, or a generation this table predates.
                _ => (Some(format!("PCIe ({speed}, x{width})")), None),
            };
        }
    }
    (Some("NVMe".to_string()), None)
}

fn read_trim(path: &Path) -> Option<String> {
    let s = std::fs::read_to_string(path).ok()?;
    let s = s.trim();
    (!s.is_empty()).then(|| s.to_string())
}

fn read_num(path: &Path) -> Option<u32> {
    read_trim(path)?.parse().ok()
}

/// "16.0 GT/s PCIe" → 16.0, "6.0 Gbps" → 6.0.
fn leading_number(s: &str) -> Option<f64> {
    s.split_whitespace()
        .next()?
        .parse()
        .ok()
        .filter(|v: &f64| *v > 0.0)
}

/// The theoretical limit for a disk record: the spec file's datasheet figure if given, else (for
/// throughput only) the interface limit. IOPS have no honest peak without a datasheet.
pub fn disk_peak(dev: Option<&DeviceInfo>, spec: &Spec, write: bool, iops: bool) -> Option<Peak> {
    let (key, value) = match (write, iops) {
        (false, false) => ("read_bps", spec.disk.read_bps),
        (true, false) => ("write_bps", spec.disk.write_bps),
        (false, true) => ("read_iops", spec.disk.read_iops),
        (true, true) => ("write_iops", spec.disk.write_iops),
    };
    if let Some(value) = value {
        return Some(Peak {
            value,
            basis: format!("spec file disk.{key}"),
        });
    }
    if iops {
        return None;
    }
    let top = dev?;
    let dev = top.limits();
    let (iface, bps) = (dev.interface.as_deref()?, dev.interface_bps?);
    let basis = interface_basis(iface, bps);
    Some(Peak {
        value: bps,
        // Through a stack, the path to the device whose link it is.
        basis: if dev.name == top.name {
            basis
        } else {
            format!("{}: {basis}", top.chain())
        },
    })
}

fn interface_basis(iface: &str, bps: f64) -> String {
    const NOT_DEVICE: &str = "(interface limit, not the device's)";
    let words: Vec<&str> = iface.split_whitespace().collect();
    if let ["PCIe", _gen, width] = words.as_slice() {
        if let Some(lanes) = width.strip_prefix('x').and_then(|w| w.parse::<u32>().ok()) {
            if lanes > 0 {
                let per_lane = bps / f64::from(lanes) / 1e9;
                return format!("{iface} link: {lanes} lanes x {per_lane} GB/s {NOT_DEVICE}");
            }
        }
    }
    if iface.starts_with("SATA") || iface.starts_with("SAS") {
        let encoding = match leading_number(iface.split_once(' ').map_or("", |(_, r)| r)) {
            Some(g) if iface.starts_with("SAS") && g > 12.0 => "128b/150b",
            _ => "8b/10b",
        };
        return format!(
            "{iface} link: {} after {encoding} encoding {NOT_DEVICE}",
            format_value(bps, "B/s")
        );
    }
    format!("{iface} link: {} {NOT_DEVICE}", format_value(bps, "B/s"))
}

#[cfg(test)]
mod tests {
    use super::*;

    // ---- sysfs fixtures -------------------------------------------------------------------

    fn write(p: &Path, s: &str) {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, format!("{s}\n")).unwrap();
    }

    fn link(target: &str, at: &Path) {
        std::fs::create_dir_all(at.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(target, at).unwrap();
    }

    fn queue(disk: &Path, rot: &str, lbs: &str, pbs: &str) {
        write(&disk.join("queue/rotational"), rot);
        write(&disk.join("queue/logical_block_size"), lbs);
        write(&disk.join("queue/physical_block_size"), pbs);
    }

    /// An NVMe gen4 x4 drive with one partition, laid out like a real /sys.
    fn nvme_fixture(root: &Path) {
        let pci = root.join("devices/pci0000:00/0000:00:01.1/0000:01:00.0");
        write(&pci.join("current_link_speed"), "16.0 GT/s PCIe");
        write(&pci.join("current_link_width"), "4");
        let ctrl = pci.join("nvme/nvme0");
        write(
            &ctrl.join("model"),
            "Samsung SSD 980 PRO 1TB                 ",
        );
        write(&ctrl.join("transport"), "pcie");
        link("../../../0000:01:00.0", &ctrl.join("device"));
        let disk = ctrl.join("nvme0n1");
        queue(&disk, "0", "512", "512");
        link("../../nvme0", &disk.join("device"));
        write(&disk.join("nvme0n1p1/partition"), "1");
        link(
            "../../devices/pci0000:00/0000:00:01.1/0000:01:00.0/nvme/nvme0/nvme0n1/nvme0n1p1",
            &root.join("dev/block/259:1"),
        );
        link(
            "../../devices/pci0000:00/0000:00:01.1/0000:01:00.0/nvme/nvme0/nvme0n1",
            &root.join("dev/block/259:0"),
        );
        link(
            "../../devices/pci0000:00/0000:00:01.1/0000:01:00.0/nvme/nvme0",
            &root.join("class/nvme/nvme0"),
        );
    }

    fn sata_fixture(root: &Path) {
        let scsi = root.join("devices/pci0000:00/0000:00:1f.2/ata3/host2/target2:0:0/2:0:0:0");
        write(&scsi.join("model"), "WDC WD40EFRX-68N");
        let disk = scsi.join("block/sda");
        queue(&disk, "1", "512", "4096");
        link("../../../2:0:0:0", &disk.join("device"));
        write(&disk.join("sda2/partition"), "2");
        link(
            "../../devices/pci0000:00/0000:00:1f.2/ata3/host2/target2:0:0/2:0:0:0/block/sda/sda2",
            &root.join("dev/block/8:2"),
        );
        write(&root.join("class/ata_link/link3/sata_spd"), "6.0 Gbps");
    }

    /// A SAS disk behind an expander, on a 12 Gb/s narrow port, and a SAS-4 disk on a 2-phy
    /// wide port straight off the HBA.
    fn sas_fixture(root: &Path) {
        let hba = "devices/pci0000:00/0000:00:03.0/0000:02:00.0/host0";
        let sdb = sas_disk(
            root,
            hba,
            "port-0:0/expander-0:0/port-0:0:3",
            "0:0:3",
            "sdb 8:16",
        );
        write(&sdb.join("device/model"), "ST8000NM0075");
        sas_phys(
            root,
            hba,
            "port-0:0/expander-0:0/port-0:0:3",
            &["phy-0:0:3"],
            "12.0 Gbit",
        );
        sas_disk(root, hba, "port-0:1", "0:1", "sdc 8:32");
        sas_phys(root, hba, "port-0:1", &["phy-0:4", "phy-0:5"], "22.5 Gbit");
    }

    /// A disk `NAME MAJ:MIN` at `hba/port/end_device-END/...`, linked from dev/block.
    fn sas_disk(root: &Path, hba: &str, port: &str, end: &str, name_dev: &str) -> PathBuf {
        let (name, dev) = name_dev.split_once(' ').unwrap();
        let rel = format!("{hba}/{port}/end_device-{end}/target0:0:0/0:0:0:0/block/{name}");
        let disk = root.join(&rel);
        queue(&disk, "1", "512", "4096");
        std::fs::create_dir_all(disk.join("device")).unwrap();
        link(&format!("../../{rel}"), &root.join("dev/block").join(dev));
        disk
    }

    fn sas_phys(root: &Path, hba: &str, port: &str, phys: &[&str], rate: &str) {
        for phy in phys {
            let dir = root
                .join(hba)
                .join(port)
                .join(phy)
                .join("sas_phy")
                .join(phy);
            write(&dir.join("negotiated_linkrate"), rate);
        }
    }

    fn virtio_fixture(root: &Path) {
        let vdev = root.join("devices/pci0000:00/0000:00:02.0/virtio1");
        write(&vdev.join("modalias"), "virtio:d00000002v00001AF4");
        let disk = vdev.join("block/vda");
        queue(&disk, "1", "512", "512");
        link("../../../virtio1", &disk.join("device"));
        link(
            "../../devices/pci0000:00/0000:00:02.0/virtio1/block/vda",
            &root.join("dev/block/254:0"),
        );
        let dm = root.join("devices/virtual/block/dm-0");
        queue(&dm, "0", "4096", "4096");
        link(
            "../../devices/virtual/block/dm-0",
            &root.join("dev/block/252:0"),
        );
    }

    /// A loop device `loopN` at 7:N backed by `file`, `dio` "0" or "1" (None: no `dio` file).
    fn loop_fixture(root: &Path, n: u32, file: &str, dio: Option<&str>) {
        let dev = root.join(format!("devices/virtual/block/loop{n}"));
        // The loop driver says rotational unless told otherwise, whatever the file is on.
        queue(&dev, "1", "512", "512");
        write(&dev.join("loop/backing_file"), file);
        if let Some(d) = dio {
            write(&dev.join("loop/dio"), d);
        }
        link(
            &format!("../../devices/virtual/block/loop{n}"),
            &root.join(format!("dev/block/7:{n}")),
        );
    }

    /// A dm or md device at `MAJ:MIN` named `name` whose members are the sysfs paths `members`
    /// (relative to the root, as `slaves/` links point).
    fn stacked_fixture(root: &Path, name: &str, dev: &str, label: (&str, &str), members: &[&str]) {
        let dir = root.join("devices/virtual/block").join(name);
        queue(&dir, "0", "4096", "4096");
        write(&dir.join(label.0), label.1);
        for m in members {
            let member = Path::new(m)
                .file_name()
                .unwrap()
                .to_string_lossy()
                .into_owned();
            link(
                &format!("../../../../../{m}"),
                &dir.join("slaves").join(member),
            );
        }
        link(
            &format!("../../devices/virtual/block/{name}"),
            &root.join("dev/block").join(dev),
        );
    }

    /// The backing files of the stack fixtures: two on the NVMe drive's partition (259:1), one
    /// on the virtio disk (254:0), one on tmpfs (no block device).
    fn stat_fixture(path: &Path) -> (Option<(u32, u32)>, Option<String>) {
        match path.to_str() {
            Some("/srv/disk.img" | "/srv/fast.img") => (Some((259, 1)), Some("ext4".into())),
            Some("/var/vd.img") => (Some((254, 0)), Some("ext4".into())),
            Some("/dev/shm/ram.img") => (None, Some("tmpfs".into())),
            _ => (None, None),
        }
    }

    fn stacks(root: &Path) {
        nvme_fixture(root);
        sata_fixture(root);
        virtio_fixture(root);
        loop_fixture(root, 0, "/srv/disk.img", Some("0"));
        loop_fixture(root, 1, "/srv/fast.img", Some("1"));
        loop_fixture(root, 2, "/dev/shm/ram.img (deleted)", Some("1"));
        loop_fixture(root, 3, "/var/vd.img", None);
        stacked_fixture(
            root,
            "dm-1",
            "252:1",
            ("dm/name", "vg0-data"),
            &["devices/virtual/block/loop0"],
        );
        stacked_fixture(
            root,
            "dm-2",
            "252:2",
            ("dm/name", "vg0-fast"),
            &["devices/pci0000:00/0000:00:01.1/0000:01:00.0/nvme/nvme0/nvme0n1/nvme0n1p1"],
        );
        stacked_fixture(
            root,
            "md0",
            "9:0",
            ("md/level", "raid1"),
            &[
                "devices/pci0000:00/0000:00:1f.2/ata3/host2/target2:0:0/2:0:0:0/block/sda/sda2",
                "devices/pci0000:00/0000:00:02.0/virtio1/block/vda",
            ],
        );
    }

    fn stacked(root: &Path, major: u32, minor: u32) -> DeviceInfo {
        device_info_with(root, major, minor, &stat_fixture).unwrap()
    }

    /// Issue 55 (2): O_DIRECT through a loop device without direct I/O reaches its backing file
    /// through the page cache: memory, labelled as tmpfs is, with the file named and no peak.
    #[test]
    fn a_loop_device_without_direct_io_is_memory_with_its_backing_file_named() {
        let tmp = tempfile::tempdir().unwrap();
        stacks(tmp.path());
        let l = stacked(tmp.path(), 7, 0);
        assert_eq!(l.name, "loop0");
        let s = l.stack.as_ref().unwrap();
        assert_eq!(
            (s.kind.as_str(), s.direct_io, s.backing_file.as_deref()),
            ("loop", Some(false), Some("/srv/disk.img"))
        );
        assert_eq!(s.below.len(), 1);
        assert_eq!(s.below[0].name, "nvme0n1");
        let note = l.memory_note().unwrap();
        assert!(note.starts_with("memory, not storage: loop0 "), "{note}");
        assert!(
            note.contains("/srv/disk.img") && note.contains("--direct-io=on"),
            "{note}"
        );
        // The device below does not bound a figure of memory.
        assert_eq!(l.limits().name, "loop0");
        assert_eq!(disk_peak(Some(&l), &Spec::default(), false, false), None);
        assert_eq!(
            l.chain(),
            "loop0 (file /srv/disk.img, direct I/O off) → nvme0n1"
        );
        // A kernel without loop/dio (before 4.4) cannot say: not taken for direct.
        let old = stacked(tmp.path(), 7, 3);
        assert!(old.memory_note().is_some());
        assert!(
            old.chain().contains("direct I/O unknown"),
            "{}",
            old.chain()
        );
        assert_eq!(old.stack.unwrap().below[0].name, "vda");
    }

    #[test]
    fn a_loop_device_with_direct_io_takes_the_limits_of_the_device_below() {
        let tmp = tempfile::tempdir().unwrap();
        stacks(tmp.path());
        let l = stacked(tmp.path(), 7, 1);
        assert_eq!(l.memory_note(), None);
        assert_eq!(l.rotational, Some(true));
        let lim = l.limits();
        assert_eq!(lim.name, "nvme0n1");
        assert_eq!(lim.rotational, Some(false));
        let p = disk_peak(Some(&l), &Spec::default(), false, false).unwrap();
        assert!((p.value - 4.0 * 1.969e9).abs() < 1.0);
        assert_eq!(
            p.basis,
            "loop1 (file /srv/fast.img, direct I/O on) → nvme0n1: PCIe 4.0 x4 link: 4 lanes x \
             1.969 GB/s (interface limit, not the device's)"
        );
        // A backing file on tmpfs is memory whatever `dio` says; the " (deleted)" sysfs adds
        // to an unlinked file is not part of its name.
        let r = stacked(tmp.path(), 7, 2);
        let note = r.memory_note().unwrap();
        assert!(note.contains("/dev/shm/ram.img, a file on tmpfs"), "{note}");
        assert_eq!(r.limits().name, "loop2");
        assert_eq!(
            r.chain(),
            "loop2 (file /dev/shm/ram.img, direct I/O on) → tmpfs"
        );
    }

    #[test]
    fn dm_and_md_stacks_are_followed_to_their_members() {
        let tmp = tempfile::tempdir().unwrap();
        stacks(tmp.path());
        // dm over a loop device without direct I/O: memory, said through the stack.
        let dm = stacked(tmp.path(), 252, 1);
        let note = dm.memory_note().unwrap();
        assert!(
            note.contains("loop0 reaches its backing file /srv/disk.img")
                && note.ends_with("(dm-1 is stacked on it)"),
            "{note}"
        );
        assert_eq!(
            dm.chain(),
            "dm-1 (vg0-data) → loop0 (file /srv/disk.img, direct I/O off) → nvme0n1"
        );
        assert_eq!(disk_peak(Some(&dm), &Spec::default(), false, false), None);
        // dm over one partition: the disk's limits apply.
        let dm = stacked(tmp.path(), 252, 2);
        assert_eq!(dm.memory_note(), None);
        assert_eq!(dm.limits().name, "nvme0n1");
        assert_eq!(dm.chain(), "dm-2 (vg0-fast) → nvme0n1");
        let p = disk_peak(Some(&dm), &Spec::default(), true, false).unwrap();
        assert!(p
            .basis
            .starts_with("dm-2 (vg0-fast) → nvme0n1: PCIe 4.0 x4 link"));
        // md over two members: no single device's limit is the array's.
        let md = stacked(tmp.path(), 9, 0);
        assert_eq!(md.chain(), "md0 (raid1) → [sda, vda]");
        assert_eq!(md.limits().name, "md0");
        assert_eq!(md.memory_note(), None);
        assert_eq!(disk_peak(Some(&md), &Spec::default(), false, false), None);
        // A disk has no stack, and its JSON no `stack` key (the field is additive).
        let sda = stacked(tmp.path(), 8, 2);
        assert_eq!(sda.stack, None);
        assert_eq!(sda.chain(), "sda");
        assert!(serde_json::to_value(&sda).unwrap().get("stack").is_none());
        let json = serde_json::to_value(stacked(tmp.path(), 7, 0)).unwrap();
        assert_eq!(json["stack"]["direct_io"], false);
        assert_eq!(json["stack"]["below"][0]["name"], "nvme0n1");
    }

    #[test]
    fn device_info_nvme_gen4_x4_partition() {
        let tmp = tempfile::tempdir().unwrap();
        nvme_fixture(tmp.path());
        for minor in [1, 0] {
            let d = device_info_from(tmp.path(), 259, minor).unwrap();
            assert_eq!(d.name, "nvme0n1");
            assert_eq!(d.model.as_deref(), Some("Samsung SSD 980 PRO 1TB"));
            assert_eq!(d.rotational, Some(false));
            assert_eq!(d.logical_block, Some(512));
            assert_eq!(d.interface.as_deref(), Some("PCIe 4.0 x4"));
            assert!((d.interface_bps.unwrap() - 4.0 * 1.969e9).abs() < 1.0);
        }
        assert_eq!(logical_block_from(tmp.path(), 259, 1), Some(512));
        assert!(device_info_from(tmp.path(), 259, 7).is_none());
    }

    #[test]
    fn device_info_nvme_multipath_uses_class_controller() {
        let tmp = tempfile::tempdir().unwrap();
        nvme_fixture(tmp.path());
        // Native multipath: the namespace hangs under the subsystem, not the controller.
        let sub = tmp
            .path()
            .join("devices/virtual/nvme-subsystem/nvme-subsys0");
        write(&sub.join("model"), "Some Drive");
        let disk = sub.join("nvme0n2");
        queue(&disk, "0", "4096", "4096");
        link("../../nvme-subsys0", &disk.join("device"));
        link(
            "../../devices/virtual/nvme-subsystem/nvme-subsys0/nvme0n2",
            &tmp.path().join("dev/block/259:5"),
        );
        let d = device_info_from(tmp.path(), 259, 5).unwrap();
        assert_eq!(d.model.as_deref(), Some("Some Drive"));
        assert_eq!(d.interface.as_deref(), Some("PCIe 4.0 x4"));
    }

    #[test]
    fn device_info_sata_virtio_dm() {
        let tmp = tempfile::tempdir().unwrap();
        sata_fixture(tmp.path());
        virtio_fixture(tmp.path());
        let sda = device_info_from(tmp.path(), 8, 2).unwrap();
        assert_eq!(sda.name, "sda");
        assert_eq!(sda.model.as_deref(), Some("WDC WD40EFRX-68N"));
        assert_eq!(sda.rotational, Some(true));
        assert_eq!(sda.physical_block, Some(4096));
        assert_eq!(sda.interface.as_deref(), Some("SATA 6.0 Gb/s"));
        assert!((sda.interface_bps.unwrap() - 600e6).abs() < 1.0);

        let vda = device_info_from(tmp.path(), 254, 0).unwrap();
        assert_eq!(vda.name, "vda");
        assert_eq!(vda.interface.as_deref(), Some("virtio"));
        assert_eq!(vda.interface_bps, None);
        assert_eq!(vda.model, None);

        let dm = device_info_from(tmp.path(), 252, 0).unwrap();
        assert_eq!(dm.name, "dm-0");
        assert_eq!(dm.interface, None);
        assert_eq!(dm.logical_block, Some(4096));
    }

    #[test]
    fn device_info_sas_narrow_wide_and_sas4() {
        let tmp = tempfile::tempdir().unwrap();
        sas_fixture(tmp.path());
        let sdb = device_info_from(tmp.path(), 8, 16).unwrap();
        assert_eq!(sdb.model.as_deref(), Some("ST8000NM0075"));
        assert_eq!(sdb.interface.as_deref(), Some("SAS 12.0 Gb/s"));
        assert!((sdb.interface_bps.unwrap() - 1.2e9).abs() < 1.0);
        let p = disk_peak(Some(&sdb), &Spec::default(), false, false).unwrap();
        assert!(
            p.basis.starts_with("SAS 12.0 Gb/s link: 1.2"),
            "{}",
            p.basis
        );
        assert!(p.basis.contains("8b/10b"), "{}", p.basis);
        // Two 22.5 Gbit phys: 2 x 2.4 GB/s after 128b/150b.
        let sdc = device_info_from(tmp.path(), 8, 32).unwrap();
        assert_eq!(sdc.interface.as_deref(), Some("SAS 22.5 Gb/s x2"));
        assert!((sdc.interface_bps.unwrap() - 4.8e9).abs() < 1.0);
        let p = disk_peak(Some(&sdc), &Spec::default(), true, false).unwrap();
        assert!(p.basis.contains("128b/150b"), "{}", p.basis);
    }

    #[test]
    fn device_info_here_does_not_panic() {
        let tmp = tempfile::tempdir().unwrap();
        eprintln!("device_info(tempdir) = {:?}", device_info(tmp.path()));
        eprintln!(
            "device_info(/dev/shm) = {:?}",
            device_info(Path::new("/dev/shm"))
        );
    }

    #[test]
    fn disk_peak_spec_wins_then_interface() {
        let tmp = tempfile::tempdir().unwrap();
        nvme_fixture(tmp.path());
        let dev = device_info_from(tmp.path(), 259, 0).unwrap();
        let none = Spec::default();
        let p = disk_peak(Some(&dev), &none, false, false).unwrap();
        assert!((p.value - 7.876e9).abs() < 1.0);
        assert_eq!(
            p.basis,
            "PCIe 4.0 x4 link: 4 lanes x 1.969 GB/s (interface limit, not the device's)"
        );
        assert_eq!(disk_peak(Some(&dev), &none, false, true), None);
        assert_eq!(disk_peak(None, &none, true, false), None);

        let mut spec = Spec::default();
        spec.disk.read_bps = Some(7.0e9);
        spec.disk.write_iops = Some(1.0e6);
        let p = disk_peak(Some(&dev), &spec, false, false).unwrap();
        assert_eq!(
            (p.value, p.basis.as_str()),
            (7.0e9, "spec file disk.read_bps")
        );
        let p = disk_peak(None, &spec, true, true).unwrap();
        assert_eq!(
            (p.value, p.basis.as_str()),
            (1.0e6, "spec file disk.write_iops")
        );
        // Write throughput has no spec figure: back to the link.
        let p = disk_peak(Some(&dev), &spec, true, false).unwrap();
        assert!(p.basis.starts_with("PCIe 4.0 x4 link"));

        sata_fixture(tmp.path());
        let sda = device_info_from(tmp.path(), 8, 2).unwrap();
        let p = disk_peak(Some(&sda), &none, true, false).unwrap();
        assert!(
            p.basis
                .starts_with("SATA 6.0 Gb/s link: 600 MB/s after 8b/10b"),
            "{}",
            p.basis
        );
    }
}

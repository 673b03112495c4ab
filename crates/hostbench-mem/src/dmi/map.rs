//! Which DIMM holds a physical address, from the SMBIOS memory map (structure types 19 and 20).
//!
//! A burn's wrong word is only actionable when it names the module to pull, and the firmware's
//! SMBIOS table is the one place that ties physical addresses to slots without a platform-specific
//! EDAC driver. Type 20 (Memory Device Mapped Address) gives a type-17 device's address range; when
//! devices are interleaved, every device of the set maps the whole interleaved range with its
//! interleave position, so an address there lies on one of them and SMBIOS cannot say which: the
//! answer then names the set, never one member picked at random.
//!
//! Type 20 is optional since SMBIOS 2.8 and most current server firmware omits it; then only a
//! memory array (type 19 → 16) with a single populated device can be named, and otherwise there is
//! no answer rather than a guess. Some firmware gives each DIMM of an interleaved set a range of
//! its own and marks the interleave "unknown"; such a range does not say where a given cache line
//! lives, so a one-DIMM answer from it says the interleave was not stated.

use std::collections::HashMap;
use std::fmt;
use std::sync::OnceLock;

use super::{memory_device, Structure, Structures, DMI_TABLE, TYPE_MEMORY_DEVICE};

const TYPE_ARRAY_MAPPED: u8 = 19;
const TYPE_DEVICE_MAPPED: u8 = 20;
/// A starting address of all ones defers to the 64-bit extended fields (SMBIOS 2.7, > 4 TiB).
const USE_EXTENDED: u32 = 0xFFFF_FFFF;
/// Interleave position and depth: 0 is "not interleaved", 0xFF "unknown".
const NOT_INTERLEAVED: u8 = 0;
const UNKNOWN: u8 = 0xFF;
/// No DIMM maps less than this; smaller ranges (start = end = 0) are firmware placeholders for
/// empty slots and would claim the first kilobyte of memory.
const MIN_RANGE: u64 = 1 << 20;

/// A memory device (SMBIOS type 17) as the board names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slot {
    /// Device Locator, e.g. "DIMM_A1"; empty if the firmware gives none.
    pub locator: String,
    /// Bank Locator, e.g. "P0 CHANNEL A"; empty if the firmware gives none.
    pub bank_locator: String,
    /// The structure's handle, the only name left when both locators are empty or the type-17
    /// structure a mapping refers to is missing.
    pub handle: u16,
}

/// What the firmware says about interleaving of a device that alone maps an address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interleave {
    /// Interleave position 0: the range lives on this device alone.
    No,
    /// Position unknown or not given: the range may be a share of an interleaved set's.
    NotStated,
    /// A position in an interleaved set whose other members map no range holding the address.
    PartnersUnmapped,
}

/// Where SMBIOS places a physical address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placement {
    /// One device's range holds it.
    One { dimm: Slot, interleave: Interleave },
    /// Several devices' ranges hold it: the address is on one of them. `interleaved` when their
    /// interleave positions say so (or are unknown), false when all say "not interleaved".
    Several { dimms: Vec<Slot>, interleaved: bool },
}

/// The DIMM holding physical address `pa` on this machine, for a person ("DIMM P0-A1 (bank P0
/// CHANNEL A)", "one of DIMM_A1, DIMM_B1 (interleaved)"); `None` when the SMBIOS table is
/// unreadable (not root, no SMBIOS) or does not map the address. The table is read once.
pub fn dimm_at_physical(pa: u64) -> Option<String> {
    static TABLE: OnceLock<Option<Vec<u8>>> = OnceLock::new();
    let table = TABLE
        .get_or_init(|| std::fs::read(DMI_TABLE).ok())
        .as_deref()?;
    dimms_at(table, pa).map(|p| p.to_string())
}

/// Where a raw SMBIOS table (the layout of `/sys/firmware/dmi/tables/DMI`) places `pa`.
///
/// Device ranges (type 20) of empty slots are ignored. With no device range holding `pa`, a
/// memory array range (type 19) that holds it names its device when the array has exactly one
/// populated device; otherwise `None`. A malformed structure ends the walk as in
/// [`super::parse_smbios`]; what was read before it still counts.
pub fn dimms_at(table: &[u8], pa: u64) -> Option<Placement> {
    let mut devices: HashMap<u16, Device> = HashMap::new();
    let mut device_ranges = Vec::new();
    let mut array_ranges = Vec::new();
    for s in Structures::new(table) {
        match s.kind {
            TYPE_MEMORY_DEVICE => {
                devices.insert(
                    s.handle,
                    Device {
                        slot: Slot {
                            locator: s.string(0x10),
                            bank_locator: s.string(0x11),
                            handle: s.handle,
                        },
                        populated: memory_device(&s).is_some(),
                        array: s.word(0x04),
                    },
                );
            }
            TYPE_DEVICE_MAPPED => device_ranges.extend(mapped(&s, 0x13)),
            TYPE_ARRAY_MAPPED => array_ranges.extend(mapped(&s, 0x0F)),
            _ => {}
        }
    }
    // The type-17 structures may come after the ranges, so the filter waits for all of them. A
    // range naming a missing structure is kept: the address is still on that device.
    let mut holding: Vec<&Range> = Vec::new();
    for r in device_ranges.iter().filter(|r| r.holds(pa)) {
        let empty = devices.get(&r.owner).is_some_and(|d| !d.populated);
        if !empty && !holding.iter().any(|h| h.owner == r.owner) {
            holding.push(r);
        }
    }
    let slot = |handle: u16| {
        devices.get(&handle).map_or_else(
            || Slot {
                locator: String::new(),
                bank_locator: String::new(),
                handle,
            },
            |d| d.slot.clone(),
        )
    };
    match holding.as_slice() {
        [] => {
            let arrays: Vec<u16> = array_ranges
                .iter()
                .filter(|r| r.holds(pa))
                .map(|r| r.owner)
                .collect();
            let mut on = devices
                .values()
                .filter(|d| d.populated && d.array.is_some_and(|a| arrays.contains(&a)));
            match (on.next(), on.next()) {
                (Some(only), None) => Some(Placement::One {
                    dimm: only.slot.clone(),
                    interleave: Interleave::No,
                }),
                _ => None,
            }
        }
        [one] => Some(Placement::One {
            dimm: slot(one.owner),
            interleave: match one.position {
                Some(NOT_INTERLEAVED) => Interleave::No,
                None | Some(UNKNOWN) => Interleave::NotStated,
                Some(_) => Interleave::PartnersUnmapped,
            },
        }),
        several => {
            let mut several = several.to_vec();
            // Members in interleave order where the firmware numbers them; the rest keep table
            // order (the sort is stable).
            several.sort_by_key(|r| {
                r.position
                    .filter(|p| *p != NOT_INTERLEAVED && *p != UNKNOWN)
                    .unwrap_or(UNKNOWN)
            });
            Some(Placement::Several {
                interleaved: several.iter().any(|r| r.position != Some(NOT_INTERLEAVED)),
                dimms: several.iter().map(|r| slot(r.owner)).collect(),
            })
        }
    }
}

/// A type-17 structure: its names, whether a module is fitted, and its array's handle.
struct Device {
    slot: Slot,
    populated: bool,
    array: Option<u16>,
}

/// An address range (inclusive) mapped to a device (type 20) or an array (type 19).
struct Range {
    start: u64,
    end: u64,
    /// The type-17 handle of a device range, the type-16 handle of an array range.
    owner: u16,
    /// Interleave position (device ranges only).
    position: Option<u8>,
}

impl Range {
    fn holds(&self, pa: u64) -> bool {
        (self.start..=self.end).contains(&pa)
    }
}

/// A type 19 or 20 structure's range. Both hold start 0x04 and end 0x08 (KiB) and the owner's
/// handle at 0x0C; their extended start and end (bytes) follow at `extended` (0x0F in type 19,
/// 0x13 in type 20), and type 20 alone has the interleave position (0x11).
fn mapped(s: &Structure<'_>, extended: usize) -> Option<Range> {
    let (start, end) = range(s, extended)?;
    Some(Range {
        start,
        end,
        owner: s.word(0x0C)?,
        position: (s.kind == TYPE_DEVICE_MAPPED)
            .then(|| s.byte(0x11))
            .flatten(),
    })
}

/// The inclusive byte range of a type 19 or 20 structure whose extended fields start at
/// `extended`; `None` when it is cut short, backwards or too small to be a DIMM's.
fn range(s: &Structure<'_>, extended: usize) -> Option<(u64, u64)> {
    let start = s.dword(0x04)?;
    let (a, b) = if start == USE_EXTENDED {
        (s.qword(extended)?, s.qword(extended + 8)?)
    } else {
        // The 32-bit fields count KiB, and the ending one names the range's last KiB.
        (
            u64::from(start) << 10,
            (u64::from(s.dword(0x08)?) << 10) | 0x3FF,
        )
    };
    (b >= a && b - a >= MIN_RANGE - 1).then_some((a, b))
}

impl fmt::Display for Placement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Placement::One { dimm, interleave } => {
                let mut notes = Vec::new();
                if !dimm.bank_locator.is_empty() {
                    notes.push(format!("bank {}", dimm.bank_locator));
                }
                match interleave {
                    Interleave::No => {}
                    Interleave::NotStated => {
                        notes.push("SMBIOS does not say whether it is interleaved".into());
                    }
                    Interleave::PartnersUnmapped => {
                        notes.push("interleaved with DIMMs SMBIOS does not map here".into());
                    }
                }
                let name = if dimm.locator.is_empty() {
                    format!("memory device {:#06x}", dimm.handle)
                } else if dimm.locator.to_ascii_uppercase().starts_with("DIMM") {
                    dimm.locator.clone()
                } else {
                    format!("DIMM {}", dimm.locator)
                };
                if notes.is_empty() {
                    write!(f, "{name}")
                } else {
                    write!(f, "{name} ({})", notes.join("; "))
                }
            }
            Placement::Several { dimms, interleaved } => {
                // Locators alone where they tell the devices apart ("DIMM_A1"); else with the
                // bank ("P0 CHANNEL A/DIMM 0"), as boards that repeat "DIMM 0" per channel need.
                let unique = dimms.iter().all(|d| {
                    !d.locator.is_empty()
                        && dimms.iter().filter(|e| e.locator == d.locator).count() == 1
                });
                let names: Vec<String> = dimms
                    .iter()
                    .map(|d| {
                        let parts: Vec<&str> = [d.bank_locator.as_str(), d.locator.as_str()]
                            .into_iter()
                            .filter(|p| !p.is_empty())
                            .collect();
                        if unique {
                            d.locator.clone()
                        } else if parts.is_empty() {
                            format!("memory device {:#06x}", d.handle)
                        } else {
                            parts.join("/")
                        }
                    })
                    .collect();
                let why = if *interleaved {
                    "interleaved"
                } else {
                    "SMBIOS maps the address to each"
                };
                write!(f, "one of {} ({why})", names.join(", "))
            }
        }
    }
}

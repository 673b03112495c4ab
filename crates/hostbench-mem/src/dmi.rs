//! DRAM DIMMs from the SMBIOS table (type 17), for the theoretical memory bandwidth.
//!
//! The memory peak (DESIGN §3) is transfer rate × data width × populated channels, and only the
//! firmware's SMBIOS table says which DIMMs are fitted, how fast they were configured and how wide
//! they are. We read the raw table the kernel exports at `/sys/firmware/dmi/tables/DMI` rather than
//! run `dmidecode`: it needs root either way, and parsing the bytes ourselves keeps hostbench free
//! of external tools. That file is firmware-written and sometimes malformed, so the parser checks
//! every bound and stops at the first structure that does not fit; it never panics.
//!
//! SMBIOS has no "channel" field. Which DIMMs share a channel (and so share its bandwidth) has to
//! be read from the locator strings vendors print on the board ("DIMM_A1", "P0 CHANNEL A",
//! "ChannelA-DIMM0", …). When that fails for any DIMM we assume one DIMM per channel and say so in
//! the basis, because a silent guess would make the efficiency figure look authoritative.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs;
use std::path::Path;

use serde::{Deserialize, Serialize};

mod map;
pub use map::{dimm_at_physical, dimms_at, Placement, Slot};

/// Where the kernel exports the raw SMBIOS structure table (readable by root only).
pub const DMI_TABLE: &str = "/sys/firmware/dmi/tables/DMI";

const UNKNOWN: &str = "unknown";
const KIB: u64 = 1024;
const MIB: u64 = 1024 * KIB;

/// Structure types we look at.
const TYPE_MEMORY_ARRAY: u8 = 16;
const TYPE_MEMORY_DEVICE: u8 = 17;
const TYPE_END_OF_TABLE: u8 = 127;

/// Physical Memory Array "Use" values (SMBIOS 7.17.2) whose devices are main memory: other,
/// unknown, system memory. Video, flash, non-volatile and cache arrays are not DRAM bandwidth.
const SYSTEM_MEMORY_USES: [u8; 3] = [0x01, 0x02, 0x03];

/// Strings firmware puts in an empty slot's manufacturer or part number when it still reports a
/// non-zero size (seen on some Supermicro and AMI boards).
const EMPTY_SLOT_MARKERS: [&str; 4] = ["NO MODULE INSTALLED", "NO DIMM", "NOT INSTALLED", "EMPTY"];

/// One populated memory device (SMBIOS type 17).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dimm {
    /// Capacity; 0 when the firmware says the size is unknown (0xFFFF).
    pub size_bytes: u64,
    /// Configured Memory Speed in MT/s: what the DIMM runs at now.
    pub configured_mts: Option<u32>,
    /// Speed in MT/s: the most the DIMM is rated for.
    pub max_mts: Option<u32>,
    /// Data width in bits, without ECC bits (64 for a DDR4 or DDR5 DIMM, 16 or 32 for LPDDR).
    pub data_width_bits: Option<u16>,
    /// "DDR4", "DDR5", "LPDDR5", …, "other" or "unknown".
    pub memory_type: String,
    /// Device Locator, e.g. "DIMM_A1"; empty if the firmware gives none.
    pub locator: String,
    /// Bank Locator, e.g. "P0 CHANNEL A"; empty if the firmware gives none.
    pub bank_locator: String,
}

/// Theoretical DRAM bandwidth and how it was obtained.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DramPeak {
    pub bytes_per_s: f64,
    /// Human-readable derivation, including every assumption made.
    pub basis: String,
    pub channels: u32,
    /// DRAM DIMMs counted (non-DRAM devices such as persistent memory or HBM are left out).
    pub dimms: u32,
}

/// The populated DIMMs of the live machine; `None` if the table is unreadable (not root, no
/// SMBIOS) or lists no populated DIMM.
pub fn read_dimms() -> Option<Vec<Dimm>> {
    read_dimms_from(Path::new(DMI_TABLE))
}

/// [`read_dimms`] from another file holding a raw SMBIOS table (a saved copy, a fixture).
pub fn read_dimms_from(path: &Path) -> Option<Vec<Dimm>> {
    let table = fs::read(path).ok()?;
    let dimms = parse_smbios(&table);
    (!dimms.is_empty()).then_some(dimms)
}

/// The populated memory devices in a raw SMBIOS structure table (the layout of
/// `/sys/firmware/dmi/tables/DMI`: structures back to back, no entry point).
///
/// Empty slots (size 0, or an "empty" marker string) are skipped, and so are devices of a memory
/// array whose use is not system memory (the BIOS flash, video memory), because none of them carry
/// DRAM traffic. Parsing stops at the end-of-table structure or at the first structure that does
/// not fit in `table`; what was read before it is still returned.
pub fn parse_smbios(table: &[u8]) -> Vec<Dimm> {
    let mut array_use: HashMap<u16, u8> = HashMap::new();
    let mut devices: Vec<(Option<u16>, Dimm)> = Vec::new();
    for s in Structures::new(table) {
        match s.kind {
            TYPE_MEMORY_ARRAY => {
                if let Some(usage) = s.byte(0x05) {
                    array_use.insert(s.handle, usage);
                }
            }
            TYPE_MEMORY_DEVICE => {
                if let Some(dimm) = memory_device(&s) {
                    devices.push((s.word(0x04), dimm));
                }
            }
            _ => {}
        }
    }
    // Arrays may follow their devices in the table, so filter only once all are known. A handle
    // that names no array (0xFFFE, or a missing structure) keeps the device: better counted than
    // lost.
    devices
        .into_iter()
        .filter(|(array, _)| {
            array
                .and_then(|h| array_use.get(&h))
                .is_none_or(|usage| SYSTEM_MEMORY_USES.contains(usage))
        })
        .map(|(_, dimm)| dimm)
        .collect()
}

/// The theoretical DRAM bandwidth of these DIMMs: slowest speed × data width × channels.
///
/// Only DRAM counts (persistent memory, HBM and ROM devices are left out, and the basis says so).
/// The configured speed is used, else the rated speed; when DIMMs differ the slowest wins because
/// the controller runs a channel, and in practice all of them, at the slowest DIMM's speed. DIMMs
/// on one channel share it, so channels are inferred from the locators; where that fails for any
/// DIMM, one DIMM per channel is assumed. Every such assumption goes into the basis. `None` when no
/// DIMM has a known speed.
pub fn dram_peak(dimms: &[Dimm]) -> Option<DramPeak> {
    let dram: Vec<&Dimm> = dimms
        .iter()
        .filter(|d| counts_as_dram(&d.memory_type))
        .collect();
    let mut speeds = Vec::new();
    let mut rated = 0usize;
    for d in &dram {
        if let Some(s) = d.configured_mts {
            speeds.push(s);
        } else if let Some(s) = d.max_mts {
            speeds.push(s);
            rated += 1;
        }
    }
    let slowest = speeds.iter().copied().min()?;
    let fastest = speeds.iter().copied().max().unwrap_or(slowest);

    let (groups, channel_note) = channels(&dram);
    let mut widths = Vec::with_capacity(groups.len());
    let mut width_assumed = false;
    for group in &groups {
        // DIMMs on one channel share its bus, so the channel is as wide as its widest DIMM.
        let known = group.iter().filter_map(|d| width_bytes(d)).max();
        widths.push(known.unwrap_or_else(|| {
            width_assumed = true;
            8
        }));
    }
    let total_width: u64 = widths.iter().sum();
    let n_channels = groups.len();

    let mut basis = if widths.iter().all(|w| Some(w) == widths.first()) {
        let w = widths.first().copied().unwrap_or(8);
        format!(
            "{} x {slowest} MT/s x {w} B",
            plural(n_channels, "channel", "channels")
        )
    } else {
        format!(
            "{} x {slowest} MT/s, {total_width} B total bus width",
            plural(n_channels, "channel", "channels")
        )
    };
    let types: BTreeSet<&str> = dram.iter().map(|d| d.memory_type.as_str()).collect();
    let types: Vec<&str> = types.into_iter().collect();
    basis.push_str(&format!(
        " (SMBIOS: {} {} {}",
        dram.len(),
        types.join("/"),
        if dram.len() == 1 { "DIMM" } else { "DIMMs" }
    ));

    let mut notes = Vec::new();
    match channel_note {
        None => {
            let per: BTreeSet<usize> = groups.iter().map(Vec::len).collect();
            let lo = per.first().copied().unwrap_or(0);
            let hi = per.last().copied().unwrap_or(0);
            if lo == hi {
                basis.push_str(&format!(", {lo} per channel"));
            } else {
                basis.push_str(&format!(", {lo}-{hi} per channel"));
            }
        }
        Some(note) => notes.push(note),
    }
    if fastest != slowest {
        notes.push(format!(
            "speeds differ ({slowest}-{fastest} MT/s), memory runs at the slowest"
        ));
    }
    if rated > 0 {
        notes.push(if rated == speeds.len() {
            "configured speed not reported, rated speed used".to_string()
        } else {
            format!(
                "configured speed not reported for {}, rated speed used for them",
                plural(rated, "DIMM", "DIMMs")
            )
        });
    }
    let unknown_speed = dram.len() - speeds.len();
    if unknown_speed > 0 {
        notes.push(format!(
            "speed unknown for {}",
            plural(unknown_speed, "DIMM", "DIMMs")
        ));
    }
    if width_assumed {
        notes.push("data width not reported, assumed 8 B".to_string());
    }
    let skipped = dimms.len() - dram.len();
    if skipped > 0 {
        let kinds: BTreeSet<&str> = dimms
            .iter()
            .filter(|d| !counts_as_dram(&d.memory_type))
            .map(|d| d.memory_type.as_str())
            .collect();
        notes.push(format!(
            "{} not counted ({})",
            plural(skipped, "non-DRAM device", "non-DRAM devices"),
            kinds.into_iter().collect::<Vec<_>>().join(", ")
        ));
    }
    for note in notes {
        basis.push_str("; ");
        basis.push_str(&note);
    }
    basis.push(')');

    Some(DramPeak {
        bytes_per_s: f64::from(slowest) * 1e6 * total_width as f64,
        basis,
        channels: saturating_u32(n_channels),
        dimms: saturating_u32(dram.len()),
    })
}

// ---------------------------------------------------------------------------------------------
// Table walking

/// One SMBIOS structure: the formatted area (header included) and its string set.
struct Structure<'a> {
    kind: u8,
    handle: u16,
    formatted: &'a [u8],
    /// The string set without its final double NUL: strings separated by single NULs.
    strings: &'a [u8],
}

impl Structure<'_> {
    /// A field is read only if the structure's declared length covers it: older SMBIOS versions
    /// have shorter structures, and the bytes after them are strings, not fields.
    fn byte(&self, offset: usize) -> Option<u8> {
        self.formatted.get(offset).copied()
    }

    fn word(&self, offset: usize) -> Option<u16> {
        let bytes = self.formatted.get(offset..offset + 2)?;
        Some(u16::from_le_bytes(bytes.try_into().ok()?))
    }

    fn dword(&self, offset: usize) -> Option<u32> {
        let bytes = self.formatted.get(offset..offset + 4)?;
        Some(u32::from_le_bytes(bytes.try_into().ok()?))
    }

    fn qword(&self, offset: usize) -> Option<u64> {
        let bytes = self.formatted.get(offset..offset + 8)?;
        Some(u64::from_le_bytes(bytes.try_into().ok()?))
    }

    /// The string a field at `offset` refers to (1-based; 0 means none); empty if absent.
    fn string(&self, offset: usize) -> String {
        let index = usize::from(self.byte(offset).unwrap_or(0));
        if index == 0 || self.strings.is_empty() {
            return String::new();
        }
        self.strings
            .split(|b| *b == 0)
            .nth(index - 1)
            .map(|s| String::from_utf8_lossy(s).trim().to_string())
            .unwrap_or_default()
    }
}

/// Iterator over the structures of a table; ends at type 127 or at the first malformed structure.
struct Structures<'a> {
    table: &'a [u8],
    pos: usize,
    done: bool,
}

impl<'a> Structures<'a> {
    fn new(table: &'a [u8]) -> Self {
        Self {
            table,
            pos: 0,
            done: false,
        }
    }

    fn next_structure(&mut self) -> Option<Structure<'a>> {
        let rest = self.table.get(self.pos..)?;
        let header = rest.get(..4)?;
        let (kind, len) = (header[0], usize::from(header[1]));
        // A length below the header size would make us read the header as strings; the table is
        // corrupt from here on.
        if len < 4 {
            return None;
        }
        let formatted = rest.get(..len)?;
        let tail = rest.get(len..)?;
        // The string set ends with a double NUL, even when it is empty.
        let end = tail.windows(2).position(|w| w == [0, 0])?;
        self.pos = self.pos.checked_add(len + end + 2)?;
        if kind == TYPE_END_OF_TABLE {
            return None;
        }
        Some(Structure {
            kind,
            handle: u16::from_le_bytes([header[2], header[3]]),
            formatted,
            strings: tail.get(..end)?,
        })
    }
}

impl<'a> Iterator for Structures<'a> {
    type Item = Structure<'a>;

    fn next(&mut self) -> Option<Structure<'a>> {
        if self.done {
            return None;
        }
        let s = self.next_structure();
        self.done = s.is_none();
        s
    }
}

/// A type-17 structure as a [`Dimm`], or `None` for an empty slot.
fn memory_device(s: &Structure<'_>) -> Option<Dimm> {
    // Without the size field (SMBIOS < 2.1 length) we cannot tell a filled slot from an empty one.
    let size_bytes = match s.word(0x0C)? {
        0 => return None,
        0xFFFF => 0,
        // 32 GiB and more: the real size is the Extended Size, in MiB (bit 31 reserved).
        0x7FFF => match s.dword(0x1C) {
            Some(ext) => u64::from(ext & 0x7FFF_FFFF) * MIB,
            None => 0x7FFF * MIB,
        },
        v if v & 0x8000 != 0 => u64::from(v & 0x7FFF) * KIB,
        v => u64::from(v) * MIB,
    };
    let manufacturer = s.string(0x17);
    let part_number = s.string(0x1A);
    if [&manufacturer, &part_number].iter().any(|t| {
        let t = t.to_ascii_uppercase();
        EMPTY_SLOT_MARKERS.contains(&t.as_str())
    }) {
        return None;
    }
    Some(Dimm {
        size_bytes,
        // Before SMBIOS 3.1 these fields were documented in MHz, but firmware has always filled
        // them with the transfer rate (DDR4-3200 reads 3200), so they are taken as MT/s.
        configured_mts: speed(s, 0x20, 0x58),
        max_mts: speed(s, 0x15, 0x54),
        data_width_bits: s.word(0x0A).filter(|w| *w != 0 && *w != 0xFFFF),
        memory_type: s.byte(0x12).map_or(UNKNOWN, memory_type_name).to_string(),
        locator: s.string(0x10),
        bank_locator: s.string(0x11),
    })
}

/// A speed field: 0 is unknown, 0xFFFF defers to the 32-bit extended field (bit 31 reserved).
fn speed(s: &Structure<'_>, offset: usize, extended: usize) -> Option<u32> {
    match s.word(offset)? {
        0 => None,
        0xFFFF => s
            .dword(extended)
            .map(|v| v & 0x7FFF_FFFF)
            .filter(|v| *v != 0),
        v => Some(u32::from(v)),
    }
}

/// Memory Type names (SMBIOS 7.18.2), spelled as dmidecode prints them.
fn memory_type_name(code: u8) -> &'static str {
    match code {
        0x01 => "other",
        0x03 => "DRAM",
        0x04 => "EDRAM",
        0x05 => "VRAM",
        0x06 => "SRAM",
        0x07 => "RAM",
        0x08 => "ROM",
        0x09 => "Flash",
        0x0A => "EEPROM",
        0x0B => "FEPROM",
        0x0C => "EPROM",
        0x0D => "CDRAM",
        0x0E => "3DRAM",
        0x0F => "SDRAM",
        0x10 => "SGRAM",
        0x11 => "RDRAM",
        0x12 => "DDR",
        0x13 => "DDR2",
        0x14 => "DDR2 FB-DIMM",
        0x18 => "DDR3",
        0x19 => "FBD2",
        0x1A => "DDR4",
        0x1B => "LPDDR",
        0x1C => "LPDDR2",
        0x1D => "LPDDR3",
        0x1E => "LPDDR4",
        0x1F => "Logical non-volatile device",
        0x20 => "HBM",
        0x21 => "HBM2",
        0x22 => "DDR5",
        0x23 => "LPDDR5",
        0x24 => "HBM3",
        _ => UNKNOWN,
    }
}

/// Whether a device of this type carries main-memory DRAM traffic. Persistent memory shares the
/// DDR channels but is not DRAM, HBM has its own much wider bus, and ROMs are not memory at all;
/// counting any of them would skew the speed or the channel count.
fn counts_as_dram(memory_type: &str) -> bool {
    !matches!(
        memory_type,
        "ROM"
            | "Flash"
            | "EEPROM"
            | "FEPROM"
            | "EPROM"
            | "Logical non-volatile device"
            | "HBM"
            | "HBM2"
            | "HBM3"
    )
}

/// Data width in bytes if the firmware gave a sensible one (a whole number of bytes, at most 128
/// bits); anything else is treated as unknown rather than trusted.
fn width_bytes(d: &Dimm) -> Option<u64> {
    d.data_width_bits
        .filter(|w| *w % 8 == 0 && (8..=128).contains(w))
        .map(|w| u64::from(w / 8))
}

// ---------------------------------------------------------------------------------------------
// Channel inference

/// The DIMMs grouped by channel, and `None` when the grouping was inferred from the locators, or
/// the reason it was not (then each DIMM is its own channel).
fn channels<'a>(dram: &[&'a Dimm]) -> (Vec<Vec<&'a Dimm>>, Option<String>) {
    let one_each = || dram.iter().map(|d| vec![*d]).collect::<Vec<_>>();
    let keys: Option<Vec<String>> = dram.iter().map(|d| channel_key(d)).collect();
    let Some(keys) = keys else {
        return (
            one_each(),
            Some("channel not inferable from locators, assumed one DIMM per channel".to_string()),
        );
    };
    let mut groups: BTreeMap<String, Vec<&'a Dimm>> = BTreeMap::new();
    for (key, d) in keys.into_iter().zip(dram.iter().copied()) {
        groups.entry(key).or_default().push(d);
    }
    // Locator schemes are conventions, not rules: Dell's "A1".."A12" names the socket, not the
    // channel. More DIMMs on one channel than the memory type allows means the guess is wrong.
    let limit = if dram
        .iter()
        .all(|d| d.memory_type.contains("DDR5") || d.memory_type.starts_with("LPDDR"))
    {
        2
    } else {
        3
    };
    let most = groups.values().map(Vec::len).max().unwrap_or(0);
    if most > limit {
        return (
            one_each(),
            Some(format!(
                "locators suggest {most} DIMMs on one channel, more than possible, so assumed \
                 one DIMM per channel"
            )),
        );
    }
    (groups.into_values().collect(), None)
}

/// Tokens of a locator that name a socket, die or memory controller rather than a channel or slot.
/// Longer prefixes first, so "PROC1" is not read as "P" + "ROC1".
const QUALIFIERS: [&str; 9] = [
    "PROCESSOR",
    "CONTROLLER",
    "SOCKET",
    "PROC",
    "NODE",
    "CPU",
    "IMC",
    "MC",
    "P",
];

/// A channel identity for the DIMM such as "P1/A" (socket 1, channel A), from its device and bank
/// locators, or `None` if they do not name a channel.
///
/// The socket / controller / node qualifiers are part of the key, so channel A of CPU1 and channel A
/// of CPU2 are distinct channels. Evidence is tried strongest first: an explicit "CHANNEL x" or
/// "CHx", then "DIMM" followed by a channel letter and slot digit ("DIMM_A1", "DIMMB2"), then a
/// bare letter-and-slot locator ("A1").
fn channel_key(d: &Dimm) -> Option<String> {
    let loc = split_locator(&d.locator);
    let bank = split_locator(&d.bank_locator);
    let channel = explicit_channel(&loc.1)
        .or_else(|| explicit_channel(&bank.1))
        .or_else(|| dimm_letter(&loc.1))
        .or_else(|| dimm_letter(&bank.1))
        .or_else(|| bare_letter(&loc.1))
        .or_else(|| bare_letter(&bank.1))?;
    let mut qualifiers = loc.0;
    qualifiers.extend(bank.0);
    Some(format!("{}/{channel}", qualifiers.join("-")))
}

/// Upper-cased alphanumeric tokens of a locator, split into qualifiers ("CPU1", "P0", "NODE0") and
/// the rest.
fn split_locator(s: &str) -> (Vec<String>, Vec<String>) {
    let tokens: Vec<String> = s
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|t| !t.is_empty())
        .map(str::to_ascii_uppercase)
        .collect();
    let (mut qualifiers, mut rest) = (Vec::new(), Vec::new());
    let mut i = 0;
    while let Some(token) = tokens.get(i) {
        let mut matched = None;
        for q in QUALIFIERS {
            if let Some(tail) = token.strip_prefix(q) {
                if is_number(tail) {
                    matched = Some((format!("{q}{tail}"), 1));
                } else if tail.is_empty() {
                    // "PROC 1", "NODE 0": the number is the next token.
                    if let Some(n) = tokens.get(i + 1).filter(|n| is_number(n)) {
                        matched = Some((format!("{q}{n}"), 2));
                    }
                }
                if matched.is_some() {
                    break;
                }
            }
        }
        match matched {
            Some((q, used)) => {
                qualifiers.push(q);
                i += used;
            }
            None => {
                rest.push(token.clone());
                i += 1;
            }
        }
    }
    (qualifiers, rest)
}

/// "CHANNEL A", "CHANNELB", "Channel0", "CH 1", "CHA".
fn explicit_channel(tokens: &[String]) -> Option<String> {
    tokens.iter().enumerate().find_map(|(i, t)| {
        let tail = t.strip_prefix("CHANNEL").or_else(|| t.strip_prefix("CH"))?;
        let id = if tail.is_empty() {
            tokens.get(i + 1)?.as_str()
        } else {
            tail
        };
        let is_letter = id.len() == 1 && id.bytes().all(|b| b.is_ascii_uppercase());
        (is_letter || is_number(id)).then(|| id.to_string())
    })
}

/// "DIMM_A1", "DIMMB2", "DIMM A": the letter after "DIMM" is the channel.
fn dimm_letter(tokens: &[String]) -> Option<String> {
    tokens.iter().enumerate().find_map(|(i, t)| {
        let tail = t.strip_prefix("DIMM")?;
        let id = if tail.is_empty() {
            tokens.get(i + 1)?.as_str()
        } else {
            tail
        };
        letter_slot(id, false)
    })
}

/// A locator that is nothing but letter and slot ("A1", "CPU1 B2").
fn bare_letter(tokens: &[String]) -> Option<String> {
    match tokens {
        [only] => letter_slot(only, true),
        _ => None,
    }
}

/// The channel letter of "A", "A1", "B02". The slot number must be small: channel-letter schemes
/// number the slots within a channel (at most three), while a larger number means the letter names
/// something wider, such as Dell's "A7" (socket A, slot 7).
fn letter_slot(id: &str, need_slot: bool) -> Option<String> {
    let mut chars = id.chars();
    let letter = chars.next().filter(char::is_ascii_uppercase)?;
    let slot = chars.as_str();
    if slot.is_empty() {
        return (!need_slot).then(|| letter.to_string());
    }
    if slot.len() > 2 || !is_number(slot) {
        return None;
    }
    let n: u32 = slot.parse().ok()?;
    (n <= 3).then(|| letter.to_string())
}

fn is_number(s: &str) -> bool {
    !s.is_empty() && s.len() <= 3 && s.bytes().all(|b| b.is_ascii_digit())
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

fn saturating_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests;

//! Unit tests of `dmi/map.rs` (physical address → DIMM) on hand-built SMBIOS tables: one DIMM,
//! an interleaved pair, per-DIMM ranges with the interleave unstated, addresses above 4 TiB, no
//! type 20 at all, and malformed tables, which must never panic.

use super::{end, structure, type16, type17, Dev};
use crate::dmi::map::{dimms_at, Interleave, Placement, Slot};

const GIB: u64 = 1 << 30;

/// Type 20 with 32-bit KiB addresses; `position` is the interleave position (0 = not
/// interleaved, 0xFF = unknown).
fn type20(handle: u16, device: u16, start: u64, end: u64, position: u8) -> Vec<u8> {
    let mut f = vec![0u8; 0x23 - 4];
    let kib = |b: u64| u32::try_from(b >> 10).expect("below 4 TiB").to_le_bytes();
    f[0x00..0x04].copy_from_slice(&kib(start));
    f[0x04..0x08].copy_from_slice(&kib(end));
    f[0x08..0x0A].copy_from_slice(&device.to_le_bytes());
    f[0x0A..0x0C].copy_from_slice(&0x1300u16.to_le_bytes());
    f[0x0C] = 0xFF; // partition row: unknown
    f[0x0D] = position;
    f[0x0E] = if position == 0 { 0 } else { 1 };
    structure(20, handle, &f, &[])
}

/// Type 20 above 4 TiB: the 32-bit start is all ones and the byte addresses are extended.
fn type20_extended(handle: u16, device: u16, start: u64, end: u64) -> Vec<u8> {
    let mut f = vec![0u8; 0x23 - 4];
    f[0x00..0x04].copy_from_slice(&u32::MAX.to_le_bytes());
    f[0x04..0x08].copy_from_slice(&u32::MAX.to_le_bytes());
    f[0x08..0x0A].copy_from_slice(&device.to_le_bytes());
    f[0x0F..0x17].copy_from_slice(&start.to_le_bytes());
    f[0x17..0x1F].copy_from_slice(&end.to_le_bytes());
    structure(20, handle, &f, &[])
}

/// Type 19 for array 0x1000 with 32-bit KiB addresses.
fn type19(handle: u16, start: u64, end: u64) -> Vec<u8> {
    let mut f = vec![0u8; 0x1F - 4];
    let kib = |b: u64| u32::try_from(b >> 10).expect("below 4 TiB").to_le_bytes();
    f[0x00..0x04].copy_from_slice(&kib(start));
    f[0x04..0x08].copy_from_slice(&kib(end));
    f[0x08..0x0A].copy_from_slice(&0x1000u16.to_le_bytes());
    f[0x0A] = 2; // partition width
    structure(19, handle, &f, &[])
}

/// Array 0x1000 and devices 0x1100.. for `slots` (locator, bank), then `maps`, then the end.
fn table(slots: &[(&str, &str)], maps: &[Vec<u8>]) -> Vec<u8> {
    let mut t = type16(0x1000, 0x03);
    for (i, &(locator, bank)) in slots.iter().enumerate() {
        let dev = Dev {
            locator,
            bank,
            ..Dev::default()
        };
        t.extend(type17(0x1100 + u16::try_from(i).expect("few"), &dev));
    }
    for m in maps {
        t.extend_from_slice(m);
    }
    t.extend(end());
    t
}

fn named(t: &[u8], pa: u64) -> Option<String> {
    dimms_at(t, pa).map(|p| p.to_string())
}

#[test]
fn one_dimm_is_named_by_locator_and_bank_within_its_range_only() {
    let t = table(
        &[("P0-A1", "P0 CHANNEL A"), ("P0-B1", "P0 CHANNEL B")],
        &[
            type19(0x1300, 0, 32 * GIB - 1),
            type20(0x1400, 0x1100, 0, 16 * GIB - 1, 0),
            type20(0x1401, 0x1101, 16 * GIB, 32 * GIB - 1, 0),
        ],
    );
    let a = Some("DIMM P0-A1 (bank P0 CHANNEL A)".to_string());
    let b = Some("DIMM P0-B1 (bank P0 CHANNEL B)".to_string());
    assert_eq!(named(&t, 0x1234_5678), a);
    assert_eq!(named(&t, 16 * GIB - 1), a, "the range's last byte");
    assert_eq!(named(&t, 16 * GIB), b, "the next range's first byte");
    assert_eq!(named(&t, 32 * GIB), None, "beyond every range");
    assert_eq!(
        dimms_at(&t, 0),
        Some(Placement::One {
            dimm: Slot {
                locator: "P0-A1".into(),
                bank_locator: "P0 CHANNEL A".into(),
                handle: 0x1100,
            },
            interleave: Interleave::No,
        })
    );
}

#[test]
fn interleaved_dimms_are_named_as_a_set_in_interleave_order() {
    // The table lists B before A, but A is position 1.
    let t = table(
        &[("DIMM_B1", "P0 CHANNEL B"), ("DIMM_A1", "P0 CHANNEL A")],
        &[
            type20(0x1400, 0x1100, 0, 32 * GIB - 1, 2),
            type20(0x1401, 0x1101, 0, 32 * GIB - 1, 1),
        ],
    );
    assert_eq!(
        named(&t, 5 * GIB).as_deref(),
        Some("one of DIMM_A1, DIMM_B1 (interleaved)")
    );
    // Boards that call every channel's slot "DIMM 0" are told apart by the bank.
    let t = table(
        &[("DIMM 0", "P0 CHANNEL A"), ("DIMM 0", "P0 CHANNEL B")],
        &[
            type20(0x1400, 0x1100, 0, 32 * GIB - 1, 1),
            type20(0x1401, 0x1101, 0, 32 * GIB - 1, 2),
        ],
    );
    assert_eq!(
        named(&t, GIB).as_deref(),
        Some("one of P0 CHANNEL A/DIMM 0, P0 CHANNEL B/DIMM 0 (interleaved)")
    );
    // Overlapping ranges that each say "not interleaved" (mirroring): still a set, said plainly.
    let t = table(
        &[("A1", ""), ("B1", "")],
        &[
            type20(0x1400, 0x1100, 0, 8 * GIB - 1, 0),
            type20(0x1401, 0x1101, 0, 8 * GIB - 1, 0),
        ],
    );
    assert_eq!(
        named(&t, GIB).as_deref(),
        Some("one of A1, B1 (SMBIOS maps the address to each)")
    );
}

#[test]
fn a_lone_range_says_what_smbios_leaves_open_about_interleaving() {
    let t = table(
        &[("DIMM_A1", "NODE 0"), ("DIMM_B1", "")],
        &[
            type20(0x1400, 0x1100, 0, 16 * GIB - 1, 0xFF),
            type20(0x1401, 0x1101, 16 * GIB, 32 * GIB - 1, 2),
        ],
    );
    assert_eq!(
        named(&t, GIB).as_deref(),
        Some("DIMM_A1 (bank NODE 0; SMBIOS does not say whether it is interleaved)")
    );
    assert_eq!(
        named(&t, 17 * GIB).as_deref(),
        Some("DIMM_B1 (interleaved with DIMMs SMBIOS does not map here)")
    );
}

#[test]
fn addresses_above_4_tib_use_the_extended_fields() {
    let tib = 1u64 << 40;
    let t = table(
        &[("DIMM_A1", ""), ("DIMM_B1", "")],
        &[
            type20(0x1400, 0x1100, 0, 16 * GIB - 1, 0),
            type20_extended(0x1401, 0x1101, 5 * tib, 6 * tib - 1),
        ],
    );
    assert_eq!(named(&t, 5 * tib + 0x40).as_deref(), Some("DIMM_B1"));
    assert_eq!(named(&t, 6 * tib), None);
    assert_eq!(named(&t, 4 * tib), None);
}

#[test]
fn without_type_20_only_an_array_with_one_dimm_is_named() {
    let four = [("A1", ""), ("B1", ""), ("C1", ""), ("D1", "")];
    assert_eq!(named(&table(&four, &[]), GIB), None, "no map at all");
    assert_eq!(
        named(&table(&four, &[type19(0x1300, 0, 64 * GIB - 1)]), GIB),
        None,
        "an array of four DIMMs: any of them"
    );
    let one = table(&[("DIMM 0", "")], &[type19(0x1300, 0, 16 * GIB - 1)]);
    assert_eq!(named(&one, GIB).as_deref(), Some("DIMM 0"));
    assert_eq!(named(&one, 16 * GIB), None, "outside the array's range");
}

#[test]
fn empty_slots_placeholders_and_missing_devices() {
    let empty = Dev {
        size: 0,
        locator: "DIMM_B1",
        ..Dev::default()
    };
    let mut t = type16(0x1000, 0x03);
    t.extend(type17(0x1100, &Dev::default()));
    t.extend(type17(0x1101, &empty));
    // An empty slot's range over the same addresses, a start = end = 0 placeholder, and a range
    // naming a device the table does not hold.
    t.extend(type20(0x1400, 0x1100, 0, 16 * GIB - 1, 0));
    t.extend(type20(0x1401, 0x1101, 0, 16 * GIB - 1, 0));
    t.extend(type20(0x1402, 0x1235, 0, 0, 0));
    t.extend(type20(0x1403, 0x1234, 16 * GIB, 32 * GIB - 1, 0));
    t.extend(end());
    assert_eq!(named(&t, 0x100).as_deref(), Some("DIMM 0"));
    assert_eq!(named(&t, GIB).as_deref(), Some("DIMM 0"));
    assert_eq!(named(&t, 20 * GIB).as_deref(), Some("memory device 0x1234"));
}

#[test]
fn malformed_and_truncated_tables_never_panic() {
    let good = table(
        &[("DIMM_A1", "P0"), ("DIMM_B1", "P0")],
        &[
            type19(0x1300, 0, 32 * GIB - 1),
            type20(0x1400, 0x1100, 0, 32 * GIB - 1, 1),
            type20(0x1401, 0x1101, 0, 32 * GIB - 1, 2),
            type20_extended(0x1402, 0x1100, 1 << 42, (1 << 43) - 1),
        ],
    );
    assert!(named(&good, GIB).is_some());
    for cut in 0..good.len() {
        let _ = dimms_at(&good[..cut], GIB);
    }
    for i in 0..good.len() {
        for v in [0x00, 0x03, 0xFF] {
            let mut bad = good.clone();
            bad[i] = v;
            for pa in [0, GIB, u64::MAX] {
                let _ = dimms_at(&bad, pa);
            }
        }
    }
    // A type 20 cut before its device handle is not a range; the table's end is still found.
    let mut short = table(&[("DIMM_A1", "")], &[]);
    let cut = structure(20, 0x1400, &[0, 0, 0, 0, 0xFF, 0xFF, 0x3F, 0], &[]);
    short.splice(0..0, cut);
    assert_eq!(named(&short, GIB), None);
    // The extended marker in a structure too short for the extended fields.
    let mut f = vec![0u8; 0x13 - 4];
    f[0..4].copy_from_slice(&u32::MAX.to_le_bytes());
    f[8..10].copy_from_slice(&0x1100u16.to_le_bytes());
    let t = table(&[("DIMM_A1", "")], &[structure(20, 0x1400, &f, &[])]);
    assert_eq!(named(&t, GIB), None);
    // Backwards ranges hold nothing.
    let t = table(
        &[("DIMM_A1", ""), ("DIMM_B1", "")],
        &[type20(0x1400, 0x1100, 16 * GIB, GIB, 0)],
    );
    assert_eq!(named(&t, 2 * GIB), None);
}

/// The live entry point answers as the parser does on the table it reads, or `None` where that
/// table is unreadable (not root, no SMBIOS, a container).
#[test]
fn the_live_lookup_agrees_with_the_parser() {
    for pa in [0x1000_0000u64, 1 << 32, 1 << 36] {
        let expected = std::fs::read(crate::dmi::DMI_TABLE)
            .ok()
            .and_then(|t| named(&t, pa));
        assert_eq!(crate::dmi::dimm_at_physical(pa), expected);
    }
}

//! Unit tests of `dmi.rs`, kept in their own file so the module itself stays short
//! (issue 53: no source file over 1,000 lines).

use super::*;

/// A type-17 device to encode; `len` is the formatted length (0x5C is SMBIOS 3.3's full one).
#[derive(Clone)]
struct Dev<'a> {
    len: usize,
    array: u16,
    data_width: u16,
    size: u16,
    ext_size: u32,
    mem_type: u8,
    speed: u16,
    ext_speed: u32,
    configured: u16,
    ext_configured: u32,
    locator: &'a str,
    bank: &'a str,
    manufacturer: &'a str,
}

impl Default for Dev<'_> {
    fn default() -> Self {
        Self {
            len: 0x5C,
            array: 0x1000,
            data_width: 64,
            size: 16384,
            ext_size: 0,
            mem_type: 0x22,
            speed: 4800,
            ext_speed: 0,
            configured: 4800,
            ext_configured: 0,
            locator: "DIMM 0",
            bank: "",
            manufacturer: "Samsung",
        }
    }
}

/// Encode one structure: header, `body` (the formatted area after the header), string set.
fn structure(kind: u8, handle: u16, body: &[u8], strings: &[&str]) -> Vec<u8> {
    let mut out = vec![kind, u8::try_from(body.len() + 4).expect("length fits")];
    out.extend_from_slice(&handle.to_le_bytes());
    out.extend_from_slice(body);
    if strings.is_empty() {
        out.extend_from_slice(&[0, 0]);
    } else {
        for s in strings {
            out.extend_from_slice(s.as_bytes());
            out.push(0);
        }
        out.push(0);
    }
    out
}

fn type17<'a>(handle: u16, d: &Dev<'a>) -> Vec<u8> {
    let mut f = [0u8; 0x5C];
    let mut strings = Vec::new();
    let mut add = |s: &'a str| {
        if s.is_empty() {
            0
        } else {
            strings.push(s);
            u8::try_from(strings.len()).expect("few strings")
        }
    };
    f[0x04..0x06].copy_from_slice(&d.array.to_le_bytes());
    f[0x06..0x08].copy_from_slice(&0xFFFEu16.to_le_bytes());
    f[0x08..0x0A].copy_from_slice(&d.data_width.saturating_add(8).to_le_bytes());
    f[0x0A..0x0C].copy_from_slice(&d.data_width.to_le_bytes());
    f[0x0C..0x0E].copy_from_slice(&d.size.to_le_bytes());
    f[0x0E] = 0x09; // DIMM
    f[0x10] = add(d.locator);
    f[0x11] = add(d.bank);
    f[0x12] = d.mem_type;
    f[0x15..0x17].copy_from_slice(&d.speed.to_le_bytes());
    f[0x17] = add(d.manufacturer);
    f[0x1A] = add("M321R4GA3BB6-CQKET");
    f[0x1C..0x20].copy_from_slice(&d.ext_size.to_le_bytes());
    f[0x20..0x22].copy_from_slice(&d.configured.to_le_bytes());
    f[0x54..0x58].copy_from_slice(&d.ext_speed.to_le_bytes());
    f[0x58..0x5C].copy_from_slice(&d.ext_configured.to_le_bytes());
    // Fields beyond `len` are cut off; strings nothing refers to any more are harmless.
    structure(17, handle, &f[4..d.len], &strings)
}

/// Type 16 (Physical Memory Array) with the given use.
fn type16(handle: u16, usage: u8) -> Vec<u8> {
    let mut f = vec![0u8; 0x17 - 4];
    f[0] = 0x03; // location: system board
    f[1] = usage;
    structure(16, handle, &f, &[])
}

fn end() -> Vec<u8> {
    structure(127, 0xFEFF, &[], &[])
}

/// A table: a BIOS structure (type 0, with strings), a system-memory array, the devices, end.
fn table(devs: &[Dev<'_>]) -> Vec<u8> {
    let mut t = structure(0, 0, &[1, 2, 0, 0xE8, 0, 0, 0, 0], &["AMI", "1.0"]);
    t.extend(type16(0x1000, 0x03));
    for (i, d) in devs.iter().enumerate() {
        t.extend(type17(0x1100 + u16::try_from(i).expect("few devices"), d));
    }
    t.extend(end());
    t
}

fn dimms_at(locators: &[(&str, &str)]) -> Vec<Dimm> {
    let devs: Vec<Dev<'_>> = locators
        .iter()
        .map(|(locator, bank)| Dev {
            locator,
            bank,
            ..Dev::default()
        })
        .collect();
    parse_smbios(&table(&devs))
}

#[test]
fn sizes_in_mib_kib_and_extended() {
    let devs = [
        Dev {
            size: 16384,
            ..Dev::default()
        },
        Dev {
            size: 0x8000 | 512,
            ..Dev::default()
        },
        Dev {
            size: 0x7FFF,
            ext_size: 65536,
            ..Dev::default()
        },
        // Extended size with the reserved top bit set: the bit is ignored.
        Dev {
            size: 0x7FFF,
            ext_size: 0x8000_0000 | 131072,
            ..Dev::default()
        },
        // SMBIOS 2.6 length: no extended size field, so 0x7FFF is taken literally.
        Dev {
            size: 0x7FFF,
            ext_size: 65536,
            len: 0x1C,
            ..Dev::default()
        },
        Dev {
            size: 0xFFFF,
            ..Dev::default()
        },
    ];
    let sizes: Vec<u64> = parse_smbios(&table(&devs))
        .iter()
        .map(|d| d.size_bytes)
        .collect();
    assert_eq!(
        sizes,
        vec![16 << 30, 512 << 10, 64 << 30, 128 << 30, 0x7FFF << 20, 0]
    );
}

#[test]
fn speeds_plain_extended_and_missing() {
    let devs = [
        Dev {
            speed: 3200,
            configured: 2933,
            ..Dev::default()
        },
        Dev {
            speed: 0xFFFF,
            ext_speed: 70000,
            configured: 0xFFFF,
            ext_configured: 68000,
            ..Dev::default()
        },
        Dev {
            speed: 0,
            configured: 0,
            ..Dev::default()
        },
        // 0xFFFF but the structure predates the extended fields: unknown.
        Dev {
            speed: 0xFFFF,
            configured: 0xFFFF,
            len: 0x28,
            ..Dev::default()
        },
        // SMBIOS 2.3 length: speed present, configured speed not.
        Dev {
            speed: 1600,
            len: 0x1B,
            ..Dev::default()
        },
        // Shorter still: no speed field at all.
        Dev {
            len: 0x15,
            ..Dev::default()
        },
    ];
    let got: Vec<(Option<u32>, Option<u32>)> = parse_smbios(&table(&devs))
        .iter()
        .map(|d| (d.max_mts, d.configured_mts))
        .collect();
    assert_eq!(
        got,
        vec![
            (Some(3200), Some(2933)),
            (Some(70000), Some(68000)),
            (None, None),
            (None, None),
            (Some(1600), None),
            (None, None),
        ]
    );
}

#[test]
fn fields_and_strings() {
    let d = &parse_smbios(&table(&[Dev {
        locator: "DIMM_A1",
        bank: "BANK 0",
        data_width: 64,
        ..Dev::default()
    }]))[0];
    assert_eq!(d.locator, "DIMM_A1");
    assert_eq!(d.bank_locator, "BANK 0");
    assert_eq!(d.data_width_bits, Some(64));
    assert_eq!(d.memory_type, "DDR5");

    // No strings at all, unknown data width.
    let d = &parse_smbios(&table(&[Dev {
        locator: "",
        bank: "",
        manufacturer: "",
        data_width: 0xFFFF,
        ..Dev::default()
    }]))[0];
    assert_eq!((d.locator.as_str(), d.bank_locator.as_str()), ("", ""));
    assert_eq!(d.data_width_bits, None);

    // A string index past the end of the string set reads as empty.
    let mut f = vec![0u8; 0x22 - 4];
    f[0x0C - 4..0x0E - 4].copy_from_slice(&1024u16.to_le_bytes());
    f[0x10 - 4] = 1;
    f[0x11 - 4] = 7;
    let mut t = structure(17, 1, &f, &["Slot 1"]);
    t.extend(end());
    let d = &parse_smbios(&t)[0];
    assert_eq!(
        (d.locator.as_str(), d.bank_locator.as_str()),
        ("Slot 1", "")
    );
}

#[test]
fn empty_slots_and_foreign_arrays_are_skipped() {
    let devs = [
        Dev {
            size: 0,
            locator: "DIMM_A2",
            ..Dev::default()
        },
        Dev {
            manufacturer: "NO DIMM",
            locator: "DIMM_B2",
            ..Dev::default()
        },
        Dev {
            manufacturer: "No Module Installed",
            locator: "DIMM_C2",
            ..Dev::default()
        },
        Dev {
            locator: "DIMM_A1",
            ..Dev::default()
        },
        // In a flash array (type 16 below): the BIOS ROM, not DRAM.
        Dev {
            array: 0x2000,
            mem_type: 0x09,
            locator: "SPI flash",
            ..Dev::default()
        },
        // Array handle that names nothing: kept.
        Dev {
            array: 0xFFFE,
            locator: "DIMM_B1",
            ..Dev::default()
        },
    ];
    let mut t = table(&devs);
    // Put the flash array after its device, and anything after the end marker must be ignored.
    let end_at = t.len() - end().len();
    t.truncate(end_at);
    t.extend(type16(0x2000, 0x05));
    t.extend(end());
    t.extend(type17(0x3000, &Dev::default()));
    let locators: Vec<String> = parse_smbios(&t).into_iter().map(|d| d.locator).collect();
    assert_eq!(locators, vec!["DIMM_A1", "DIMM_B1"]);
}

#[test]
fn memory_type_names() {
    let codes = [
        (0x18, "DDR3"),
        (0x1A, "DDR4"),
        (0x1D, "LPDDR3"),
        (0x1E, "LPDDR4"),
        (0x22, "DDR5"),
        (0x23, "LPDDR5"),
        (0x1F, "Logical non-volatile device"),
        (0x01, "other"),
        (0x02, "unknown"),
        (0x16, "unknown"),
        (0xF0, "unknown"),
    ];
    let devs: Vec<Dev<'_>> = codes
        .iter()
        .map(|(c, _)| Dev {
            mem_type: *c,
            ..Dev::default()
        })
        .collect();
    let names: Vec<String> = parse_smbios(&table(&devs))
        .into_iter()
        .map(|d| d.memory_type)
        .collect();
    let want: Vec<&str> = codes.iter().map(|(_, n)| *n).collect();
    assert_eq!(names, want);
}

#[test]
fn brief_example_sixteen_ddr5_on_eight_channels() {
    let mut locs = Vec::new();
    for socket in ["P1", "P2"] {
        for ch in ["A", "B", "C", "D"] {
            for slot in ["1", "2"] {
                locs.push(format!("{socket}-DIMM{ch}{slot}"));
            }
        }
    }
    let locs: Vec<(&str, &str)> = locs.iter().map(|s| (s.as_str(), "")).collect();
    let peak = dram_peak(&dimms_at(&locs)).expect("peak");
    assert_eq!(peak.channels, 8);
    assert_eq!(peak.dimms, 16);
    assert_eq!(peak.bytes_per_s, 8.0 * 4800e6 * 8.0);
    assert_eq!(
        peak.basis,
        "8 channels x 4800 MT/s x 8 B (SMBIOS: 16 DDR5 DIMMs, 2 per channel)"
    );
}

/// Channel count inferred for a set of (device locator, bank locator) pairs.
fn channels_for(locators: &[(&str, &str)]) -> (u32, String) {
    let peak = dram_peak(&dimms_at(locators)).expect("peak");
    (peak.channels, peak.basis)
}

#[test]
fn channel_inference_from_locator_styles() {
    let cases: &[(&[(&str, &str)], u32)] = &[
        // Desktop board: DIMM_<channel><slot>.
        (
            &[
                ("DIMM_A1", "BANK 0"),
                ("DIMM_A2", "BANK 1"),
                ("DIMM_B1", "BANK 2"),
                ("DIMM_B2", "BANK 3"),
            ],
            2,
        ),
        // AMD: the channel lives in the bank locator, slots are "DIMM 0/1".
        (
            &[
                ("DIMM 0", "P0 CHANNEL A"),
                ("DIMM 1", "P0 CHANNEL A"),
                ("DIMM 0", "P0 CHANNEL B"),
                ("DIMM 1", "P0 CHANNEL B"),
                ("DIMM 0", "P0 CHANNEL C"),
                ("DIMM 0", "P0 CHANNEL D"),
            ],
            4,
        ),
        // Same channel letters on two sockets are different channels.
        (
            &[
                ("DIMM 0", "P0 CHANNEL A"),
                ("DIMM 0", "P1 CHANNEL A"),
                ("DIMM 1", "P0 CHANNEL A"),
                ("DIMM 1", "P1 CHANNEL A"),
            ],
            2,
        ),
        (
            &[
                ("CHANNEL A DIMM 0", ""),
                ("CHANNEL A DIMM 1", ""),
                ("CHANNEL B DIMM 0", ""),
                ("CHANNEL B DIMM 1", ""),
            ],
            2,
        ),
        // Laptops and Intel desktops; the controller number is part of the channel.
        (
            &[("ChannelA-DIMM0", "BANK 0"), ("ChannelB-DIMM0", "BANK 2")],
            2,
        ),
        (
            &[
                ("Controller0-ChannelA-DIMM0", "BANK 0"),
                ("Controller0-ChannelA-DIMM1", "BANK 0"),
                ("Controller1-ChannelA-DIMM0", "BANK 0"),
                ("Controller1-ChannelA-DIMM1", "BANK 0"),
            ],
            2,
        ),
        // Intel server: CPU prefix plus DIMM letter.
        (
            &[
                ("CPU1_DIMM_A1", "NODE 1"),
                ("CPU1_DIMM_A2", "NODE 1"),
                ("CPU2_DIMM_A1", "NODE 2"),
                ("CPU2_DIMM_A2", "NODE 2"),
                ("CPU2_DIMM_B1", "NODE 2"),
            ],
            3,
        ),
        // Bare letter + slot.
        (&[("A1", ""), ("A2", ""), ("B1", ""), ("B2", "")], 2),
        // Explicit channel numbers in the bank beat the locator's letter.
        (
            &[
                ("DIMM_A1", "P0_Node0_Channel0_Dimm0"),
                ("DIMM_A2", "P0_Node0_Channel0_Dimm1"),
                ("DIMM_B1", "P0_Node0_Channel1_Dimm0"),
                ("DIMM_C1", "P0_Node1_Channel0_Dimm0"),
            ],
            3,
        ),
    ];
    for (locs, want) in cases {
        let (channels, basis) = channels_for(locs);
        assert_eq!(channels, *want, "{locs:?}: {basis}");
        assert!(!basis.contains("assumed"), "{locs:?}: {basis}");
    }
}

#[test]
fn two_per_channel_halves_the_peak_of_one_per_channel() {
    let paired = dram_peak(&dimms_at(&[
        ("DIMM_A1", ""),
        ("DIMM_A2", ""),
        ("DIMM_B1", ""),
        ("DIMM_B2", ""),
    ]))
    .expect("peak");
    let spread = dram_peak(&dimms_at(&[
        ("DIMM_A1", ""),
        ("DIMM_B1", ""),
        ("DIMM_C1", ""),
        ("DIMM_D1", ""),
    ]))
    .expect("peak");
    assert_eq!((paired.channels, spread.channels), (2, 4));
    assert_eq!(paired.bytes_per_s * 2.0, spread.bytes_per_s);
    assert!(spread.basis.ends_with("1 per channel)"), "{}", spread.basis);
}

#[test]
fn unknown_locators_assume_one_dimm_per_channel() {
    for locs in [
        &[("DIMM 0", ""), ("DIMM 1", ""), ("DIMM 2", "")][..],
        &[("PROC 1 DIMM 1", ""), ("PROC 1 DIMM 4", ""), ("", "")][..],
        // One DIMM with a channel, one without: all fall back.
        &[("DIMM_A1", ""), ("Slot 7", ""), ("DIMM_B1", "")][..],
        // Dell numbers slots per socket: A7 is not "channel A, slot 7".
        &[("A1", ""), ("A2", ""), ("A7", "")][..],
    ] {
        let (channels, basis) = channels_for(locs);
        assert_eq!(channels, 3, "{locs:?}");
        assert!(
            basis.contains("not inferable from locators, assumed one DIMM per channel"),
            "{basis}"
        );
    }
}

#[test]
fn implausibly_full_channel_falls_back() {
    // Three DDR5 DIMMs cannot share a channel.
    let (channels, basis) = channels_for(&[("A1", ""), ("A2", ""), ("A3", "")]);
    assert_eq!(channels, 3);
    assert!(
        basis.contains("3 DIMMs on one channel") && basis.contains("assumed one DIMM"),
        "{basis}"
    );
    // Three DDR4 DIMMs can (3 DIMMs per channel boards exist).
    let devs: Vec<Dev<'_>> = ["A1", "A2", "A3"]
        .into_iter()
        .map(|locator| Dev {
            locator,
            mem_type: 0x1A,
            ..Dev::default()
        })
        .collect();
    let peak = dram_peak(&parse_smbios(&table(&devs))).expect("peak");
    assert_eq!(peak.channels, 1, "{}", peak.basis);
}

#[test]
fn mixed_speeds_use_the_slowest() {
    let devs = [
        Dev {
            locator: "DIMM_A1",
            configured: 3200,
            mem_type: 0x1A,
            ..Dev::default()
        },
        Dev {
            locator: "DIMM_B1",
            configured: 2933,
            mem_type: 0x1A,
            ..Dev::default()
        },
    ];
    let peak = dram_peak(&parse_smbios(&table(&devs))).expect("peak");
    assert_eq!(peak.bytes_per_s, 2.0 * 2933e6 * 8.0);
    assert_eq!(
        peak.basis,
        "2 channels x 2933 MT/s x 8 B (SMBIOS: 2 DDR4 DIMMs, 1 per channel; speeds differ \
             (2933-3200 MT/s), memory runs at the slowest)"
    );
}

#[test]
fn rated_speed_and_unknown_width_are_stated() {
    let devs = [Dev {
        locator: "DIMM_A1",
        configured: 0,
        speed: 3200,
        data_width: 0xFFFF,
        mem_type: 0x1A,
        ..Dev::default()
    }];
    let peak = dram_peak(&parse_smbios(&table(&devs))).expect("peak");
    assert_eq!(peak.bytes_per_s, 3200e6 * 8.0);
    assert_eq!(
        peak.basis,
        "1 channel x 3200 MT/s x 8 B (SMBIOS: 1 DDR4 DIMM, 1 per channel; configured speed \
             not reported, rated speed used; data width not reported, assumed 8 B)"
    );
}

#[test]
fn lpddr_narrow_channels_are_honoured() {
    let devs: Vec<Dev<'_>> = [
        "Controller0-ChannelA",
        "Controller0-ChannelB",
        "Controller0-ChannelC",
        "Controller0-ChannelD",
        "Controller1-ChannelA",
        "Controller1-ChannelB",
        "Controller1-ChannelC",
        "Controller1-ChannelD",
    ]
    .into_iter()
    .map(|locator| Dev {
        locator,
        mem_type: 0x23,
        data_width: 16,
        configured: 6400,
        speed: 6400,
        ..Dev::default()
    })
    .collect();
    let peak = dram_peak(&parse_smbios(&table(&devs))).expect("peak");
    assert_eq!(peak.channels, 8);
    assert_eq!(peak.bytes_per_s, 8.0 * 6400e6 * 2.0);
    assert!(
        peak.basis
            .starts_with("8 channels x 6400 MT/s x 2 B (SMBIOS: 8 LPDDR5 DIMMs"),
        "{}",
        peak.basis
    );
}

#[test]
fn non_dram_devices_and_unknown_speeds() {
    let devs = [
        Dev {
            locator: "DIMM_A1",
            ..Dev::default()
        },
        Dev {
            locator: "DIMM_A2",
            mem_type: 0x1F,
            configured: 2400,
            ..Dev::default()
        },
        Dev {
            locator: "DIMM_B1",
            configured: 0,
            speed: 0,
            ..Dev::default()
        },
    ];
    let peak = dram_peak(&parse_smbios(&table(&devs))).expect("peak");
    assert_eq!((peak.channels, peak.dimms), (2, 2));
    assert_eq!(peak.bytes_per_s, 2.0 * 4800e6 * 8.0, "{}", peak.basis);
    assert!(
        peak.basis.contains("speed unknown for 1 DIMM"),
        "{}",
        peak.basis
    );
    assert!(
        peak.basis
            .contains("1 non-DRAM device not counted (Logical non-volatile device)"),
        "{}",
        peak.basis
    );
}

#[test]
fn no_known_speed_is_no_peak() {
    assert_eq!(dram_peak(&[]), None);
    let devs = [Dev {
        configured: 0,
        speed: 0,
        ..Dev::default()
    }];
    assert_eq!(dram_peak(&parse_smbios(&table(&devs))), None);
}

#[test]
fn read_from_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("DMI");
    assert_eq!(read_dimms_from(&path), None);
    std::fs::write(&path, table(&[Dev::default()])).expect("write");
    assert_eq!(read_dimms_from(&path).map(|d| d.len()), Some(1));
    std::fs::write(&path, table(&[])).expect("write");
    assert_eq!(read_dimms_from(&path), None);
}

/// Deterministic noise from the shared generator.
struct Rng(hostbench_core::rng::SplitMix64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0.next_u64()
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

#[test]
fn garbage_and_truncated_tables_never_panic() {
    let devs: Vec<Dev<'_>> = [("DIMM_A1", 0x22u8), ("DIMM_B1", 0x1A), ("A2", 0x23)]
        .into_iter()
        .map(|(locator, mem_type)| Dev {
            locator,
            mem_type,
            speed: 0xFFFF,
            ext_speed: 8000,
            ..Dev::default()
        })
        .collect();
    let valid = table(&devs);
    assert_eq!(parse_smbios(&valid).len(), 3);

    // Every truncation parses the whole structures before the cut and nothing else.
    let mut previous = 0;
    for cut in 0..=valid.len() {
        let dimms = parse_smbios(&valid[..cut]);
        assert!(dimms.len() >= previous && dimms.len() <= 3, "cut at {cut}");
        previous = dimms.len();
        let _ = dram_peak(&dimms);
    }
    assert_eq!(previous, 3);

    let mut rng = Rng(hostbench_core::rng::SplitMix64::new(0x9E37_79B9_7F4A_7C15));
    // Pure noise, with and without a plausible type-17 header in front.
    for i in 0..3000 {
        let n = (rng.next() % 400) as usize;
        let mut t = rng.bytes(n);
        if i % 2 == 0 && t.len() > 2 {
            t[0] = 17;
            t[1] = (rng.next() % 0x60) as u8;
        }
        let _ = dram_peak(&parse_smbios(&t));
    }
    // A valid table with a few bytes corrupted, which reaches far deeper into the parser.
    for _ in 0..3000 {
        let mut t = valid.clone();
        for _ in 0..(1 + rng.next() % 4) {
            let at = (rng.next() as usize) % t.len();
            t[at] = rng.next() as u8;
        }
        let cut = (rng.next() as usize) % (t.len() + 1);
        let _ = dram_peak(&parse_smbios(&t[..cut]));
    }
    // Hand-made corner cases: zero length, length under the header, no string terminator.
    for t in [
        &[][..],
        &[17][..],
        &[17, 0, 0, 0, 0, 0][..],
        &[17, 3, 0, 0, 0, 0][..],
        &[17, 0xFF, 0, 0][..],
        &[17, 4, 0, 0, b'x'][..],
        &[127, 4, 0, 0][..],
    ] {
        assert!(parse_smbios(t).is_empty());
    }
}

mod map;

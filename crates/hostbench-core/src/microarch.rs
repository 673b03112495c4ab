//! Which microarchitecture a CPU is: from CPUID family and model, checked against the feature set.
//!
//! Peak tables are per core design, so the name matters. The family/model number is the usual key,
//! but a hypervisor may report any model it likes: a KVM guest on a Sapphire Rapids-class Xeon was
//! seen reporting family 6 model 0xa7 (Rocket Lake) while passing AMX and AVX512-FP16 through,
//! which no Rocket Lake has. So a model number is believed only while the features agree with it;
//! where a feature exists solely on other cores (or no model matches at all), the newest core the
//! feature set proves is named instead, and the basis says which evidence was used.

/// A recognised microarchitecture and the evidence for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identified {
    pub name: &'static str,
    pub basis: String,
}

/// Features that exist only on the listed cores (CPUID flags as Linux names them in
/// /proc/cpuinfo). A model number that names another core while such a feature is present is not
/// believed.
const EXCLUSIVE: &[(&str, &[&str])] = &[
    ("amx_fp16", &["Granite Rapids"]),
    (
        "amx_tile",
        &["Sapphire Rapids", "Emerald Rapids", "Granite Rapids"],
    ),
    (
        "avx512_fp16",
        &[
            "Sapphire Rapids",
            "Emerald Rapids",
            "Granite Rapids",
            "Alder Lake",
        ],
    ),
    (
        "avx512_bf16",
        &[
            "Cooper Lake",
            "Sapphire Rapids",
            "Emerald Rapids",
            "Granite Rapids",
            "Zen 4",
            "Zen 5",
        ],
    ),
    ("avx512_vp2intersect", &["Tiger Lake", "Zen 5"]),
];

/// The newest core a feature set proves, per vendor, first match wins: (required flags, name).
const INTEL_BY_FEATURES: &[(&[&str], &str)] = &[
    (&["amx_fp16", "amx_tile"], "Granite Rapids"),
    (&["amx_tile", "avx512_fp16"], "Sapphire Rapids"),
    (&["avx512_bf16", "avx512f"], "Cooper Lake"),
    (&["avx512_vp2intersect", "avx512f"], "Tiger Lake"),
    (&["avx512ifma", "avx512f"], "Ice Lake"),
    (&["avx512_vnni", "avx512f"], "Cascade Lake"),
    (&["avx512f"], "Skylake-SP"),
    (&["avx_vnni", "avx2"], "Alder Lake"),
];
const AMD_BY_FEATURES: &[(&[&str], &str)] = &[
    (&["avx512_vp2intersect", "avx512f"], "Zen 5"),
    (&["avx512f", "avx512_bf16"], "Zen 4"),
    (&["vaes", "avx2"], "Zen 3"),
    (&["clwb", "avx2"], "Zen 2"),
];

/// Identify an x86 core from CPUID vendor, family, model, stepping and its feature flags.
pub fn identify_x86(
    vendor: &str,
    family: Option<u32>,
    model: Option<u32>,
    stepping: Option<u32>,
    flags: &[&str],
) -> Option<Identified> {
    let by_model = family
        .zip(model)
        .and_then(|(f, m)| x86_microarch(vendor, f, m, stepping));
    let numbers = match (family, model) {
        (Some(f), Some(m)) => format!("CPUID family {f} model 0x{m:02x}"),
        _ => "no CPUID family/model".to_string(),
    };
    let has = |f: &str| flags.contains(&f);
    let contradicting: Vec<&str> = match by_model {
        Some(name) => EXCLUSIVE
            .iter()
            .filter(|(flag, cores)| has(flag) && !cores.contains(&name))
            .map(|(flag, _)| *flag)
            .collect(),
        None => Vec::new(),
    };
    if let Some(name) = by_model.filter(|_| contradicting.is_empty()) {
        return Some(Identified {
            name,
            basis: numbers,
        });
    }
    let table = match vendor {
        "GenuineIntel" => INTEL_BY_FEATURES,
        "AuthenticAMD" => AMD_BY_FEATURES,
        _ => return None,
    };
    let (proof, name) = table
        .iter()
        .find(|(needed, _)| needed.iter().all(|f| has(f)))?;
    let same_features = match *name {
        "Sapphire Rapids" => " (Emerald Rapids has the same core and features)",
        "Ice Lake" => {
            " (Ice Lake client or server, or Rocket Lake: the SKU decides the 512-bit FMA units)"
        }
        _ => "",
    };
    let basis = match by_model {
        Some(m) => format!(
            "{numbers} names {m}, which has no {}: identified from the CPUID features {} as {name}{same_features}",
            contradicting.join(", "),
            proof.join(", ")
        ),
        None => format!(
            "{numbers} is not in the table: identified from the CPUID features {} as {name} or a later core{same_features}",
            proof.join(", ")
        ),
    };
    Some(Identified { name, basis })
}

/// Microarchitecture of an x86 CPU from its CPUID vendor, family, model and stepping.
pub fn x86_microarch(
    vendor: &str,
    family: u32,
    model: u32,
    stepping: Option<u32>,
) -> Option<&'static str> {
    match vendor {
        "AuthenticAMD" => match (family, model) {
            // Pinnacle Ridge / Colfax and Picasso are the 12 nm refresh.
            (0x17, 0x08 | 0x18) => Some("Zen+"),
            (0x17, 0x00..=0x2f) => Some("Zen"),
            (0x17, _) => Some("Zen 2"),
            (0x19, 0x00..=0x0f | 0x20..=0x5f) => Some("Zen 3"),
            (0x19, 0x10..=0x1f | 0x60..=0xaf) => Some("Zen 4"),
            (0x1a, _) => Some("Zen 5"),
            _ => None,
        },
        "HygonGenuine" if family == 0x18 => Some("Zen"),
        "GenuineIntel" if family == 6 => match model {
            0x3c | 0x3f | 0x45 | 0x46 => Some("Haswell"),
            0x3d | 0x47 | 0x4f | 0x56 => Some("Broadwell"),
            0x4e | 0x5e => Some("Skylake"),
            // One model number, three generations told apart by stepping.
            0x55 => match stepping {
                Some(10..) => Some("Cooper Lake"),
                Some(5..=9) => Some("Cascade Lake"),
                _ => Some("Skylake-SP"),
            },
            0x6a | 0x6c => Some("Ice Lake-SP"),
            0x7d | 0x7e => Some("Ice Lake"),
            0x8c | 0x8d => Some("Tiger Lake"),
            0x8e | 0x9e => Some("Kaby Lake/Coffee Lake"),
            0xa5 | 0xa6 => Some("Comet Lake"),
            0xa7 => Some("Rocket Lake"),
            0x8f => Some("Sapphire Rapids"),
            0xcf => Some("Emerald Rapids"),
            0xad | 0xae => Some("Granite Rapids"),
            0xaf => Some("Sierra Forest"),
            0x97 | 0x9a => Some("Alder Lake"),
            0xb7 | 0xba | 0xbf => Some("Raptor Lake"),
            0xaa | 0xac => Some("Meteor Lake"),
            _ => None,
        },
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn microarch_table() {
        let amd = |f, m| x86_microarch("AuthenticAMD", f, m, None);
        assert_eq!(amd(0x17, 0x01), Some("Zen"));
        assert_eq!(amd(0x17, 0x08), Some("Zen+"));
        assert_eq!(amd(0x17, 0x31), Some("Zen 2"));
        assert_eq!(amd(0x19, 0x01), Some("Zen 3"));
        assert_eq!(amd(0x19, 0x21), Some("Zen 3"));
        assert_eq!(amd(0x19, 0x11), Some("Zen 4"));
        assert_eq!(amd(0x19, 0x61), Some("Zen 4"));
        assert_eq!(amd(0x19, 0xb0), None);
        assert_eq!(amd(0x1a, 0x02), Some("Zen 5"));
        assert_eq!(amd(0x15, 0x02), None);
        let intel = |m, s| x86_microarch("GenuineIntel", 6, m, s);
        assert_eq!(intel(0x55, Some(4)), Some("Skylake-SP"));
        assert_eq!(intel(0x55, Some(7)), Some("Cascade Lake"));
        assert_eq!(intel(0x55, None), Some("Skylake-SP"));
        assert_eq!(intel(0x8f, None), Some("Sapphire Rapids"));
        assert_eq!(intel(0xcf, None), Some("Emerald Rapids"));
        assert_eq!(intel(0x3f, None), Some("Haswell"));
        assert_eq!(intel(0xb7, None), Some("Raptor Lake"));
        assert_eq!(intel(0x01, None), None);
        assert_eq!(x86_microarch("GenuineIntel", 15, 0x55, None), None);
    }

    /// Flags of a KVM guest on a Sapphire Rapids-class host (abridged from /proc/cpuinfo).
    const SPR_FLAGS: &[&str] = &[
        "avx2",
        "fma",
        "avx512f",
        "avx512dq",
        "avx512ifma",
        "avx512cd",
        "avx512bw",
        "avx512vl",
        "avx512vbmi",
        "avx512_vbmi2",
        "avx512_vnni",
        "avx512_bitalg",
        "avx512_vpopcntdq",
        "avx_vnni",
        "avx512_bf16",
        "avx512_fp16",
        "amx_bf16",
        "amx_tile",
        "amx_int8",
    ];

    #[test]
    fn an_implausible_model_number_yields_to_the_features() {
        // The host seen in issue 13: family 6 model 167 (Rocket Lake) with AMX and AVX512-FP16.
        let id = identify_x86("GenuineIntel", Some(6), Some(0xa7), Some(1), SPR_FLAGS).unwrap();
        assert_eq!(id.name, "Sapphire Rapids");
        assert!(
            id.basis.contains("model 0xa7 names Rocket Lake"),
            "{}",
            id.basis
        );
        assert!(id.basis.contains("amx_tile"), "{}", id.basis);
        // A real Sapphire Rapids model number agrees with the same features.
        let id = identify_x86("GenuineIntel", Some(6), Some(0x8f), Some(8), SPR_FLAGS).unwrap();
        assert_eq!(id.name, "Sapphire Rapids");
        assert_eq!(id.basis, "CPUID family 6 model 0x8f");
        // Granite Rapids adds AMX-FP16; a generic model number yields to it too.
        let mut gnr = SPR_FLAGS.to_vec();
        gnr.push("amx_fp16");
        let id = identify_x86("GenuineIntel", Some(6), Some(0x8f), None, &gnr).unwrap();
        assert_eq!(id.name, "Granite Rapids");
    }

    #[test]
    fn consistent_model_numbers_are_believed() {
        let rkl = ["avx2", "fma", "avx512f", "avx512ifma", "avx512_vnni"];
        let id = identify_x86("GenuineIntel", Some(6), Some(0xa7), None, &rkl).unwrap();
        assert_eq!(id.name, "Rocket Lake");
        let zen3 = ["avx2", "fma", "vaes", "clwb"];
        let id = identify_x86("AuthenticAMD", Some(0x19), Some(0x01), None, &zen3).unwrap();
        assert_eq!(
            (id.name, id.basis.as_str()),
            ("Zen 3", "CPUID family 25 model 0x01")
        );
    }

    #[test]
    fn unknown_model_numbers_fall_back_to_features() {
        let id = identify_x86("GenuineIntel", Some(6), Some(0x01), None, SPR_FLAGS).unwrap();
        assert_eq!(id.name, "Sapphire Rapids");
        assert!(id.basis.contains("or a later core"), "{}", id.basis);
        let clx = ["avx2", "avx512f", "avx512_vnni"];
        assert_eq!(
            identify_x86("GenuineIntel", None, None, None, &clx).map(|i| i.name),
            Some("Cascade Lake")
        );
        let zen4 = ["avx2", "avx512f", "avx512_bf16", "vaes"];
        assert_eq!(
            identify_x86("AuthenticAMD", Some(0x19), Some(0xb0), None, &zen4).map(|i| i.name),
            Some("Zen 4")
        );
        assert_eq!(
            identify_x86("GenuineIntel", Some(6), Some(0x01), None, &["sse2"]),
            None
        );
        assert_eq!(
            identify_x86("CentaurHauls", Some(6), Some(0x0f), None, SPR_FLAGS),
            None
        );
    }
}

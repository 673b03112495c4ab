//! The expectation file: the `[expect]` section of a `--spec` TOML file, so one file per node
//! type carries both its datasheet facts and what a healthy node of that type shows (Azure's
//! azurehpc-health-checks keeps one threshold file per VM type the same way).
//!
//! ```toml
//! [expect]
//! peak_share = 0.85            # figures without a floor of their own: this share of their peak
//! tolerance = 0.25             # a baseline's figures may fall this far before they miss
//! cpu_model = "*EPYC 9654*"    # glob: * and ?
//! cpus = 192                   # logical CPUs online
//! memory_gib = 1536            # total, within memory_tolerance (default 0.03)
//! gpus = 8
//! gpu_model = "*H100*"
//! nic_min_gbps = 100           # every physical NIC's link at least this
//! require = ["health.edac", "health.gpu"]   # sources that must be readable
//!
//! [[expect.pcie]]              # every device of the class trained at least to this
//! class = "gpu"                # gpu, nvme, nic, any
//! gen = 5
//! width = 16
//!
//! [[expect.figure]]            # a figure's floor: min / max in its unit, or share_of_peak
//! benchmark = "cpu.flops"
//! params = { dtype = "f64" }   # matches every record whose params include these
//! min = 5.0e11
//!
//! [expect.limits]              # counter limits, by source and counter
//! "health.gpu.sram_aggregate_corrected" = { warn = 1000, fail = 10000 }
//! ```
//!
//! Every key is typed and unknown keys are rejected with their line, so a typo is an error and
//! not a check that silently never runs. Each value keeps its line: a verdict names the file and
//! line it was held against (`expect nd-h100.toml:14`).

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use toml::Spanned;

use crate::model::Params;

/// The `[expect]` section as parsed, values with their byte spans.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpectToml {
    pub peak_share: Option<Spanned<f64>>,
    pub tolerance: Option<Spanned<f64>>,
    pub cpu_model: Option<Spanned<String>>,
    pub cpus: Option<Spanned<u32>>,
    pub memory_gib: Option<Spanned<f64>>,
    pub memory_tolerance: Option<Spanned<f64>>,
    pub gpus: Option<Spanned<u32>>,
    pub gpu_model: Option<Spanned<String>>,
    pub nic_min_gbps: Option<Spanned<f64>>,
    #[serde(default)]
    pub require: Vec<Spanned<String>>,
    #[serde(default)]
    pub pcie: Vec<Spanned<PcieToml>>,
    #[serde(default)]
    pub figure: Vec<Spanned<FigureToml>>,
    #[serde(default)]
    pub limits: BTreeMap<String, Spanned<LimitToml>>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PcieToml {
    pub class: String,
    pub gen: Option<u32>,
    pub width: Option<u32>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FigureToml {
    pub benchmark: String,
    #[serde(default)]
    pub params: toml::Table,
    pub min: Option<f64>,
    pub max: Option<f64>,
    pub share_of_peak: Option<f64>,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitToml {
    pub warn: Option<f64>,
    pub fail: Option<f64>,
}

/// A value and where it was written (`expect FILE:LINE`).
#[derive(Debug, Clone, PartialEq)]
pub struct At<T> {
    pub value: T,
    pub source: String,
}

/// A figure's bound.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Bound {
    /// At least this, in the record's unit.
    Min(f64),
    /// At most this (latencies).
    Max(f64),
    /// At least this share of the record's peak.
    ShareOfPeak(f64),
}

#[derive(Debug, Clone, PartialEq)]
pub struct FigureExpect {
    pub benchmark: String,
    pub params: Params,
    pub bound: Bound,
}

#[derive(Debug, Clone, PartialEq)]
pub struct PcieExpect {
    pub class: String,
    pub gen: Option<u32>,
    pub width: Option<u32>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limit {
    pub warn: Option<f64>,
    pub fail: Option<f64>,
}

/// The expectation, validated, each value with its source.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Expectation {
    /// The file, as named on the command line.
    pub file: String,
    pub peak_share: Option<At<f64>>,
    pub tolerance: Option<At<f64>>,
    pub cpu_model: Option<At<String>>,
    pub cpus: Option<At<u32>>,
    pub memory_gib: Option<At<f64>>,
    pub memory_tolerance: f64,
    pub gpus: Option<At<u32>>,
    pub gpu_model: Option<At<String>>,
    pub nic_min_gbps: Option<At<f64>>,
    pub require: Vec<At<String>>,
    pub pcie: Vec<At<PcieExpect>>,
    pub figures: Vec<At<FigureExpect>>,
    /// `health.gpu.sram_aggregate_corrected` → its limits.
    pub limits: Vec<(String, At<Limit>)>,
}

/// The counter sources a file may require or limit.
pub const SOURCES: [&str; 7] = [
    "health.edac",
    "health.mce",
    "health.pcie",
    "health.nic",
    "health.nvme",
    "health.gpu",
    "health.xid",
];

const PCIE_CLASSES: [&str; 4] = ["gpu", "nvme", "nic", "any"];

/// The default share of `memory_gib` a node's memory may fall short by (the kernel and firmware
/// keep some of the DIMMs' capacity: 1–3 % on the nodes measured).
pub const MEMORY_TOLERANCE: f64 = 0.03;

/// Resolve a parsed `[expect]` section: spans to lines, values checked. `text` is the file's
/// text (for line numbers), `file` its name for the sources. The error is one line naming the
/// key and its line.
pub fn resolve(raw: &ExpectToml, text: &str, file: &Path) -> Result<Expectation, String> {
    let name = file.file_name().map_or_else(
        || file.display().to_string(),
        |n| n.to_string_lossy().to_string(),
    );
    let line = |start: usize| text[..start.min(text.len())].matches('\n').count() + 1;
    let src = |span: std::ops::Range<usize>| format!("expect {name}:{}", line(span.start));
    let bad = |span: std::ops::Range<usize>, key: &str, why: String| {
        format!("line {}: expect.{key}: {why}", line(span.start))
    };
    fn at<T: Clone>(s: &Spanned<T>, src: &dyn Fn(std::ops::Range<usize>) -> String) -> At<T> {
        At {
            value: s.get_ref().clone(),
            source: src(s.span()),
        }
    }
    let share =
        |s: &Option<Spanned<f64>>, key: &str, lo_open: bool| -> Result<Option<At<f64>>, String> {
            match s {
                None => Ok(None),
                Some(v) => {
                    let x = *v.get_ref();
                    let ok = x.is_finite() && x <= 1.0 && if lo_open { x > 0.0 } else { x >= 0.0 };
                    if ok {
                        Ok(Some(at(v, &src)))
                    } else {
                        Err(bad(
                            v.span(),
                            key,
                            format!(
                                "must be in {}0, 1], got {x}",
                                if lo_open { "(" } else { "[" }
                            ),
                        ))
                    }
                }
            }
        };
    let mut e = Expectation {
        file: file.display().to_string(),
        peak_share: share(&raw.peak_share, "peak_share", true)?,
        tolerance: share(&raw.tolerance, "tolerance", false)?,
        memory_tolerance: share(&raw.memory_tolerance, "memory_tolerance", false)?
            .map_or(MEMORY_TOLERANCE, |a| a.value),
        cpu_model: raw.cpu_model.as_ref().map(|s| at(s, &src)),
        gpu_model: raw.gpu_model.as_ref().map(|s| at(s, &src)),
        gpus: raw.gpus.as_ref().map(|s| at(s, &src)),
        ..Expectation::default()
    };
    if let Some(c) = &raw.cpus {
        if *c.get_ref() == 0 {
            return Err(bad(c.span(), "cpus", "must be at least 1".into()));
        }
        e.cpus = Some(at(c, &src));
    }
    for (key, v, slot) in [
        ("memory_gib", &raw.memory_gib, &mut e.memory_gib),
        ("nic_min_gbps", &raw.nic_min_gbps, &mut e.nic_min_gbps),
    ] {
        if let Some(v) = v {
            let x = *v.get_ref();
            if !(x.is_finite() && x > 0.0) {
                return Err(bad(
                    v.span(),
                    key,
                    format!("must be a positive number, got {x}"),
                ));
            }
            *slot = Some(at(v, &src));
        }
    }
    for r in &raw.require {
        if !SOURCES.contains(&r.get_ref().as_str()) {
            return Err(bad(
                r.span(),
                "require",
                format!(
                    "unknown source '{}' (known: {})",
                    r.get_ref(),
                    SOURCES.join(", ")
                ),
            ));
        }
        e.require.push(at(r, &src));
    }
    for p in &raw.pcie {
        let v = p.get_ref();
        if !PCIE_CLASSES.contains(&v.class.as_str()) {
            return Err(bad(
                p.span(),
                "pcie.class",
                format!(
                    "unknown class '{}' (known: {})",
                    v.class,
                    PCIE_CLASSES.join(", ")
                ),
            ));
        }
        if v.gen.is_none() && v.width.is_none() {
            return Err(bad(p.span(), "pcie", "needs gen, width or both".into()));
        }
        e.pcie.push(At {
            value: PcieExpect {
                class: v.class.clone(),
                gen: v.gen,
                width: v.width,
            },
            source: src(p.span()),
        });
    }
    for f in &raw.figure {
        let v = f.get_ref();
        if v.benchmark.trim().is_empty() {
            return Err(bad(f.span(), "figure.benchmark", "is empty".into()));
        }
        let bound = match (v.min, v.max, v.share_of_peak) {
            (Some(x), None, None) => Bound::Min(x),
            (None, Some(x), None) => Bound::Max(x),
            (None, None, Some(x)) => Bound::ShareOfPeak(x),
            _ => {
                return Err(bad(
                    f.span(),
                    "figure",
                    format!(
                        "{} needs exactly one of min, max and share_of_peak",
                        v.benchmark
                    ),
                ))
            }
        };
        let x = match bound {
            Bound::Min(x) | Bound::Max(x) | Bound::ShareOfPeak(x) => x,
        };
        if !(x.is_finite() && x > 0.0) || matches!(bound, Bound::ShareOfPeak(s) if s > 1.0) {
            return Err(bad(
                f.span(),
                "figure",
                format!("{}: bound {x} out of range", v.benchmark),
            ));
        }
        let params = serde_json::to_value(&v.params)
            .ok()
            .and_then(|p| p.as_object().cloned())
            .unwrap_or_default();
        e.figures.push(At {
            value: FigureExpect {
                benchmark: v.benchmark.clone(),
                params,
                bound,
            },
            source: src(f.span()),
        });
    }
    for (key, l) in &raw.limits {
        let source_ok = SOURCES.iter().any(|s| {
            key.strip_prefix(s)
                .and_then(|rest| rest.strip_prefix('.'))
                .is_some_and(|counter| !counter.is_empty())
        });
        if !source_ok {
            return Err(bad(
                l.span(),
                &format!("limits.\"{key}\""),
                "not SOURCE.COUNTER with a known source (health.gpu.sram_aggregate_corrected)"
                    .into(),
            ));
        }
        let v = *l.get_ref();
        if v.warn.is_none() && v.fail.is_none() {
            return Err(bad(
                l.span(),
                &format!("limits.\"{key}\""),
                "needs warn, fail or both".into(),
            ));
        }
        e.limits.push((
            key.clone(),
            At {
                value: Limit {
                    warn: v.warn,
                    fail: v.fail,
                },
                source: src(l.span()),
            },
        ));
    }
    Ok(e)
}

/// Whether `text` matches the glob `pattern` (`*` any run, `?` one character), ignoring case.
pub fn glob(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.to_lowercase().chars().collect();
    let t: Vec<char> = text.to_lowercase().chars().collect();
    // Iterative matching with one backtrack point for the last `*`.
    let (mut i, mut j, mut star, mut mark) = (0, 0, None, 0);
    while j < t.len() {
        if i < p.len() && (p[i] == '?' || p[i] == t[j]) {
            i += 1;
            j += 1;
        } else if i < p.len() && p[i] == '*' {
            star = Some(i);
            mark = j;
            i += 1;
        } else if let Some(s) = star {
            i = s + 1;
            mark += 1;
            j = mark;
        } else {
            return false;
        }
    }
    p[i..].iter().all(|&c| c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::Spec;

    const FILE: &str = r#"[cpu]
clock_hz = 3.0e9
[expect]
peak_share = 0.8
cpus = 64
memory_gib = 512
gpu_model = "*H100*"
require = ["health.edac"]

[[expect.pcie]]
class = "gpu"
gen = 5

[[expect.figure]]
benchmark = "cpu.flops"
params = { dtype = "f64", threads = 64 }
min = 5.0e11

[expect.limits]
"health.gpu.sram_aggregate_corrected" = { warn = 1000, fail = 10000 }
"#;

    fn load(text: &str) -> Result<Expectation, String> {
        let spec = Spec::parse(text)?;
        resolve(
            &spec.expect.unwrap_or_default(),
            text,
            Path::new("/etc/hb/nd.toml"),
        )
    }

    #[test]
    fn a_file_resolves_with_each_value_on_its_line() {
        let e = load(FILE).expect("valid");
        assert_eq!(
            e.cpus.as_ref().map(|c| (c.value, c.source.as_str())),
            Some((64, "expect nd.toml:5"))
        );
        assert_eq!(e.peak_share.as_ref().map(|s| s.value), Some(0.8));
        let f = &e.figures[0];
        assert_eq!(f.value.bound, Bound::Min(5.0e11));
        assert_eq!(f.value.params["threads"], 64);
        assert_eq!(f.source, "expect nd.toml:14");
        assert_eq!(e.pcie[0].value.gen, Some(5));
        assert_eq!(e.limits[0].0, "health.gpu.sram_aggregate_corrected");
        assert_eq!(e.limits[0].1.value.fail, Some(10000.0));
        assert_eq!(e.memory_tolerance, MEMORY_TOLERANCE);
    }

    #[test]
    fn a_bad_file_is_one_line_naming_the_key_and_its_line() {
        for (text, want) in [
            ("[expect]\ncpuz = 4\n", "line 2"),
            (
                "[expect]\ncpus = 0\n",
                "line 2: expect.cpus: must be at least 1",
            ),
            (
                "[expect]\npeak_share = 1.5\n",
                "line 2: expect.peak_share: must be in (0, 1]",
            ),
            (
                "[expect]\nrequire = [\"health.foo\"]\n",
                "unknown source 'health.foo'",
            ),
            (
                "[[expect.figure]]\nbenchmark = \"cpu.flops\"\nmin = 1\nmax = 2\n",
                "line 1: expect.figure: cpu.flops needs exactly one",
            ),
            (
                "[[expect.pcie]]\nclass = \"fpga\"\ngen = 4\n",
                "unknown class 'fpga'",
            ),
            (
                "[expect.limits]\n\"gpu.sram\" = { warn = 1 }\n",
                "not SOURCE.COUNTER",
            ),
            (
                "[expect.limits]\n\"health.gpu.x\" = { wran = 1 }\n",
                "line 2",
            ),
            ("[[expect.figure]]\nbenchmark = \"x\"\nminn = 1\n", "line"),
        ] {
            let e = load(text).expect_err(text);
            assert!(e.contains(want), "{text:?}: {e}");
            assert!(!e.contains('\n'), "{e}");
        }
    }

    #[test]
    fn globs_match_like_a_shell() {
        assert!(glob("*H100*", "NVIDIA H100 80GB HBM3"));
        assert!(glob("*epyc 9?54*", "AMD EPYC 9654 96-Core Processor"));
        assert!(!glob("*H200*", "NVIDIA H100 80GB HBM3"));
        assert!(glob("exact", "EXACT"));
        assert!(!glob("exact", "exactly"));
        assert!(glob("*", ""));
    }
}

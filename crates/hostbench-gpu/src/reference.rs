//! clpeak beside the OpenCL cases: its global-memory bandwidth next to `gpu.bandwidth` read at
//! the largest block, its single-, double-precision and integer compute next to `gpu.flops` f32,
//! f64 and `gpu.iops` i32.
//!
//! Why one clpeak run per device: clpeak has no way to run a single vector width or size, and on
//! PoCL most of its time is compiling its kernels (20–30 s per test on a 2-core VM). So the tests
//! the wanted cases need are run together, once, the first time a case asks, and every case takes
//! its figure from that run. clpeak prints every vector width (float … float16); like
//! `scripts/bench/gpu-vs-clpeak` the figure is its best width, as hostbench's record is its own
//! best width. clpeak addresses a device as platform `-p` and device `-d` within that platform,
//! which the OpenCL listing records as `extra.platform_index` / `extra.platform_device`.

use std::time::Duration;

use hostbench_core::model::{Record, Reference};
use hostbench_core::reference::{self, Better};
use hostbench_core::BenchError;

use crate::config::Dtype;
use crate::device::DeviceInfo;
use crate::Backend;

pub const CLPEAK: &str = "clpeak";

/// One clpeak test: its selective flag and the heading of its section in the output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Test {
    GlobalBandwidth,
    ComputeSp,
    ComputeDp,
    ComputeInteger,
}

impl Test {
    const ALL: [Test; 4] = [
        Test::GlobalBandwidth,
        Test::ComputeSp,
        Test::ComputeDp,
        Test::ComputeInteger,
    ];

    fn flag(self) -> &'static str {
        match self {
            Test::GlobalBandwidth => "--global-bandwidth",
            Test::ComputeSp => "--compute-sp",
            Test::ComputeDp => "--compute-dp",
            Test::ComputeInteger => "--compute-integer",
        }
    }

    /// The section heading clpeak prints ("Global memory bandwidth (GBPS)").
    fn heading(self) -> &'static str {
        match self {
            Test::GlobalBandwidth => "Global memory bandwidth",
            Test::ComputeSp => "Single-precision compute",
            Test::ComputeDp => "Double-precision compute",
            Test::ComputeInteger => "Integer compute",
        }
    }

    /// The compute test for a dtype (clpeak 1.1 has no selective half or 8-bit test).
    pub fn for_dtype(d: Dtype) -> Option<Test> {
        match d {
            Dtype::F32 => Some(Test::ComputeSp),
            Dtype::F64 => Some(Test::ComputeDp),
            Dtype::I32 => Some(Test::ComputeInteger),
            Dtype::F16 | Dtype::I8 => None,
        }
    }
}

/// clpeak's figures per test, in base units (GBPS, GFLOPS and GIOPS are 10^9).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Figures {
    pub values: Vec<(Test, f64)>,
}

impl Figures {
    pub fn get(&self, t: Test) -> Option<f64> {
        self.values.iter().find(|(x, _)| *x == t).map(|(_, v)| *v)
    }
}

/// The best vector width's figure of each section in clpeak's text output. A section that says
/// "Skipped" (no double support, say) or prints no figure is left out.
pub fn parse(text: &str) -> Figures {
    let mut out = Figures::default();
    let mut section: Option<Test> = None;
    for line in text.lines().map(str::trim) {
        if let Some(t) = Test::ALL.iter().find(|t| line.starts_with(t.heading())) {
            section = Some(*t);
            continue;
        }
        if line.is_empty() {
            continue;
        }
        let Some(t) = section else { continue };
        // "float16 : 13.96", "double2  : 1.39", "int   : 1.23"
        let Some((label, value)) = line.split_once(':') else {
            section = None;
            continue;
        };
        let label = label.trim();
        let word = label.trim_end_matches(|c: char| c.is_ascii_digit());
        if !matches!(word, "float" | "double" | "int") {
            section = None;
            continue;
        }
        let Ok(v) = value.trim().parse::<f64>() else {
            continue;
        };
        let v = v * 1e9;
        match out.values.iter_mut().find(|(x, _)| *x == t) {
            Some((_, best)) if v > *best => *best = v,
            Some(_) => {}
            None => out.values.push((t, v)),
        }
    }
    out
}

/// clpeak's arguments for `tests` on the OpenCL device `info`.
pub fn args(info: &DeviceInfo, tests: &[Test]) -> Result<Vec<String>, BenchError> {
    if info.backend != Backend::OpenCl {
        return Err(BenchError::unsupported(
            "clpeak measures OpenCL devices only (this is a CUDA device)",
        ));
    }
    let index = |key: &str| {
        info.facts
            .get(key)
            .and_then(serde_json::Value::as_u64)
            .ok_or_else(|| BenchError::Failed(format!("OpenCL device without {key}")))
    };
    let mut a = vec![
        "-p".to_string(),
        index("platform_index")?.to_string(),
        "-d".to_string(),
        index("platform_device")?.to_string(),
    ];
    a.extend(tests.iter().map(|t| t.flag().to_string()));
    Ok(a)
}

/// The command line as a person would type it.
pub fn command(args: &[String]) -> String {
    format!("{CLPEAK} {}", args.join(" "))
}

/// clpeak's version (`clpeak -v` → "clpeak version: 1.1.2"); not installed is `Unsupported`
/// with how to get it.
pub fn version() -> Result<String, BenchError> {
    reference::spawn(CLPEAK, &["-v".into()], false)
        .map_err(|_| BenchError::unsupported("clpeak not installed: apt install clpeak"))?;
    Ok(reference::version(CLPEAK, &["-v"], |l| {
        l.split("version:").nth(1).map(|v| v.trim().to_string())
    }))
}

/// Run clpeak once with `args` and read its figures. On PoCL a test takes tens of seconds, most of
/// it compiling kernels; a hang is cut off after 10 minutes.
pub fn measure(args: &[String]) -> Result<(String, Figures), BenchError> {
    let version = version()?;
    let out = reference::run(CLPEAK, args, Duration::from_secs(600))?;
    let figures = parse(&out.stdout);
    if figures.values.is_empty() {
        let why = out
            .text()
            .lines()
            .map(str::trim)
            .rfind(|l| !l.is_empty())
            .unwrap_or("no output")
            .to_string();
        return Err(BenchError::Failed(format!(
            "{} printed no figure: {why}",
            command(args)
        )));
    }
    Ok((version, figures))
}

impl Test {
    /// Why clpeak and hostbench may differ beyond the parity band on this test, for the
    /// record's note.
    fn why_apart(self) -> &'static str {
        match self {
            Test::GlobalBandwidth => {
                "clpeak's figure is its best vector width reading its own buffer (its largest \
                 allocation, a power of two) in a GPU's coalesced order; hostbench's is its best \
                 width over this case's block, in the order the device runs fastest (sequential \
                 per work-item on a CPU device, extra.order). On PoCL both are compiled by LLVM at \
                 run time, and how it vectorises each width decides the winner"
            }
            _ => {
                "clpeak runs one dependent multiply-add chain per work-item; a GPU interleaves \
                 work-items and hides the latency, but a CPU OpenCL device (PoCL) runs a \
                 work-group's items one after another, so each operation waits for the previous \
                 one. hostbench runs 8 independent chains per work-item (times the vector width), \
                 so on a CPU device it reaches several times clpeak's figure; on a GPU the two \
                 agree"
            }
        }
    }
}

/// One clpeak run's outcome, kept for every case of the device: version and figures, or why
/// there are none (the error's text: a note on each record that wanted it).
pub type Run = Result<(String, Figures), String>;

/// Put clpeak's figure for `test` on `rec`, or why there is none.
pub fn attach(rec: &mut Record, run: &Run, cmd: &str, test: Test) {
    let outcome: Result<Reference, BenchError> = match run {
        Ok((version, figures)) => match figures.get(test) {
            Some(v) => {
                reference::reference(CLPEAK, version.clone(), &[v], rec.value, Better::Higher)
            }
            None => Err(BenchError::Failed(format!(
                "{cmd} printed no '{}' figure (the device may lack it)",
                test.heading()
            ))),
        },
        Err(e) => Err(BenchError::Failed(e.clone())),
    };
    reference::attach(rec, outcome, cmd, test.why_apart());
}

/// clpeak for one device: the tests its cases want, run once on the first case that asks.
#[derive(Debug)]
pub struct Peer {
    tests: Vec<Test>,
    args: Result<Vec<String>, String>,
    run: Option<Run>,
}

impl Peer {
    /// clpeak for `tests` on `info` (none: nothing is ever run).
    pub fn new(info: &DeviceInfo, tests: Vec<Test>) -> Self {
        let args = args(info, &tests).map_err(|e| e.to_string());
        Self {
            tests,
            args,
            run: None,
        }
    }

    /// Whether the case measuring what `test` measures gets clpeak beside it.
    pub fn wants(&self, test: Test) -> bool {
        self.tests.contains(&test)
    }

    /// clpeak's figure for `test` on `rec` (clpeak runs now if it has not yet for this device).
    pub fn attach(&mut self, rec: &mut Record, test: Test) {
        if !self.wants(test) {
            return;
        }
        let (cmd, run): (String, Run) = match &self.args {
            Ok(args) => (
                command(args),
                self.run
                    .get_or_insert_with(|| measure(args).map_err(|e| e.to_string()))
                    .clone(),
            ),
            Err(e) => (String::new(), Err(e.clone())),
        };
        attach(rec, &run, &cmd, test);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OUTPUT: &str = "
Platform: Portable Computing Language
  Device: pthread-haswell-AMD EPYC
    Driver version  : 3.1+debian (Linux x64)
    Compute units   : 2
    Clock frequency : 1996 MHz

    Global memory bandwidth (GBPS)
      float   : 3.19
      float2  : 5.21
      float16 : 10.09

    Single-precision compute (GFLOPS)
      float   : 0.80
      float8  : 7.18
      float16 : 13.96

    No half precision support! Skipped

    Double-precision compute (GFLOPS)
      double   : 0.72
      double16 : 10.81

    Integer compute (GIOPS)
      int   : 1.23
      int8  : 7.81
      int16 : 9.73
";

    #[test]
    fn best_width_per_section_in_base_units() {
        let f = parse(OUTPUT);
        assert_eq!(f.get(Test::GlobalBandwidth), Some(10.09e9));
        assert_eq!(f.get(Test::ComputeSp), Some(13.96e9));
        assert_eq!(f.get(Test::ComputeDp), Some(10.81e9));
        assert_eq!(f.get(Test::ComputeInteger), Some(9.73e9));
    }

    #[test]
    fn device_facts_lines_are_not_figures() {
        // "Compute units : 2" must not land in a section, nor a skipped section leave a value.
        let f = parse("  Compute units   : 2\n    No double precision support! Skipped\n");
        assert!(f.values.is_empty(), "{f:?}");
        let only_sp = parse("Single-precision compute (GFLOPS)\n  float : 1.5\n\nfoo : 9\n");
        assert_eq!(only_sp.values, vec![(Test::ComputeSp, 1.5e9)]);
    }

    #[test]
    fn dtypes_map_to_clpeak_tests() {
        assert_eq!(Test::for_dtype(Dtype::F32), Some(Test::ComputeSp));
        assert_eq!(Test::for_dtype(Dtype::F64), Some(Test::ComputeDp));
        assert_eq!(Test::for_dtype(Dtype::I32), Some(Test::ComputeInteger));
        assert_eq!(Test::for_dtype(Dtype::F16), None);
        assert_eq!(Test::for_dtype(Dtype::I8), None);
    }
}

//! fio beside a disk case (`--reference`): the same pattern, block, queue depth, threads (one
//! job per thread, each on its own slice of the file, as hostbench's threads are), engine,
//! O_DIRECT and time, on the very file hostbench just measured, so both tools meet the same file
//! state (fully written, the same blocks recently touched). fio laying out a fresh file of its own
//! is what made the two disagree by 0.45–1.5× at 4 KiB random writes: for a write job fio only
//! fallocates its file (`fallocate=native`, its default on Linux), so on ext4 every block is an
//! unwritten extent and each first 4 KiB write into one converts it (a journalled metadata
//! change), while hostbench's file is written in full before any case (with O_DIRECT where the
//! cases use it, as `fio --rw=write --bs=1M --direct=1` writes one). Measured with fio alone on
//! ext4 over virtio (BENCHMARKS.md): 30–41 k IO/s at QD 32 on a fresh fallocated file against
//! 69–75 k on the same size laid out by writing; how much a run converts decides its figure.
//!
//! The I/O buffers match where the host allows: hostbench's huge pages are transparent huge
//! pages, fio's are hugetlb pages (`--iomem=shmhuge`) and need free ones reserved
//! (`vm.nr_hugepages`); without them fio uses malloc'd 4 KiB pages and the record says so.

use std::path::Path;
use std::time::Duration;

use hostbench_core::buffer::Pages;
use hostbench_core::model::Reference;
use hostbench_core::reference::{self, Better};
use hostbench_core::BenchError;
use serde_json::Value;

use crate::engine::EngineKind;
use crate::{slice_bytes, CaseSpec, DiskConfig};

/// One fio run's figures (all jobs together, reads and writes summed).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FioFigures {
    pub bytes_per_s: f64,
    pub iops: f64,
    /// Median total latency (submission to completion), seconds.
    pub lat_p50_s: Option<f64>,
}

/// The arguments of the fio run matching a case; `huge` says whether fio's buffers can be
/// hugetlb pages (else a note for the record).
pub fn fio_args(
    c: &CaseSpec,
    kind: EngineKind,
    direct: bool,
    file: &Path,
    file_bytes: u64,
    cfg: &DiskConfig,
    huge: bool,
) -> Vec<String> {
    let slice = slice_bytes(file_bytes, c);
    let mut a = vec![
        "--name=hostbench-reference".to_string(),
        format!("--filename={}", file.display()),
        format!("--rw={}", c.op.name()),
        format!("--bs={}", c.block),
        format!("--iodepth={}", c.iodepth),
        format!("--numjobs={}", c.threads),
        // Job i on bytes [i·slice, (i+1)·slice): hostbench's thread i's slice.
        format!("--size={slice}"),
        format!("--offset_increment={slice}"),
        format!("--ioengine={}", kind.name()),
        format!("--direct={}", u8::from(direct)),
        format!("--runtime={}ms", cfg.duration.as_millis().max(1)),
        "--time_based".into(),
        "--group_reporting".into(),
        "--lat_percentiles=1".into(),
        "--output-format=json".into(),
        // The file exists and is fully written: never let fio extend or rewrite it first.
        "--allow_file_create=0".into(),
        "--thread".into(),
    ];
    if c.op.mixed() {
        a.push(format!("--rwmixread={}", cfg.rwmix_read));
    }
    if cfg.sync_writes && c.op.writes() {
        a.push("--fdatasync=1".into());
    }
    if !cfg.ramp.is_zero() {
        a.push(format!("--ramp_time={}ms", cfg.ramp.as_millis()));
    }
    let iomem = if cfg.pages == Pages::Huge && huge {
        "shmhuge"
    } else {
        "malloc"
    };
    a.push(format!("--iomem={iomem}"));
    a
}

/// Whether enough hugetlb pages are free for fio's buffers (iodepth × block per job).
pub fn hugetlb_free_for(c: &CaseSpec) -> bool {
    use hostbench_core::host::meminfo;
    let (Some(free), Some(page)) = (meminfo("HugePages_Free"), meminfo("Hugepagesize")) else {
        return false;
    };
    let need = c.block * c.iodepth as u64 * c.threads as u64;
    free.saturating_mul(page) >= need
}

/// Parse fio's JSON output (`--group_reporting`: one job entry).
pub fn parse(json: &str) -> Result<FioFigures, BenchError> {
    // fio may print warnings before the document.
    let start = json
        .find('{')
        .ok_or_else(|| bad("no JSON in fio's output"))?;
    let doc: Value =
        serde_json::from_str(&json[start..]).map_err(|e| bad(&format!("fio's JSON: {e}")))?;
    let job = doc["jobs"]
        .get(0)
        .ok_or_else(|| bad("fio's JSON has no job"))?;
    let (mut bw, mut iops, mut lat) = (0.0, 0.0, None::<(f64, f64)>);
    for dir in ["read", "write"] {
        let d = &job[dir];
        let ios = d["total_ios"].as_f64().unwrap_or(0.0);
        if ios <= 0.0 {
            continue;
        }
        bw += d["bw_bytes"].as_f64().unwrap_or(0.0);
        iops += d["iops"].as_f64().unwrap_or(0.0);
        let p50 = d["lat_ns"]["percentile"]["50.000000"].as_f64();
        if let Some(p) = p50 {
            // Mixed ops: the p50 of the direction with more I/Os speaks for the case.
            if lat.is_none_or(|(n, _)| ios > n) {
                lat = Some((ios, p / 1e9));
            }
        }
    }
    if bw <= 0.0 {
        return Err(bad("fio moved no data"));
    }
    Ok(FioFigures {
        bytes_per_s: bw,
        iops,
        lat_p50_s: lat.map(|(_, l)| l),
    })
}

fn bad(msg: &str) -> BenchError {
    BenchError::Failed(msg.to_string())
}

/// fio `runs` times with `args`; each run's figures.
pub fn run_fio(
    args: &[String],
    runs: usize,
    limit: Duration,
) -> Result<Vec<FioFigures>, BenchError> {
    if reference::locate("fio").is_none() {
        return Err(BenchError::unsupported(
            "fio not installed: apt install fio",
        ));
    }
    (0..runs.max(1))
        .map(|_| {
            let out = reference::run("fio", args, limit)?;
            if !out.success {
                let line = out
                    .stderr
                    .lines()
                    .rev()
                    .find(|l| !l.trim().is_empty())
                    .unwrap_or("no message");
                return Err(BenchError::Failed(format!("fio failed: {line}")));
            }
            parse(&out.stdout)
        })
        .collect()
}

/// fio's version: the installed package's, else what `fio --version` prints.
pub fn fio_version() -> String {
    reference::package_version("fio").unwrap_or_else(|| {
        reference::version("fio", &["--version"], |l| {
            l.trim().strip_prefix("fio-").map(str::to_string)
        })
    })
}

/// The three references of a case (throughput, IOPS, latency) from fio's runs and ours.
pub fn references(
    runs: &[FioFigures],
    version: &str,
    ours: (f64, f64, f64),
) -> Result<(Reference, Reference, Option<Reference>), BenchError> {
    let pick = |f: fn(&FioFigures) -> f64| runs.iter().map(f).collect::<Vec<f64>>();
    let tp = reference::reference(
        "fio",
        version.to_string(),
        &pick(|r| r.bytes_per_s),
        ours.0,
        Better::Higher,
    )?;
    let io = reference::reference(
        "fio",
        version.to_string(),
        &pick(|r| r.iops),
        ours.1,
        Better::Higher,
    )?;
    let lats: Vec<f64> = runs.iter().filter_map(|r| r.lat_p50_s).collect();
    let lat = if lats.is_empty() {
        None
    } else {
        Some(reference::reference(
            "fio",
            version.to_string(),
            &lats,
            ours.2,
            Better::Lower,
        )?)
    };
    Ok((tp, io, lat))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Op;

    #[test]
    fn parses_fio_json_with_a_preamble() {
        let text = r#"note: both iodepth >= 1 and synchronous I/O engine are selected
{"fio version":"fio-3.33","jobs":[{"jobname":"x",
 "read":{"total_ios":1000,"bw_bytes":4096000,"iops":1000.0,
         "lat_ns":{"percentile":{"50.000000":250000}}},
 "write":{"total_ios":0,"bw_bytes":0,"iops":0.0}}]}"#;
        let f = parse(text).expect("parse");
        assert_eq!(f.bytes_per_s, 4_096_000.0);
        assert_eq!(f.iops, 1000.0);
        assert_eq!(f.lat_p50_s, Some(250e-6));
        assert!(parse("fio: no such file").is_err());
        assert!(parse(r#"{"jobs":[{"read":{"total_ios":0},"write":{"total_ios":0}}]}"#).is_err());
    }

    #[test]
    fn args_match_the_case() {
        let c = CaseSpec {
            op: Op::RandWrite,
            block: 4096,
            threads: 2,
            iodepth: 32,
        };
        let cfg = DiskConfig {
            dir: ".".into(),
            cases: vec![c],
            engines: crate::EngineChoice::Auto,
            direct: crate::DirectChoice::Auto,
            file_bytes: None,
            io_bytes: None,
            duration: Duration::from_millis(1500),
            ramp: Duration::ZERO,
            rwmix_read: 70,
            sync_writes: false,
            verify: false,
            interval: None,
            pages: Pages::Huge,
            seed: 1,
            reference: hostbench_core::subsystem::ReferenceScope::All,
            refusal_skips: false,
        };
        let a = fio_args(
            &c,
            EngineKind::IoUring,
            true,
            Path::new("/d/data"),
            1 << 20,
            &cfg,
            false,
        );
        for want in [
            "--rw=randwrite",
            "--bs=4096",
            "--iodepth=32",
            "--numjobs=2",
            "--size=524288",
            "--offset_increment=524288",
            "--ioengine=io_uring",
            "--direct=1",
            "--runtime=1500ms",
            "--filename=/d/data",
            "--iomem=malloc",
        ] {
            assert!(a.iter().any(|x| x == want), "{want} in {a:?}");
        }
        assert!(!a.iter().any(|x| x.starts_with("--rwmixread")));
    }
}

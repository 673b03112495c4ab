//! Integration tests of `hostbench disk`: every pattern and engine on a small file, the JSON
//! contract, cache labelling on tmpfs, the safety rules (scratch directory removed on success,
//! on a full filesystem, on an I/O error mid-run and on Ctrl-C) and bad input.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command as StdCommand;
use std::time::{Duration, Instant};

use common::*;

/// Scratch directories hostbench left behind in `dir`.
fn leftovers(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with("hostbench-"))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// A tmpfs of `size` mounted on a fresh directory, unmounted on drop. `None` when not root
/// (then the caller skips, except under CI, where tests run as root and must not skip).
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    fn mount(size: &str, extra: &str) -> Option<Self> {
        if !common::is_root() {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI runs as root: mounting a tmpfs must work"
            );
            return None;
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let opts = format!("size={size}{extra}");
        let ok = StdCommand::new("mount")
            .args(["-t", "tmpfs", "-o", &opts, "tmpfs"])
            .arg(dir.path())
            .status()
            .expect("mount")
            .success();
        assert!(ok, "mount -t tmpfs failed");
        Some(Self { dir })
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = StdCommand::new("umount").arg(self.dir.path()).status();
    }
}

#[test]
fn every_pattern_and_engine_runs_on_a_small_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = run_ok(
        "disk --op read,write,randread,randwrite,randrw,rw --block 4k --iodepth 1,4 \
         --engine io_uring,psync --size 8MiB --duration 60ms --repeat 2 --warmup 0 --json - --dir",
        &[dir.path().as_os_str()],
    );
    let doc = json_of(&out);
    assert_run_contract(&doc);
    let records = doc["records"].as_array().expect("records");
    // 6 ops × 2 depths × 2 engines × (throughput, IOPS, latency).
    assert_eq!(records.len(), 72, "skipped: {}", doc["skipped"]);
    for r in records {
        assert_record_contract(r);
        for key in [
            "op",
            "block_bytes",
            "threads",
            "iodepth",
            "engine",
            "direct",
            "file_bytes",
            "pages",
        ] {
            assert!(r["params"].get(key).is_some(), "params lack {key}: {r}");
        }
        assert!(r["extra"]["cache_mode"].is_string());
        // Huge-page buffers by default, with what the kernel granted (THP may be off).
        assert_eq!(r["params"]["pages"], "huge");
        let bufs = &r["extra"]["io_buffers"];
        assert_eq!(bufs["pages"], "huge", "{r}");
        let frac = bufs["huge_fraction"].as_f64().expect("huge_fraction");
        assert!((0.0..=1.0).contains(&frac), "{r}");
        assert_eq!(
            frac < 1.0,
            r["warnings"].to_string().contains("huge pages asked for"),
            "a shortfall must be warned about, and only then: {r}"
        );
        if r["benchmark"] == "disk.latency" {
            assert_eq!(r["unit"], "s");
            let s = &r["stats"];
            let (p50, p99, p999) = (
                s["p50"].as_f64().expect("p50"),
                s["p99"].as_f64().expect("p99"),
                s["p999"].as_f64().expect("p999"),
            );
            let lat = &r["extra"]["completion_latency"];
            let (min, max) = (
                lat["min"].as_f64().expect("min"),
                lat["max"].as_f64().expect("max"),
            );
            assert!(
                min <= p50 && p50 <= p99 && p99 <= p999 && p999 <= max,
                "{r}"
            );
        }
        if r["params"]["op"] == "randrw" && r["benchmark"] == "disk.latency" {
            assert!(r["extra"]["read_latency"].is_object());
        }
    }
    assert!(
        leftovers(dir.path()).is_empty(),
        "scratch directory left behind"
    );
}

#[test]
fn a_warm_up_sample_runs_a_quarter_of_a_sample() {
    // A warm-up only brings the device to its steady state (fio's ramp_time); it is never
    // measured, so it is cut at a quarter of the sample length. With 800 ms samples it stops at
    // 200 ms, far below the 800 ms a full-length warm-up would take.
    let dir = tempfile::tempdir().expect("tempdir");
    let out = run_ok(
        "disk --op randread --block 4k --iodepth 1 --size 8MiB --duration 800ms --repeat 1 \
         --warmup 2 --json - --dir",
        &[dir.path().as_os_str()],
    );
    let doc = json_of(&out);
    let records = doc["records"].as_array().expect("records");
    assert_eq!(records.len(), 3, "{doc}");
    for r in records {
        let warm = r["extra"]["warmup_seconds"]
            .as_f64()
            .expect("warmup_seconds");
        assert!(
            (0.3..0.8).contains(&warm),
            "two warm-ups of 200 ms each: {warm} s\n{r}"
        );
    }
    // No warm-up asked for: none taken, none reported.
    let out = run_ok(
        "disk --op randread --block 4k --iodepth 1 --size 8MiB --duration 100ms --repeat 1 \
         --warmup 0 --json - --dir",
        &[dir.path().as_os_str()],
    );
    for r in json_of(&out)["records"].as_array().expect("records") {
        assert!(r["extra"].get("warmup_seconds").is_none(), "{r}");
    }
}

#[test]
fn tmpfs_is_labelled_memory_not_storage() {
    let Some(fs) = Tmpfs::mount("64m", "") else {
        return;
    };
    let out = run_ok(
        "disk --op randread --iodepth 1 --size 4MiB --duration 50ms --repeat 1 --warmup 0 \
         --json - --dir",
        &[fs.path().as_os_str()],
    );
    let doc = json_of(&out);
    let r = &doc["records"][0];
    assert_eq!(r["extra"]["fs_type"], "tmpfs");
    let warnings = r["warnings"].to_string();
    assert!(warnings.contains("memory, not storage"), "{warnings}");
}

#[test]
fn unaligned_blocks_fall_back_to_labelled_buffered_io() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = run_ok(
        "disk --op read,randwrite --block 1000 --iodepth 2 --size 2MB --duration 40ms --repeat 1 \
         --warmup 0 --json - --dir",
        &[dir.path().as_os_str()],
    );
    let doc = json_of(&out);
    let records = doc["records"].as_array().expect("records");
    assert_eq!(records.len(), 6, "{}", doc["skipped"]);
    for r in records {
        assert_eq!(r["params"]["direct"], false, "{r}");
        assert_eq!(r["extra"]["cache_mode"], "buffered-evicted");
        assert!(
            r["warnings"].to_string().contains("O_DIRECT not used"),
            "{r}"
        );
    }
    // `--direct on` refuses instead of falling back.
    assert_usage_error(
        &[
            "disk",
            "--block",
            "1000",
            "--direct",
            "on",
            "--dir",
            dir.path().to_str().expect("utf-8"),
        ],
        "--direct on",
    );
}

#[test]
fn a_full_filesystem_is_refused_and_nothing_is_left() {
    let Some(fs) = Tmpfs::mount("16m", "") else {
        return;
    };
    assert_usage_error(
        &[
            "disk",
            "--size",
            "64MiB",
            "--dir",
            fs.path().to_str().expect("utf-8 path"),
        ],
        "free",
    );
    assert!(leftovers(fs.path()).is_empty());
    // The default file size never shrinks below the floor to fit (issue 55): refused, one line.
    assert_usage_error(
        &["disk", "--dir", fs.path().to_str().expect("utf-8 path")],
        "free on",
    );
    assert!(leftovers(fs.path()).is_empty());
    // A small file asked for explicitly runs, marked.
    let out = run_ok(
        "disk --op read --block 64k --iodepth 1 --size 1MiB --duration 30ms --repeat 1 \
         --warmup 0 --json - --dir",
        &[fs.path().as_os_str()],
    );
    let doc = json_of(&out);
    let r = &doc["records"][0];
    assert_eq!(r["params"]["file_bytes"], 1 << 20);
    assert_eq!(r["extra"]["sizing"]["below_floor"], true, "{r}");
    assert!(leftovers(fs.path()).is_empty());
}

#[test]
fn ctrl_c_removes_the_scratch_directory() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bin = assert_cmd::cargo::cargo_bin("hostbench");
    let mut child = StdCommand::new(bin)
        .args([
            "disk",
            "--op",
            "randread",
            "--size",
            "8MiB",
            "--duration",
            "20s",
            "--repeat",
            "1",
            "--warmup",
            "0",
            "--quiet",
            "--dir",
        ])
        .arg(dir.path())
        .spawn()
        .expect("spawn");
    let began = Instant::now();
    while leftovers(dir.path()).is_empty() {
        assert!(
            began.elapsed() < Duration::from_secs(20),
            "no scratch dir appeared"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // Let it get into the measurement, then interrupt it.
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: kill with a valid pid and signal number has no memory-safety preconditions.
    unsafe {
        libc::kill(child.id() as libc::pid_t, libc::SIGINT);
    }
    let status = child.wait().expect("wait");
    assert_eq!(status.code(), Some(130), "{status:?}");
    assert!(
        leftovers(dir.path()).is_empty(),
        "scratch directory left behind"
    );
}

#[test]
fn verify_reads_back_checksummed_blocks() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = run_ok(
        "disk --op write,randread,read --block 16k --iodepth 4 --verify --size 4MiB --pages 4k \
         --duration 100ms --interval 20ms --repeat 1 --warmup 0 --json - --dir",
        &[dir.path().as_os_str()],
    );
    let doc = json_of(&out);
    assert!(doc["skipped"].is_null(), "{}", doc["skipped"]);
    let records = doc["records"].as_array().expect("records");
    assert!(records.iter().all(|r| r["extra"]["verify"] == true));
    // --pages 4k: small pages asked for (MADV_NOHUGEPAGE), and none granted.
    for r in records {
        assert_eq!(r["params"]["pages"], "4k");
        assert_eq!(r["extra"]["io_buffers"]["pages"], "4k");
        assert_eq!(
            r["extra"]["io_buffers"]["huge_bytes"].as_u64(),
            Some(0),
            "{r}"
        );
    }
    // Per-interval throughput: one series per sample, about 100 ms / 20 ms buckets.
    let tp = records
        .iter()
        .find(|r| r["benchmark"] == "disk.throughput")
        .expect("throughput record");
    let series = tp["extra"]["interval_bytes_per_s"][0]
        .as_array()
        .expect("interval series");
    assert!((3..=8).contains(&series.len()), "{series:?}");
    assert!(series.iter().any(|v| v.as_f64().unwrap_or(0.0) > 0.0));
}

#[test]
fn disk_bad_input_is_one_line_and_exit_2() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path().to_str().expect("utf-8 path");
    assert_usage_error(&["disk", "--dir", "/nonexistent/hb"], "no such directory");
    let file = dir.path().join("plain");
    std::fs::write(&file, b"x").expect("write");
    assert_usage_error(
        &["disk", "--dir", file.to_str().expect("utf-8")],
        "not a directory",
    );
    if let Some(dev) = [
        "/dev/loop0",
        "/dev/vda",
        "/dev/sda",
        "/dev/nvme0n1",
        "/dev/ram0",
    ]
    .into_iter()
    .find(|p| {
        std::fs::metadata(p).is_ok_and(|m| {
            use std::os::unix::fs::FileTypeExt;
            m.file_type().is_block_device()
        })
    }) {
        assert_usage_error(&["disk", "--dir", dev], "block device");
    }
    assert_usage_error(&["disk", "--dir", d, "--block", "0"], "at least 1 byte");
    assert_usage_error(&["disk", "--dir", d, "--size", "900TiB"], "free");
    assert_usage_error(&["disk", "--dir", d, "--rwmix", "101"], "101");
    assert_usage_error(&["disk", "--dir", d, "--op", "trim"], "trim");
    assert_usage_error(&["disk", "--dir", d, "--engine", "aio"], "aio");
    assert_usage_error(&["disk", "--dir", d, "--iodepth", "0"], "'0'");
    assert_usage_error(&["disk", "--dir", d, "--threads", "0"], "'0'");
    assert_usage_error(&["disk", "--dir", d, "--pages", "1g"], "page size '1g'");
    if let Some(ro) = Tmpfs::mount("8m", ",ro") {
        assert_usage_error(
            &["disk", "--dir", ro.path().to_str().expect("utf-8")],
            "not writable",
        );
    }
    assert!(leftovers(dir.path()).is_empty());
}

#[test]
fn a_skipped_measurement_skips_all_three_records_alike() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = hostbench()
        .args(
            "disk --op randread --iodepth 1 --size 4MiB --duration 20ms --budget 1ns --repeat 1 \
             --warmup 0 --json - --quiet --dir"
                .split_whitespace(),
        )
        .arg(dir.path())
        .output()
        .expect("run");
    // Nothing measured: exit 1, and the JSON says why for every record of the case.
    assert_eq!(out.status.code(), Some(1));
    let doc = json_of(&out);
    let kinds: Vec<(String, String)> = doc["skipped"]
        .as_array()
        .expect("skipped")
        .iter()
        .map(|s| {
            (
                s["benchmark"].as_str().unwrap_or("").to_string(),
                s["kind"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    for bench in ["disk.throughput", "disk.iops", "disk.latency"] {
        assert!(
            kinds.contains(&(bench.to_string(), "budget".to_string())),
            "{kinds:?}"
        );
    }
    assert!(leftovers(dir.path()).is_empty());
}

/// An ext4 image on a loop device (`mount -o loop`), unmounted on drop; the loop device goes
/// with it (autoclear). `None` when not root or the tools are missing, which CI must not be.
struct LoopExt4 {
    img: PathBuf,
    mnt: tempfile::TempDir,
    dev: String,
    _tmp: tempfile::TempDir,
}

impl LoopExt4 {
    fn mount(size_mib: u64) -> Option<Self> {
        if !Path::new("/dev/loop-control").exists() {
            // A kernel or container without loop devices: nothing to mount on, even as root.
            eprintln!("skipped: no /dev/loop-control (loop devices unavailable here)");
            return None;
        }
        let tools = ["mkfs.ext4", "losetup", "filefrag"];
        let have = |t: &str| {
            StdCommand::new("sh")
                .args(["-c", &format!("command -v {t}")])
                .output()
                .is_ok_and(|o| o.status.success())
        };
        if !common::is_root() || !tools.iter().all(|t| have(t)) {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI runs as root with e2fsprogs and mount installed: a loop-mounted ext4 must work"
            );
            return None;
        }
        let tmp = tempfile::tempdir().expect("tempdir");
        let img = tmp.path().join("disk.img");
        std::fs::File::create(&img)
            .and_then(|f| f.set_len(size_mib << 20))
            .expect("image");
        // No journal and no lazy initialisation: every metadata block is written now, so only
        // the data file's blocks lie beyond the cut the test makes later.
        let ok = StdCommand::new("mkfs.ext4")
            .args(["-q", "-F", "-b", "4096", "-O", "^has_journal", "-E"])
            .arg("lazy_itable_init=0,lazy_journal_init=0")
            .arg(&img)
            .status()
            .expect("mkfs.ext4")
            .success();
        assert!(ok, "mkfs.ext4 failed");
        let mnt = tempfile::tempdir().expect("tempdir");
        let ok = StdCommand::new("mount")
            .args(["-o", "loop"])
            .arg(&img)
            .arg(mnt.path())
            .status()
            .expect("mount")
            .success();
        assert!(ok, "mount -o loop failed");
        let out = StdCommand::new("losetup")
            .arg("-j")
            .arg(&img)
            .output()
            .expect("losetup -j");
        let dev = String::from_utf8_lossy(&out.stdout)
            .split(':')
            .next()
            .unwrap_or("")
            .trim()
            .to_string();
        assert!(
            dev.starts_with("/dev/loop"),
            "loop device of {img:?}: {dev:?}"
        );
        Some(Self {
            img,
            mnt,
            dev,
            _tmp: tmp,
        })
    }

    /// Shrink the device to `bytes` under the mounted filesystem: every I/O beyond it now fails
    /// with EIO in the block layer ("access beyond end of device"), as a dying disk would.
    fn cut_at(&self, bytes: u64) {
        let sysfs_size = Path::new("/sys/block")
            .join(self.dev.trim_start_matches("/dev/"))
            .join("size");
        // A write the loop driver already has in flight can grow the image again between the
        // truncate and the capacity change; once the device is smaller, nothing can: so repeat.
        for _ in 0..50 {
            std::fs::OpenOptions::new()
                .write(true)
                .open(&self.img)
                .and_then(|f| f.set_len(bytes))
                .expect("truncate image");
            let ok = StdCommand::new("losetup")
                .args(["-c", &self.dev])
                .status()
                .expect("losetup -c")
                .success();
            assert!(ok, "losetup -c {} failed", self.dev);
            let sectors: u64 = std::fs::read_to_string(&sysfs_size)
                .ok()
                .and_then(|s| s.trim().parse().ok())
                .expect("device size");
            if sectors * 512 <= bytes {
                return;
            }
        }
        panic!("{} did not shrink to {bytes} B", self.dev);
    }
}

impl Drop for LoopExt4 {
    fn drop(&mut self) {
        let _ = StdCommand::new("umount").arg(self.mnt.path()).status();
    }
}

/// First physical byte of `file` on its device, from `filefrag -v` (FIEMAP).
fn first_physical_byte(file: &Path) -> u64 {
    let out = StdCommand::new("filefrag")
        .arg("-v")
        .arg(file)
        .output()
        .expect("filefrag");
    let text = String::from_utf8_lossy(&out.stdout);
    let block: u64 = text
        .split("blocks of ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .and_then(|s| s.parse().ok())
        .expect("filefrag block size");
    // Extent lines: "   0:        0..    2047:       1066..      3113:   2048:   last,eof"
    let first = text
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(':').map(str::trim).collect();
            (f.len() >= 4 && f[0].parse::<u32>().is_ok())
                .then(|| f[2].split("..").next()?.trim().parse::<u64>().ok())
                .flatten()
        })
        .min()
        .expect("an extent");
    first * block
}

#[test]
fn an_io_error_mid_run_ends_that_case_and_keeps_what_was_measured() {
    let Some(disk) = LoopExt4::mount(64) else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let json = dir.path().join("partial.json");
    // read, then write (during which the device fails), then randread: one line of stderr per
    // failed case, the read's records kept, the scratch directory removed.
    let child = StdCommand::new(assert_cmd::cargo::cargo_bin("hostbench"))
        .env("HOSTBENCH_DB", dir.path().join("history.sqlite"))
        .args(
            "disk --op read,write,randread --block 64k --iodepth 4 --size 8MiB --duration 2s \
             --repeat 1 --warmup 0 --json"
                .split_whitespace(),
        )
        .arg(&json)
        .arg("--dir")
        .arg(disk.mnt.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    // The partial result is rewritten after every case: once it holds the read's records, the
    // write is running.
    let t0 = Instant::now();
    loop {
        let n = std::fs::read(&json)
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            .and_then(|d| d["records"].as_array().map(Vec::len))
            .unwrap_or(0);
        if n >= 3 {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "the read case never finished"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    let data = leftovers(disk.mnt.path())
        .first()
        .map(|d| d.join("data"))
        .expect("scratch directory");
    disk.cut_at(first_physical_byte(&data));
    let out = child.wait_with_output().expect("wait");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&json).expect("result")).expect("valid JSON");
    let ops = |v: &serde_json::Value| -> Vec<String> {
        v.as_array()
            .map(|a| {
                a.iter()
                    .map(|r| r["params"]["op"].as_str().unwrap_or("?").to_string())
                    .collect()
            })
            .unwrap_or_default()
    };
    // What was measured before the failure is kept.
    assert_eq!(ops(&doc["records"]), ["read", "read", "read"], "{doc}");
    // The failing case and the one after it are skipped, each saying what the OS said.
    let skipped = doc["skipped"].as_array().expect("skipped");
    for op in ["write", "randread"] {
        let s: Vec<&serde_json::Value> =
            skipped.iter().filter(|s| s["params"]["op"] == op).collect();
        assert_eq!(s.len(), 3, "{op}: {skipped:?}");
        for e in s {
            let reason = e["reason"].as_str().unwrap_or("");
            assert!(
                reason.contains("Input/output error") && reason.contains("offset"),
                "{op}: {e}"
            );
        }
    }
    // The report says so too, and exit code 3 means "some benchmarks skipped or failed".
    assert!(
        stdout.contains("Input/output error"),
        "stdout: {stdout}\nstderr: {stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(out.status.code(), Some(3), "stderr: {stderr}");
    assert!(
        leftovers(disk.mnt.path()).is_empty(),
        "scratch directory left behind; stderr: {stderr}"
    );
}

#[test]
fn a_large_block_reference_is_like_for_like_when_fio_cannot_have_huge_pages() {
    if !common::on_path("fio") {
        assert!(std::env::var_os("CI").is_none(), "CI installs fio");
        eprintln!("skipping: fio not installed");
        return;
    }
    if hostbench_core::host::meminfo("HugePages_Free").unwrap_or(0) > 0 {
        // fio gets hugetlb buffers (--iomem=shmhuge): already like for like.
        eprintln!("skipping: hugetlb pages are reserved here");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let args = "disk --op read --block 1MiB --iodepth 2 --threads 1 --size 32MiB \
                --duration 100ms --repeat 2 --warmup 0 --reference --json - --dir";
    let doc = json_of(&run_ok(args, &[dir.path().as_os_str()]));
    let records = doc["records"].as_array().expect("records");
    assert_eq!(records.len(), 3);
    for r in records {
        let l = &r["extra"]["like_for_like"];
        assert_eq!(l["setting"], "pages=4k", "{r}");
        assert!(l["hostbench"].as_f64().is_some_and(|v| v > 0.0), "{r}");
        assert!(l["headline_ratio"].as_f64().is_some_and(|v| v > 0.0), "{r}");
        // The reference ratio is the like-for-like one; the headline keeps its huge-page figure.
        assert_eq!(r["reference"]["ratio"], l["ratio"], "{r}");
        let fio = r["reference"]["value"].as_f64().unwrap();
        let twin = l["hostbench"].as_f64().unwrap();
        let want = if r["metric"] == "latency" {
            fio / twin
        } else {
            twin / fio
        };
        assert!(
            (l["ratio"].as_f64().unwrap() - want).abs() < 1e-9 * want,
            "{r}"
        );
        assert!(l["why_higher"].as_str().unwrap().contains("huge-page"));
    }
    assert!(leftovers(dir.path()).is_empty(), "scratch removed");
}

#[test]
fn reference_runs_fio_beside_each_case_on_the_same_file() {
    let have_fio = common::on_path("fio");
    if !have_fio {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI installs fio (scripts/test): the reference must run for real"
        );
        eprintln!("skipping: fio not installed");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let args = "disk --op read,randwrite --block 64KiB --iodepth 4 --threads 2 --size 16MiB \
                --duration 100ms --repeat 2 --warmup 0 --reference --json - --dir";
    let out = run_ok(args, &[dir.path().as_os_str()]);
    let doc = json_of(&out);
    let records = doc["records"].as_array().expect("records");
    assert_eq!(records.len(), 6);
    for r in records {
        let reference = &r["reference"];
        assert_eq!(reference["tool"], "fio", "{r}");
        assert!(reference["value"].as_f64().is_some_and(|v| v > 0.0), "{r}");
        assert!(reference["ratio"].as_f64().is_some_and(|v| v > 0.0), "{r}");
        let cmd = r["extra"]["reference_command"].as_str().expect("command");
        let op = r["params"]["op"].as_str().expect("op");
        for want in [
            format!("--rw={op}"),
            "--bs=65536".into(),
            "--iodepth=4".into(),
            "--numjobs=2".into(),
            format!(
                "--ioengine={}",
                r["params"]["engine"].as_str().expect("engine")
            ),
        ] {
            assert!(cmd.contains(&want), "{want} in {cmd}");
        }
    }
    assert!(leftovers(dir.path()).is_empty(), "scratch removed");

    // Without fio: the same run, a note on every record, no failure.
    let empty = tempfile::tempdir().expect("tmp");
    let out = hostbench()
        .env("PATH", empty.path())
        .args(args.split_whitespace())
        .arg(dir.path())
        .output()
        .expect("run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc = json_of(&out);
    for r in doc["records"].as_array().expect("records") {
        assert!(r["reference"].is_null());
        let warned = r["warnings"].as_array().expect("warnings").iter().any(|w| {
            w.as_str()
                .is_some_and(|w| w.contains("fio not installed: apt install fio"))
        });
        assert!(warned, "{r}");
    }
}

/// Issue 55 (1): on a nearly full filesystem (a 48 MiB ext4 on a loop device, about 37 MiB
/// free) the default working file once shrank to 3 MiB, silently, and read at 20 GB/s from a
/// rotational device. Now the run is refused in one line naming the free space and the remedies;
/// the same small file asked for with --size runs, every record marked, with its sizing.
#[test]
fn a_nearly_full_filesystem_refuses_the_default_file_and_marks_an_asked_small_one() {
    let Some(disk) = LoopExt4::mount(48) else {
        return;
    };
    let mnt = disk.mnt.path().to_str().expect("utf-8 path");
    let json = disk._tmp.path().join("out.json");
    let out = hostbench()
        .args(["disk", "--dir", mnt, "--repeat", "1", "--json"])
        .arg(&json)
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    for part in ["256 MiB", "is free on", mnt, "--dir", "--size"] {
        assert!(err.contains(part), "{part:?} not in {err}");
    }
    assert!(!json.exists(), "nothing measured, nothing written");
    assert!(leftovers(disk.mnt.path()).is_empty());
    // In `run` the same refusal skips the disk's cases with the reason, and the run goes on.
    let out_dir = disk._tmp.path().join("run");
    let out = hostbench()
        .args(
            "run --only disk --profile quick --repeat 1 --warmup 0 --quiet --no-history \
             --no-reference --disk-dir"
                .split_whitespace(),
        )
        .arg(disk.mnt.path())
        .arg("--out")
        .arg(&out_dir)
        .output()
        .expect("run");
    // Nothing else was asked for, so nothing was measured at all: a runtime failure (exit 1).
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run_json = std::fs::read_dir(&out_dir)
        .expect("out dir")
        .flatten()
        .map(|e| e.path().join("run.json"))
        .find(|p| p.exists())
        .expect("run.json");
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run_json).expect("read")).expect("JSON");
    let skipped = doc["skipped"].as_array().expect("skipped");
    assert_eq!(skipped.len(), 6, "{skipped:?}");
    for s in skipped {
        assert_eq!(s["kind"], "refused", "{s}");
        assert!(s["reason"].to_string().contains("is free on"), "{s}");
    }
    assert!(leftovers(disk.mnt.path()).is_empty());

    let out = run_ok(
        "disk --op read,randread --block 1MiB,4k --iodepth 1 --file-size 4MiB --duration 40ms \
         --repeat 1 --warmup 0 --json - --dir",
        &[disk.mnt.path().as_os_str()],
    );
    let doc = json_of(&out);
    let records = doc["records"].as_array().expect("records");
    assert_eq!(records.len(), 12, "{}", doc["skipped"]);
    for r in records {
        let sizing = &r["extra"]["sizing"];
        assert_eq!(sizing["asked_by"], "--size", "{r}");
        assert_eq!(sizing["used"], 4 << 20);
        assert_eq!(sizing["below_floor"], true);
        assert!(
            sizing["free"].as_u64().expect("free") < 48 << 20,
            "{sizing}"
        );
        assert!(
            r["warnings"]
                .to_string()
                .contains("working file 4.00 MiB (asked with --size) is below the 256 MiB floor"),
            "{r}"
        );
    }
    assert!(leftovers(disk.mnt.path()).is_empty());
}

/// An ext4 on a loop device set up with `losetup --direct-io=on|off` (not `mount -o loop`, which
/// chooses for itself), its image under the target directory (not /tmp, which may be tmpfs);
/// unmounted and detached on drop. `None` when not root or the tools are missing, which CI must
/// not be.
struct LoopDio {
    dev: String,
    img: PathBuf,
    mnt: tempfile::TempDir,
    _tmp: tempfile::TempDir,
}

impl LoopDio {
    fn set_up(direct_io: bool) -> Option<Self> {
        let tools = ["mkfs.ext4", "losetup"];
        let have = |t: &str| {
            StdCommand::new("sh")
                .args(["-c", &format!("command -v {t}")])
                .output()
                .is_ok_and(|o| o.status.success())
        };
        let can = Path::new("/dev/loop-control").exists()
            && common::is_root()
            && tools.iter().all(|t| have(t));
        if !can {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI runs as root with loop devices, e2fsprogs and mount: a loop device must work"
            );
            eprintln!("skipped: needs root, /dev/loop-control, losetup and mkfs.ext4");
            return None;
        }
        let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir");
        let img = tmp.path().join("disk.img");
        std::fs::File::create(&img)
            .and_then(|f| f.set_len(64 << 20))
            .expect("image");
        let out = StdCommand::new("losetup")
            .args([
                "--find",
                "--show",
                if direct_io {
                    "--direct-io=on"
                } else {
                    "--direct-io=off"
                },
            ])
            .arg(&img)
            .output()
            .expect("losetup");
        assert!(
            out.status.success(),
            "losetup: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let dev = String::from_utf8_lossy(&out.stdout).trim().to_string();
        let mnt = tempfile::tempdir().expect("tempdir");
        // From here on, Drop detaches the device whatever fails.
        let me = Self {
            dev,
            img,
            mnt,
            _tmp: tmp,
        };
        let ok = StdCommand::new("mkfs.ext4")
            .args(["-q", "-F", &me.dev])
            .status()
            .expect("mkfs.ext4")
            .success();
        assert!(ok, "mkfs.ext4 {} failed", me.dev);
        let ok = StdCommand::new("mount")
            .arg(&me.dev)
            .arg(me.mnt.path())
            .status()
            .expect("mount")
            .success();
        assert!(ok, "mount {} failed", me.dev);
        Some(me)
    }

    fn name(&self) -> &str {
        self.dev.trim_start_matches("/dev/")
    }

    fn sys(&self, file: &str) -> String {
        std::fs::read_to_string(Path::new("/sys/block").join(self.name()).join(file))
            .unwrap_or_default()
            .trim()
            .to_string()
    }
}

impl Drop for LoopDio {
    fn drop(&mut self) {
        let _ = StdCommand::new("umount").arg(self.mnt.path()).status();
        let _ = StdCommand::new("losetup").args(["-d", &self.dev]).status();
    }
}

/// The whole disk holding `path` (a partition resolved to its disk), from sysfs; None for a
/// filesystem without a block device.
fn disk_of(path: &Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let dev = std::fs::metadata(path).ok()?.dev();
    let (major, minor) = (dev >> 8 & 0xfff, (dev & 0xff) | (dev >> 12 & 0xfff00));
    let dir = Path::new("/sys/dev/block")
        .join(format!("{major}:{minor}"))
        .canonicalize()
        .ok()?;
    let dir = if dir.join("partition").exists() {
        dir.parent()?.to_path_buf()
    } else {
        dir
    };
    Some(dir.file_name()?.to_string_lossy().into_owned())
}

/// Issue 55 (2): O_DIRECT through a loop device without direct I/O reaches its backing file
/// through the host's page cache: the figures are of memory, labelled as tmpfs's are, with the
/// backing file named. With direct I/O the device holding the file bounds the figure: its
/// rotational flag and its link, not the loop device's.
#[test]
fn a_loop_device_is_followed_to_its_backing_file_with_and_without_direct_io() {
    for direct_io in [false, true] {
        let Some(l) = LoopDio::set_up(direct_io) else {
            return;
        };
        assert_eq!(
            l.sys("loop/dio"),
            if direct_io { "1" } else { "0" },
            "losetup --direct-io={direct_io} on {}",
            l.dev
        );
        let out = run_ok(
            "disk --op randread --iodepth 1 --size 4MiB --duration 40ms --repeat 1 --warmup 0 \
             --json - --dir",
            &[l.mnt.path().as_os_str()],
        );
        let doc = json_of(&out);
        let records = doc["records"].as_array().expect("records");
        assert_eq!(records.len(), 3, "{}", doc["skipped"]);
        let img = l.img.to_str().expect("utf-8 path");
        let below = disk_of(&l.img);
        for r in records {
            let dev = &r["extra"]["device"];
            assert_eq!(dev["name"], l.name(), "{r}");
            assert_eq!(dev["stack"]["kind"], "loop");
            assert_eq!(dev["stack"]["backing_file"], img);
            assert_eq!(dev["stack"]["direct_io"], direct_io);
            let chain = r["extra"]["device_chain"].as_str().expect("device_chain");
            let on_off = if direct_io { "on" } else { "off" };
            assert!(
                chain.starts_with(&format!("{} (file {img}, direct I/O {on_off})", l.name())),
                "{chain}"
            );
            let warnings = r["warnings"].to_string();
            let memory = format!("memory, not storage: {}", l.name());
            if !direct_io {
                assert!(
                    warnings.contains(&format!("{memory} reaches its backing file {img}")),
                    "{warnings}"
                );
                assert!(r["extra"].get("limits_device").is_none(), "{r}");
                assert!(r["peak"].is_null(), "{r}");
                continue;
            }
            assert!(!warnings.contains(&memory), "{warnings}");
            match &below {
                Some(disk) => {
                    assert_eq!(dev["stack"]["below"][0]["name"], disk.as_str(), "{r}");
                    let lim = &r["extra"]["limits_device"];
                    assert_eq!(lim["name"], disk.as_str(), "{r}");
                    let rot = std::fs::read_to_string(
                        Path::new("/sys/block").join(disk).join("queue/rotational"),
                    )
                    .expect("rotational");
                    assert_eq!(lim["rotational"], rot.trim() != "0", "{r}");
                    assert!(chain.ends_with(&format!("→ {disk}")), "{chain}");
                }
                // The image's filesystem has no block device (overlay, btrfs): nothing below.
                None => assert!(r["extra"].get("limits_device").is_none(), "{r}"),
            }
        }
    }
}

/// An overlay whose upper directory is on a fresh tmpfs, unmounted (overlay, then tmpfs) on drop.
struct OverlayOnTmpfs {
    mnt: tempfile::TempDir,
    _lower: tempfile::TempDir,
    upper: Tmpfs,
}

impl OverlayOnTmpfs {
    fn mount() -> Option<Self> {
        let upper = Tmpfs::mount("64m", "")?;
        for d in ["upper", "work"] {
            std::fs::create_dir(upper.path().join(d)).expect("mkdir");
        }
        let lower = tempfile::tempdir().expect("tempdir");
        let mnt = tempfile::tempdir().expect("tempdir");
        let opts = format!(
            "lowerdir={},upperdir={},workdir={}",
            lower.path().display(),
            upper.path().join("upper").display(),
            upper.path().join("work").display()
        );
        let me = Self {
            mnt,
            _lower: lower,
            upper,
        };
        let ok = StdCommand::new("mount")
            .args(["-t", "overlay", "overlay", "-o", &opts])
            .arg(me.mnt.path())
            .status()
            .expect("mount")
            .success();
        assert!(ok, "mount -t overlay failed");
        Some(me)
    }
}

impl Drop for OverlayOnTmpfs {
    fn drop(&mut self) {
        let _ = StdCommand::new("umount").arg(self.mnt.path()).status();
    }
}

/// Issue 55 (2): an overlay over tmpfs is memory, as tmpfs is, and says which directory.
#[test]
fn an_overlay_over_tmpfs_is_labelled_memory_not_storage() {
    let Some(o) = OverlayOnTmpfs::mount() else {
        return;
    };
    let out = run_ok(
        "disk --op randread --iodepth 1 --size 4MiB --duration 40ms --repeat 1 --warmup 0 \
         --json - --dir",
        &[o.mnt.path().as_os_str()],
    );
    let doc = json_of(&out);
    let r = &doc["records"][0];
    assert_eq!(r["extra"]["fs_type"], "overlay", "{r}");
    let upper = o.upper.path().join("upper");
    let upper = upper.to_str().expect("utf-8 path");
    assert_eq!(r["extra"]["overlay_upper"]["upperdir"], upper, "{r}");
    assert_eq!(r["extra"]["overlay_upper"]["fs_type"], "tmpfs", "{r}");
    let warnings = r["warnings"].to_string();
    assert!(
        warnings.contains(&format!(
            "memory, not storage: an overlay whose upper directory {upper} is on tmpfs"
        )),
        "{warnings}"
    );
    assert!(leftovers(o.mnt.path()).is_empty());
}

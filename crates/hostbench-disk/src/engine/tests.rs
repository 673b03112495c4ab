//! Unit tests of `engine.rs`, kept in their own file so the module itself stays short
//! (issue 53: no source file over 1,000 lines).

use super::*;
use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;

const BS: usize = 4096;

/// splitmix64: a different, reproducible word for every byte position of the file.
fn mix(x: u64) -> u64 {
    hostbench_core::rng::mix64(x.wrapping_add(hostbench_core::rng::GAMMA))
}

fn pattern(offset: u64, buf: &mut [u8]) {
    for (i, b) in buf.iter_mut().enumerate() {
        let pos = offset + i as u64;
        *b = (mix(pos / 8) >> ((pos % 8) * 8)) as u8;
    }
}

/// Issues the given ops in order, writes the pattern, checks reads against it, and tracks
/// how many reads were outstanding at most (next() called but check() not yet).
struct Script {
    ops: Vec<IoOp>,
    next: usize,
    checked: usize,
    max_outstanding: usize,
    corrupt_expectation: bool,
}

impl Script {
    fn new(ops: Vec<IoOp>) -> Self {
        Self {
            ops,
            next: 0,
            checked: 0,
            max_outstanding: 0,
            corrupt_expectation: false,
        }
    }
}

impl Workload for Script {
    fn next(&mut self) -> Option<IoOp> {
        let op = *self.ops.get(self.next)?;
        self.next += 1;
        if !op.write {
            let outstanding = self.next - self.checked;
            self.max_outstanding = self.max_outstanding.max(outstanding);
        }
        Some(op)
    }

    fn fill(&mut self, op: &IoOp, buf: &mut [u8]) {
        assert_eq!(buf.len(), op.len);
        assert_eq!(buf.as_ptr() as usize % 4096, 0, "buffer not aligned");
        pattern(op.offset, buf);
    }

    fn check(&mut self, op: &IoOp, buf: &[u8]) -> Result<(), String> {
        self.checked += 1;
        let mut want = vec![0u8; op.len];
        pattern(op.offset, &mut want);
        if self.corrupt_expectation {
            want[0] ^= 0xff;
        }
        match buf.iter().zip(&want).position(|(a, b)| a != b) {
            None if buf.len() == op.len => Ok(()),
            None => Err(format!("got {} B, expected {}", buf.len(), op.len)),
            Some(i) => Err(format!("byte {i} differs")),
        }
    }
}

/// Block indices 0..n in a reproducible shuffled order.
fn shuffled(n: usize, seed: u64) -> Vec<u64> {
    let mut v: Vec<u64> = (0..n as u64).collect();
    hostbench_core::rng::SplitMix64::new(seed).shuffle(&mut v);
    v
}

fn ops(blocks: &[u64], len: usize, write: bool) -> Vec<IoOp> {
    blocks
        .iter()
        .map(|&b| IoOp {
            offset: b * BS as u64,
            len,
            write,
        })
        .collect()
}

fn job(fd: RawFd, iodepth: usize) -> EngineJob {
    EngineJob {
        interval: None,
        fd,
        block_bytes: BS,
        iodepth,
        mem_align: 4096,
        fdatasync_each_write: false,
        pages: Pages::Small,
    }
}

/// The engines to test: psync always, io_uring where this machine allows it.
fn engines() -> Vec<EngineKind> {
    match io_uring_status() {
        Ok(()) => vec![EngineKind::Psync, EngineKind::IoUring],
        Err(why) => {
            eprintln!("skipping io_uring engine tests: {why}");
            vec![EngineKind::Psync]
        }
    }
}

fn rw_file() -> File {
    tempfile::tempfile().expect("temp file")
}

fn assert_counts(st: &ThreadStats, reads: u64, writes: u64, len: usize) {
    assert_eq!(st.read_ios, reads);
    assert_eq!(st.write_ios, writes);
    assert_eq!(st.read_bytes, reads * len as u64);
    assert_eq!(st.write_bytes, writes * len as u64);
    assert_eq!(st.read_lat.count(), reads);
    assert_eq!(st.write_lat.count(), writes);
    if reads + writes > 0 {
        let (s, f) = (st.started.expect("started"), st.finished.expect("finished"));
        assert!(f >= s);
    }
}

fn write_then_read(kind: EngineKind, iodepth: usize, write_order: &[u64], read_order: &[u64]) {
    let f = rw_file();
    let j = job(f.as_raw_fd(), iodepth);
    let mut w = Script::new(ops(write_order, BS, true));
    let st = run_thread(kind, &j, &mut w).expect("write phase");
    assert_counts(&st, 0, write_order.len() as u64, BS);
    assert_eq!(
        f.metadata().expect("metadata").len(),
        (write_order.iter().max().expect("blocks") + 1) * BS as u64
    );

    let mut r = Script::new(ops(read_order, BS, false));
    let st = run_thread(kind, &j, &mut r).expect("read phase");
    assert_counts(&st, read_order.len() as u64, 0, BS);
    assert_eq!(r.checked, read_order.len(), "every read was checked");
    let cap = if kind == EngineKind::Psync {
        1
    } else {
        iodepth
    };
    assert!(r.max_outstanding <= cap, "{} > {cap}", r.max_outstanding);
    if kind == EngineKind::IoUring && read_order.len() >= iodepth {
        // The queue is filled before the first wait, so the depth is reached every time.
        assert_eq!(r.max_outstanding, iodepth);
    }
}

#[test]
fn sequential_write_then_read_back_at_depth_1_and_8() {
    let blocks: Vec<u64> = (0..32).collect();
    for kind in engines() {
        for depth in [1, 8] {
            write_then_read(kind, depth, &blocks, &blocks);
        }
    }
}

#[test]
fn random_offsets_write_then_read_back() {
    let w = shuffled(48, 1);
    let r = shuffled(48, 2);
    for kind in engines() {
        for depth in [1, 8] {
            write_then_read(kind, depth, &w, &r);
        }
    }
}

#[test]
fn mixed_reads_and_writes_and_partial_lengths_are_counted_per_direction() {
    for kind in engines() {
        let f = rw_file();
        let j = job(f.as_raw_fd(), 8);
        let prefill: Vec<u64> = (0..16).collect();
        run_thread(kind, &j, &mut Script::new(ops(&prefill, BS, true))).expect("prefill");
        // Alternate a 512 B write and a 512 B read of a different block: counts must split.
        let mut mixed = Vec::new();
        for b in 0..8u64 {
            mixed.push(IoOp {
                offset: b * BS as u64,
                len: 512,
                write: true,
            });
            mixed.push(IoOp {
                offset: (b + 8) * BS as u64,
                len: 512,
                write: false,
            });
        }
        let st = run_thread(kind, &j, &mut Script::new(mixed)).expect("mixed");
        assert_counts(&st, 8, 8, 512);
    }
}

#[test]
fn fdatasync_each_write_still_writes_everything() {
    for kind in engines() {
        let f = rw_file();
        let mut j = job(f.as_raw_fd(), 4);
        j.fdatasync_each_write = true;
        let blocks: Vec<u64> = (0..8).collect();
        let st = run_thread(kind, &j, &mut Script::new(ops(&blocks, BS, true))).expect("write");
        assert_counts(&st, 0, 8, BS);
        let mut r = Script::new(ops(&blocks, BS, false));
        run_thread(kind, &j, &mut r).expect("read back");
        assert_eq!(r.checked, 8);
    }
}

#[test]
fn writing_to_a_read_only_fd_fails_cleanly_naming_the_write() {
    let tmp = tempfile::NamedTempFile::new().expect("temp file");
    let ro = File::open(tmp.path()).expect("open read-only");
    let blocks: Vec<u64> = (0..16).collect();
    for kind in engines() {
        for depth in [1, 8] {
            let j = job(ro.as_raw_fd(), depth);
            let err = run_thread(kind, &j, &mut Script::new(ops(&blocks, BS, true)))
                .expect_err("writing a read-only fd must fail");
            match err {
                BenchError::Failed(m) => {
                    assert!(m.starts_with("write of 4096 B at offset "), "{m}");
                    assert!(m.contains("Bad file descriptor"), "{m}");
                }
                other => panic!("{kind}: expected Failed, got {other:?}"),
            }
        }
    }
}

#[test]
fn a_full_device_reports_no_space_left() {
    // /dev/full fails every write with ENOSPC: the same error a filling disk gives mid-run.
    let Ok(full) = OpenOptions::new().write(true).open("/dev/full") else {
        eprintln!("skipping ENOSPC test: /dev/full cannot be opened");
        return;
    };
    for kind in engines() {
        for depth in [1, 4] {
            let j = job(full.as_raw_fd(), depth);
            let err = run_thread(kind, &j, &mut Script::new(ops(&[0, 1, 2, 3], BS, true)))
                .expect_err("writing /dev/full must fail");
            let m = err.to_string();
            assert!(matches!(err, BenchError::Failed(_)), "{m}");
            assert!(m.contains("No space left on device"), "{kind}: {m}");
        }
    }
}

#[test]
fn o_direct_works_with_the_engine_buffers() {
    use std::os::unix::fs::OpenOptionsExt;
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("direct");
    let f = match OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_DIRECT)
        .open(&path)
    {
        Ok(f) => f,
        Err(e) => {
            eprintln!("skipping O_DIRECT test: {e}");
            return;
        }
    };
    let blocks = shuffled(16, 3);
    for kind in engines() {
        let j = job(f.as_raw_fd(), 4);
        let st = run_thread(kind, &j, &mut Script::new(ops(&blocks, BS, true)));
        match st {
            Ok(st) => assert_counts(&st, 0, 16, BS),
            // Some filesystems accept the O_DIRECT open but reject the first I/O.
            Err(e) if e.to_string().contains("Invalid argument") => {
                eprintln!("skipping O_DIRECT test: {e}");
                return;
            }
            Err(e) => panic!("{kind}: {e}"),
        }
        let mut r = Script::new(ops(&blocks, BS, false));
        run_thread(kind, &j, &mut r).expect("direct read back");
        assert_eq!(r.checked, 16);
    }
}

#[test]
fn reading_past_the_end_of_a_short_file_is_an_end_of_file_error() {
    let mut f = rw_file();
    std::io::Write::write_all(&mut f, &[7u8; 1000]).expect("write short file");
    for kind in engines() {
        for depth in [1, 8] {
            let j = job(f.as_raw_fd(), depth);
            // The first read is short (1000 of 4096 B): the engine must ask for the rest and
            // then see end of file, not count a partial op.
            let err = run_thread(kind, &j, &mut Script::new(ops(&[0, 1], BS, false)))
                .expect_err("read past EOF must fail");
            let m = err.to_string();
            assert!(m.contains("end of file"), "{kind}: {m}");
            assert!(m.starts_with("read of 4096 B at offset "), "{kind}: {m}");
            // Alone, the op at 0 shows that the short first part was kept and continued.
            let err = run_thread(kind, &j, &mut Script::new(ops(&[0], BS, false)))
                .expect_err("read past EOF must fail");
            let m = err.to_string();
            assert!(m.contains("end of file after 1000 B"), "{kind}: {m}");
        }
    }
}

#[test]
fn a_failed_data_check_is_a_validation_error() {
    for kind in engines() {
        let f = rw_file();
        let j = job(f.as_raw_fd(), 8);
        let blocks: Vec<u64> = (0..16).collect();
        run_thread(kind, &j, &mut Script::new(ops(&blocks, BS, true))).expect("write");
        let mut r = Script::new(ops(&blocks, BS, false));
        r.corrupt_expectation = true;
        let err = run_thread(kind, &j, &mut r).expect_err("check must fail");
        assert!(matches!(err, BenchError::Validation(_)), "{err:?}");
    }
}

#[test]
fn bad_jobs_and_ops_are_invalid_input() {
    let f = rw_file();
    let fd = f.as_raw_fd();
    let bad_jobs = [
        EngineJob {
            interval: None,
            block_bytes: 0,
            ..job(fd, 1)
        },
        job(fd, 0),
        EngineJob {
            interval: None,
            mem_align: 3000,
            ..job(fd, 1)
        },
        job(-1, 1),
    ];
    for kind in engines() {
        for j in &bad_jobs {
            let err = run_thread(kind, j, &mut Script::new(vec![])).expect_err("bad job");
            assert!(matches!(err, BenchError::InvalidInput(_)), "{j:?}: {err:?}");
        }
        // An op larger than the buffer, after others are already in flight.
        let mut script = ops(&[0, 1, 2], BS, true);
        script.push(IoOp {
            offset: 0,
            len: BS + 1,
            write: true,
        });
        let err = run_thread(kind, &job(fd, 8), &mut Script::new(script)).expect_err("op");
        let m = err.to_string();
        assert!(matches!(err, BenchError::InvalidInput(_)), "{m}");
        assert!(m.contains("4097 B"), "{m}");
    }
}

#[test]
fn an_empty_workload_completes_with_nothing_recorded() {
    let f = rw_file();
    for kind in engines() {
        let st = run_thread(kind, &job(f.as_raw_fd(), 4), &mut Script::new(vec![])).expect("empty");
        assert_counts(&st, 0, 0, BS);
        assert!(st.started.is_none() && st.finished.is_none());
        assert_eq!(st.elapsed(), Duration::ZERO);
    }
}

#[test]
fn large_alignment_is_honoured() {
    let f = rw_file();
    let j = EngineJob {
        interval: None,
        mem_align: 1 << 16,
        block_bytes: 1000,
        ..job(f.as_raw_fd(), 3)
    };
    for pages in [Pages::Small, Pages::Huge] {
        let mut pool = BufPool::new(j.iodepth, j.block_bytes, j.align(), pages).expect("pool");
        for i in 0..3 {
            assert_eq!(pool.ptr(i) as usize % (1 << 16), 0);
        }
    }
    // Beyond the region's own 2 MiB alignment nothing can be promised: refused, not ignored.
    let err = BufPool::new(2, 4096, 4 << 20, Pages::Small)
        .err()
        .expect("4 MiB alignment");
    assert!(matches!(err, BenchError::InvalidInput(_)), "{err}");
}

#[test]
fn buffer_pools_report_their_pages_and_huge_pools_fill_whole_huge_pages() {
    // 3 x 1000 B at 4 KiB alignment: 12 KiB on small pages, one whole 2 MiB on huge ones.
    let small = BufPool::new(3, 1000, 4096, Pages::Small).expect("small");
    let (bytes, huge) = small.memory();
    assert_eq!(bytes, 3 * 4096);
    if let Some(h) = huge {
        assert_eq!(h, 0, "a 4k pool got huge pages");
    }
    let big = BufPool::new(3, 1000, 4096, Pages::Huge).expect("huge");
    let (bytes, huge) = big.memory();
    assert_eq!(bytes, 2 << 20);
    // Granted or not depends on the machine (THP mode, fragmentation); never more than the pool.
    assert!(huge.unwrap_or(0) <= bytes);
    // Both engines move data through either kind of pool.
    let f = rw_file();
    for kind in engines() {
        for pages in [Pages::Small, Pages::Huge] {
            let j = EngineJob {
                pages,
                ..job(f.as_raw_fd(), 4)
            };
            let blocks: Vec<u64> = (0..8).collect();
            let st = run_thread(kind, &j, &mut Script::new(ops(&blocks, BS, true))).expect("write");
            assert_counts(&st, 0, 8, BS);
            assert!(st.buffer_bytes >= BS as u64);
            // Every block read back and checked against what was written.
            let mut r = Script::new(ops(&blocks, BS, false));
            let st = run_thread(kind, &j, &mut r).expect("read");
            assert_counts(&st, 8, 0, BS);
            assert_eq!(r.checked, 8);
        }
    }
}

#[test]
fn engine_names_round_trip_and_unknown_names_are_rejected() {
    for kind in [EngineKind::IoUring, EngineKind::Psync] {
        assert_eq!(EngineKind::parse(kind.name()).expect("own name"), kind);
    }
    for (s, k) in [
        ("io-uring", EngineKind::IoUring),
        ("uring", EngineKind::IoUring),
        ("IO_URING", EngineKind::IoUring),
        ("sync", EngineKind::Psync),
    ] {
        assert_eq!(s.parse::<EngineKind>().expect("alias"), k);
    }
    let err = EngineKind::parse("libaio").expect_err("unknown");
    assert!(matches!(&err, BenchError::InvalidInput(m) if m.contains("'libaio'")));
}

#[test]
fn io_uring_status_is_stable_and_unsupported_maps_to_unsupported() {
    assert_eq!(io_uring_status(), io_uring_status());
    if let Err(why) = io_uring_status() {
        let f = rw_file();
        let err = run_thread(
            EngineKind::IoUring,
            &job(f.as_raw_fd(), 1),
            &mut Script::new(vec![]),
        )
        .expect_err("io_uring unavailable");
        assert!(matches!(err, BenchError::Unsupported(m) if m == why));
    }
}

#[test]
fn permission_denied_names_the_cause() {
    let m = setup_error_reason(&io::Error::from_raw_os_error(libc::ENOSYS));
    assert!(m.contains("not implemented"), "{m}");
    let m = setup_error_reason(&io::Error::from_raw_os_error(libc::EPERM));
    assert!(
        m.contains("io_uring_disabled") || m.contains("seccomp"),
        "{m}"
    );
}

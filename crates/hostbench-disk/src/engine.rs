//! I/O engines: io_uring (default where the kernel allows it) and psync (a pread/pwrite loop per
//! thread), behind one entry point; the engine that actually ran is recorded.
//!
//! Why two engines: io_uring is how a single thread keeps a queue depth above one, which is what
//! NVMe needs to show its IOPS, but it is often unavailable (Docker's default seccomp profile,
//! `kernel.io_uring_disabled`, old kernels). psync is fio's default engine and works everywhere,
//! so it is both the fallback and the like-for-like comparison with `fio --ioengine=psync`.
//!
//! Both engines follow the same rules so that their numbers mean the same thing:
//! - buffers are allocated here, aligned for O_DIRECT, faulted in before the run and on the
//!   page size asked for (huge by default, see `BufPool`), one per queue slot;
//! - a write's data is produced (`Workload::fill`) before its clock starts, and a read's data is
//!   checked (`Workload::check`) after its clock stops, so data generation and verification never
//!   count as device latency;
//! - short transfers are completed, so every counted op moved exactly `len` bytes;
//! - latency runs from just before submission to the completion being seen, and with
//!   `fdatasync_each_write` it includes the flush, as a "synchronous write" does in classic tools.

use std::io;
use std::mem::ManuallyDrop;
use std::os::fd::RawFd;
use std::str::FromStr;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use hostbench_core::buffer::{self, Pages, Region};
use hostbench_core::BenchError;
use io_uring::{opcode, types, IoUring};

use crate::histogram::LatencyHist;

hostbench_core::named_enum! {
    /// Which engine submits the I/O.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum EngineKind("engine") {
        IoUring = "io_uring" | "io-uring" | "uring",
        Psync = "psync" | "sync",
    }
}

impl FromStr for EngineKind {
    type Err = BenchError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

/// One I/O to issue: `len` bytes at `offset`, read or write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IoOp {
    pub offset: u64,
    pub len: usize,
    pub write: bool,
}

impl IoOp {
    fn verb(&self) -> &'static str {
        if self.write {
            "write"
        } else {
            "read"
        }
    }
}

/// Where the I/Os come from and what their data is. The engine asks for the next I/O until
/// `next` returns `None` (amount done or deadline reached), fills a write's buffer with `fill`
/// just before submitting it, and hands every completed read's data to `check`.
pub trait Workload {
    fn next(&mut self) -> Option<IoOp>;
    fn fill(&mut self, op: &IoOp, buf: &mut [u8]);
    fn check(&mut self, op: &IoOp, buf: &[u8]) -> Result<(), String>;
}

/// What one thread did.
#[derive(Debug, Clone, Default)]
pub struct ThreadStats {
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub read_ios: u64,
    pub write_ios: u64,
    /// Completion latency (submit to completion) of reads and of writes.
    pub read_lat: LatencyHist,
    pub write_lat: LatencyHist,
    /// First submission to last completion.
    pub started: Option<Instant>,
    pub finished: Option<Instant>,
    /// Bytes completed in each interval of `interval` since `started` (empty when no interval
    /// was asked for): the per-interval series fio's bandwidth logs give.
    pub interval: Option<Duration>,
    pub interval_bytes: Vec<u64>,
    /// The I/O buffers: bytes, and bytes on transparent huge pages (`None`: unknown).
    pub buffer_bytes: u64,
    pub buffer_huge_bytes: Option<u64>,
}

impl ThreadStats {
    fn for_job(job: &EngineJob, pool: &BufPool) -> Self {
        let (buffer_bytes, buffer_huge_bytes) = pool.memory();
        Self {
            interval: job.interval,
            buffer_bytes,
            buffer_huge_bytes,
            ..Self::default()
        }
    }

    /// First submission to last completion; zero when nothing completed.
    pub fn elapsed(&self) -> Duration {
        match (self.started, self.finished) {
            (Some(s), Some(f)) => f.saturating_duration_since(s),
            _ => Duration::ZERO,
        }
    }

    fn record(&mut self, op: &IoOp, lat: Duration, done: Instant) {
        if let (Some(iv), Some(start)) = (self.interval, self.started) {
            let nanos = done.saturating_duration_since(start).as_nanos() / iv.as_nanos().max(1);
            let slot = usize::try_from(nanos).unwrap_or(usize::MAX).min(1 << 20);
            if self.interval_bytes.len() <= slot {
                self.interval_bytes.resize(slot + 1, 0);
            }
            self.interval_bytes[slot] += op.len as u64;
        }
        // u64 nanoseconds last 584 years; saturate rather than wrap on a nonsense clock.
        let ns = u64::try_from(lat.as_nanos()).unwrap_or(u64::MAX);
        if op.write {
            self.write_ios += 1;
            self.write_bytes += op.len as u64;
            self.write_lat.record_ns(ns);
        } else {
            self.read_ios += 1;
            self.read_bytes += op.len as u64;
            self.read_lat.record_ns(ns);
        }
    }
}

/// One thread's job: the file and how to drive it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineJob {
    /// Length of the per-interval throughput buckets (`ThreadStats::interval_bytes`); `None`: off.
    pub interval: Option<Duration>,
    /// An open file; the caller owns it (opened with O_DIRECT or not) and keeps it open for the
    /// whole call.
    pub fd: RawFd,
    /// The size of each buffer, so the largest `len` any op may have.
    pub block_bytes: usize,
    /// Ops kept in flight by io_uring; psync always has exactly one (as fio's psync does).
    pub iodepth: usize,
    /// Buffer address alignment; raised to at least 4096 (O_DIRECT needs the device's DMA
    /// alignment, and a page covers every common device). Must be a power of two.
    pub mem_align: usize,
    /// Classic synchronous writes: fdatasync after each completed write, counted inside that
    /// write's latency.
    pub fdatasync_each_write: bool,
    /// Page size asked for the I/O buffers (see `BufPool` for why it matters).
    pub pages: Pages,
}

/// Linux moves at most this much in one read or write (MAX_RW_COUNT); larger buffers would only
/// ever be filled in pieces.
const MAX_BLOCK_BYTES: usize = 0x7fff_f000;
/// io_uring's limit on ring entries (IORING_MAX_ENTRIES).
const MAX_IODEPTH: usize = 32_768;
/// The floor for buffer alignment: one page satisfies O_DIRECT on every common device.
const MIN_ALIGN: usize = 4096;

impl EngineJob {
    /// Check the job before any memory is allocated; errors name the bad value.
    pub fn validate(&self) -> Result<(), BenchError> {
        let bad = |m: String| Err(BenchError::InvalidInput(m));
        if self.fd < 0 {
            return bad(format!("invalid file descriptor {}", self.fd));
        }
        if self.block_bytes == 0 || self.block_bytes > MAX_BLOCK_BYTES {
            return bad(format!(
                "block size {} B is out of range (1 B to {MAX_BLOCK_BYTES} B)",
                self.block_bytes
            ));
        }
        if self.iodepth == 0 || self.iodepth > MAX_IODEPTH {
            return bad(format!(
                "iodepth {} is out of range (1 to {MAX_IODEPTH})",
                self.iodepth
            ));
        }
        if !self.mem_align.is_power_of_two() {
            return bad(format!(
                "buffer alignment {} B is not a power of two",
                self.mem_align
            ));
        }
        let stride = self.block_bytes.checked_next_multiple_of(self.align());
        if stride.and_then(|s| s.checked_mul(self.iodepth)).is_none() {
            return bad(format!(
                "{} buffers of {} B do not fit in memory",
                self.iodepth, self.block_bytes
            ));
        }
        Ok(())
    }

    fn align(&self) -> usize {
        self.mem_align.max(MIN_ALIGN)
    }
}

/// Why io_uring cannot be used here (EPERM from seccomp, `kernel.io_uring_disabled`, ENOSYS,
/// missing Read/Write/Fsync opcodes), or `Ok`. Probed once per process: the answer cannot change
/// while we run, and every benchmark thread asks.
pub fn io_uring_status() -> Result<(), String> {
    static STATUS: OnceLock<Result<(), String>> = OnceLock::new();
    STATUS.get_or_init(probe_io_uring).clone()
}

fn probe_io_uring() -> Result<(), String> {
    let ring = IoUring::new(2).map_err(|e| setup_error_reason(&e))?;
    let mut probe = io_uring::Probe::new();
    ring.submitter().register_probe(&mut probe).map_err(|e| {
        format!("the kernel cannot report io_uring opcodes ({e}); Read/Write need Linux 5.6")
    })?;
    let needed = [
        (opcode::Read::CODE, "Read"),
        (opcode::Write::CODE, "Write"),
        (opcode::Fsync::CODE, "Fsync"),
    ];
    let missing: Vec<&str> = needed
        .iter()
        .filter(|(code, _)| !probe.is_supported(*code))
        .map(|(_, name)| *name)
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "the kernel's io_uring lacks the {} opcode(s) (Read/Write need Linux 5.6)",
            missing.join(", ")
        ))
    }
}

/// Turn an `io_uring_setup` failure into the reason a person can act on.
fn setup_error_reason(e: &io::Error) -> String {
    let sysctl = std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled")
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok());
    match e.raw_os_error() {
        Some(libc::ENOSYS) => {
            "io_uring_setup is not implemented (kernel older than 5.1 or built without io_uring)"
                .to_owned()
        }
        Some(libc::EPERM) => match sysctl {
            Some(2) => "io_uring is disabled by sysctl kernel.io_uring_disabled=2".to_owned(),
            Some(1) => "io_uring is restricted by sysctl kernel.io_uring_disabled=1 \
                        (only root or members of kernel.io_uring_group)"
                .to_owned(),
            _ => "io_uring_setup was refused (EPERM): most likely a seccomp filter such as \
                  Docker's default profile"
                .to_owned(),
        },
        Some(libc::ENOMEM) | Some(libc::ENOBUFS) => format!(
            "io_uring_setup failed ({e}): the ring does not fit RLIMIT_MEMLOCK on this kernel"
        ),
        _ => format!("io_uring_setup failed: {e}"),
    }
}

/// Run one thread's workload to its end with the given engine.
///
/// Errors: `InvalidInput` for a bad job or an op that does not fit it, `Unsupported` when
/// io_uring was asked for but cannot run here (the caller decides whether to fall back),
/// `Failed` for an I/O error or unexpected end of file (naming the op), `Validation` when
/// `Workload::check` rejects data read back.
pub fn run_thread(
    kind: EngineKind,
    job: &EngineJob,
    w: &mut dyn Workload,
) -> Result<ThreadStats, BenchError> {
    job.validate()?;
    match kind {
        EngineKind::Psync => run_psync(job, w),
        EngineKind::IoUring => {
            io_uring_status().map_err(BenchError::Unsupported)?;
            run_uring(job, w)
        }
    }
}

/// Reject an op the buffers cannot hold, or whose range does not fit `off_t`.
fn check_op(op: &IoOp, job: &EngineJob) -> Result<(), BenchError> {
    if op.len == 0 || op.len > job.block_bytes {
        return Err(BenchError::InvalidInput(format!(
            "{} of {} B at offset {}: length must be 1 to {} B (the buffer size)",
            op.verb(),
            op.len,
            op.offset,
            job.block_bytes
        )));
    }
    let end = op.offset.checked_add(op.len as u64);
    if end.is_none_or(|e| e > i64::MAX as u64) {
        return Err(BenchError::InvalidInput(format!(
            "{} of {} B at offset {}: beyond the largest file offset",
            op.verb(),
            op.len,
            op.offset
        )));
    }
    Ok(())
}

fn io_failed(op: &IoOp, e: io::Error) -> BenchError {
    BenchError::Failed(format!(
        "{} of {} B at offset {}: {e}",
        op.verb(),
        op.len,
        op.offset
    ))
}

fn sync_failed(op: &IoOp, e: io::Error) -> BenchError {
    BenchError::Failed(format!(
        "fdatasync after write of {} B at offset {}: {e}",
        op.len, op.offset
    ))
}

/// A transfer that moved 0 bytes before the op was complete.
fn no_progress(op: &IoOp, done: usize) -> BenchError {
    if op.write {
        BenchError::Failed(format!(
            "write of {} B at offset {}: the kernel accepted no data after {done} B",
            op.len, op.offset
        ))
    } else {
        BenchError::Failed(format!(
            "read of {} B at offset {}: unexpected end of file after {done} B \
             (the file is shorter than the range read)",
            op.len, op.offset
        ))
    }
}

fn check_failed(op: &IoOp, msg: String) -> BenchError {
    BenchError::Validation(format!(
        "read of {} B at offset {}: {msg}",
        op.len, op.offset
    ))
}

/// `count` buffers of `len` bytes, each starting on an `align` boundary, in one anonymous
/// mapping with the job's page policy, faulted in before any I/O and unmapped on drop (including
/// every early return on error).
///
/// Why the page size matters to a disk benchmark: the kernel hands a buffer to the device as one
/// DMA segment per physically contiguous run. On 4 KiB pages a 1 MiB buffer is usually 100–256
/// runs, so a request has up to 256 segments, which is more than some devices take in one request
/// (virtio-blk: 254, split into two), and without indirect descriptors each segment also holds a
/// slot of the device's ring, so a few such requests fill it and the queue depth asked for never
/// reaches the device. How scattered the pages are is the allocator's luck, different in every
/// run and every process: on the test VM fio's own 1 MiB QD 8 reads ranged from 0.9 to 1.9 GB/s
/// between runs for this reason alone, and with huge-page buffers (`iomem=shmhuge`) held at
/// 2.2–2.4 GB/s. On huge pages each buffer is one run, so the device sees the block size and
/// queue depth that were asked for.
struct BufPool {
    region: Region,
    stride: usize,
    count: usize,
}

impl BufPool {
    fn new(count: usize, len: usize, align: usize, pages: Pages) -> Result<Self, BenchError> {
        let too_big = || {
            BenchError::InvalidInput(format!(
                "{count} buffers of {len} B aligned to {align} B do not fit in memory"
            ))
        };
        // Rounding each buffer up to the alignment keeps every buffer's start aligned, not
        // just the first (the region itself starts on a 2 MiB boundary, beyond any DMA rule).
        if align > buffer::ALIGN {
            return Err(too_big());
        }
        let stride = len.checked_next_multiple_of(align).ok_or_else(too_big)?;
        let mut size = stride.checked_mul(count).ok_or_else(too_big)?;
        if pages == Pages::Huge {
            // A huge page is only granted for a whole aligned 2 MiB inside the advised range.
            size = size
                .checked_next_multiple_of(buffer::ALIGN)
                .ok_or_else(too_big)?;
        }
        let mut region = Region::new(size, pages)?;
        // Fault every page in now, so no page fault lands in a timed I/O (and a huge-page
        // request is granted or refused before the run, where `huge_bytes` can see it).
        region.touch();
        Ok(Self {
            region,
            stride,
            count,
        })
    }

    /// Bytes of the pool and how many of them the kernel put on transparent huge pages (`None`:
    /// unknown, /proc/self/smaps unreadable).
    fn memory(&self) -> (u64, Option<u64>) {
        (self.region.len() as u64, self.region.huge_bytes())
    }

    /// Start of buffer `i`; a raw pointer, because the kernel writes through it while Rust must
    /// hold no reference to that memory.
    fn ptr(&mut self, i: usize) -> *mut u8 {
        assert!(i < self.count, "buffer index {i} out of {}", self.count);
        // SAFETY: i < count, so i * stride lies inside the region of at least count * stride bytes.
        unsafe { self.region.as_mut_ptr().add(i * self.stride) }
    }

    /// # Safety
    /// No I/O that reads or writes buffer `i` may be in flight while the slice lives.
    unsafe fn slice(&mut self, i: usize, len: usize) -> &[u8] {
        assert!(len <= self.stride);
        // SAFETY: ptr(i) .. ptr(i) + len lies inside the region (len <= stride), which is mapped
        // and initialised (anonymous memory); the caller guarantees the kernel is not writing it.
        unsafe { std::slice::from_raw_parts(self.ptr(i), len) }
    }

    /// # Safety
    /// No I/O that reads or writes buffer `i` may be in flight while the slice lives.
    unsafe fn slice_mut(&mut self, i: usize, len: usize) -> &mut [u8] {
        assert!(len <= self.stride);
        // SAFETY: as in `slice`; `&mut self` rules out any other Rust reference into the pool.
        unsafe { std::slice::from_raw_parts_mut(self.ptr(i), len) }
    }
}

// ---------------------------------------------------------------------------------------------
// psync
// ---------------------------------------------------------------------------------------------

/// One op at a time with pread/pwrite. `iodepth` is ignored beyond 1, exactly as fio's psync
/// ignores it: a synchronous call cannot have a second op in flight. Parallelism comes from
/// more threads.
fn run_psync(job: &EngineJob, w: &mut dyn Workload) -> Result<ThreadStats, BenchError> {
    let mut pool = BufPool::new(1, job.block_bytes, job.align(), job.pages)?;
    let mut st = ThreadStats::for_job(job, &pool);
    while let Some(op) = w.next() {
        check_op(&op, job)?;
        // SAFETY: psync I/O is synchronous, so nothing is in flight between calls.
        let buf = unsafe { pool.slice_mut(0, op.len) };
        if op.write {
            w.fill(&op, buf);
        }
        let t0 = Instant::now();
        st.started.get_or_insert(t0);
        transfer_sync(job.fd, &op, buf)?;
        if op.write && job.fdatasync_each_write {
            fdatasync(job.fd).map_err(|e| sync_failed(&op, e))?;
        }
        let t1 = Instant::now();
        st.finished = Some(t1);
        st.record(&op, t1 - t0, t1);
        if !op.write {
            w.check(&op, buf).map_err(|m| check_failed(&op, m))?;
        }
    }
    Ok(st)
}

/// pread/pwrite the whole op, continuing after short transfers and signals.
fn transfer_sync(fd: RawFd, op: &IoOp, buf: &mut [u8]) -> Result<(), BenchError> {
    let mut done = 0usize;
    while done < op.len {
        let rest = &mut buf[done..op.len];
        // check_op keeps offset + len <= i64::MAX, so this cannot wrap.
        let off = (op.offset + done as u64) as libc::off_t;
        // SAFETY: `rest` is a live, exclusively borrowed region of rest.len() bytes; the kernel
        // touches only that region and only for the duration of the call.
        let n = unsafe {
            if op.write {
                libc::pwrite(fd, rest.as_ptr().cast(), rest.len(), off)
            } else {
                libc::pread(fd, rest.as_mut_ptr().cast(), rest.len(), off)
            }
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(io_failed(op, e));
        }
        if n == 0 {
            return Err(no_progress(op, done));
        }
        done += n as usize;
    }
    Ok(())
}

fn fdatasync(fd: RawFd) -> io::Result<()> {
    loop {
        // SAFETY: fdatasync takes only a descriptor; an invalid one gives EBADF, not UB.
        if unsafe { libc::fdatasync(fd) } == 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// io_uring
// ---------------------------------------------------------------------------------------------

/// The ring and the buffers the kernel may be using, tied together so that no exit path (error
/// return or panic unwinding out of a `Workload` method) can free a buffer under an in-flight op.
struct Uring {
    ring: IoUring,
    /// Freed by our `Drop` only once nothing is in flight; leaked if that cannot be established.
    bufs: ManuallyDrop<BufPool>,
    /// SQEs pushed whose CQE has not been reaped yet.
    in_flight: usize,
    fd: RawFd,
}

impl Drop for Uring {
    fn drop(&mut self) {
        if self.drain() {
            // SAFETY: drain() reaped a completion for every SQE ever pushed, so the kernel holds
            // no pointer into the pool any more; bufs is dropped exactly once, here.
            unsafe { ManuallyDrop::drop(&mut self.bufs) }
        }
        // Otherwise the pool is deliberately leaked. Freeing it would be a use-after-free: the
        // kernel may still read or write those buffers (closing the ring does not wait for
        // in-flight requests; they finish asynchronously), so leaking is the sound choice.
    }
}

impl Uring {
    /// Wait for every in-flight op, discarding results. True when nothing is left in flight.
    fn drain(&mut self) -> bool {
        let mut transient = 0u32;
        while self.in_flight > 0 {
            if let Err(e) = self.ring.submit_and_wait(1) {
                let again = matches!(
                    e.raw_os_error(),
                    Some(libc::EINTR) | Some(libc::EAGAIN) | Some(libc::EBUSY)
                );
                transient += 1;
                if !again || transient > 10_000 {
                    return false;
                }
                continue;
            }
            let n = self.ring.completion().count();
            self.in_flight = self.in_flight.saturating_sub(n);
        }
        true
    }

    /// Hand every queued SQE to the kernel without waiting.
    fn submit(&mut self) -> Result<(), BenchError> {
        loop {
            match self.ring.submit() {
                Ok(_) => return Ok(()),
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                Err(e) => return Err(BenchError::Failed(format!("io_uring_enter: {e}"))),
            }
        }
    }

    /// Submit everything queued and wait for at least one completion.
    fn submit_and_wait(&mut self) -> Result<(), BenchError> {
        loop {
            match self.ring.submit_and_wait(1) {
                Ok(_) => return Ok(()),
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                Err(e) => return Err(BenchError::Failed(format!("io_uring_enter: {e}"))),
            }
        }
    }

    fn push(&mut self, sqe: &io_uring::squeue::Entry) -> Result<(), BenchError> {
        // SAFETY: every SQE we build points into `self.bufs` (or at no memory, for Fsync). That
        // buffer stays allocated until its completion is reaped: a slot is not reused or
        // touched from Rust until its CQE has been seen, and `Drop` waits for all in-flight
        // SQEs before freeing the pool (or leaks it).
        unsafe { self.ring.submission().push(sqe) }.map_err(|_| {
            // Cannot happen: one SQE per slot and the ring has at least as many entries.
            BenchError::Failed("io_uring submission queue is full".to_owned())
        })?;
        self.in_flight += 1;
        Ok(())
    }

    /// Queue the rest of `op` (from byte `done`) on slot `idx`.
    fn push_transfer(&mut self, idx: usize, op: &IoOp, done: usize) -> Result<(), BenchError> {
        // SAFETY: done < op.len <= block_bytes <= stride, so the pointer stays inside buffer idx.
        let ptr = unsafe { self.bufs.ptr(idx).add(done) };
        // validate() caps block_bytes at MAX_BLOCK_BYTES, which fits u32.
        let len = (op.len - done) as u32;
        let off = op.offset + done as u64;
        let fd = types::Fd(self.fd);
        let sqe = if op.write {
            opcode::Write::new(fd, ptr, len).offset(off).build()
        } else {
            opcode::Read::new(fd, ptr, len).offset(off).build()
        };
        self.push(&sqe.user_data(idx as u64))
    }

    fn push_datasync(&mut self, idx: usize) -> Result<(), BenchError> {
        let sqe = opcode::Fsync::new(types::Fd(self.fd))
            .flags(types::FsyncFlags::DATASYNC)
            .build()
            .user_data(idx as u64);
        self.push(&sqe)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// The read or write (or the remainder after a short one) is in flight.
    Transfer,
    /// The write completed; its fdatasync is in flight.
    Sync,
}

/// An op occupying one buffer slot until it completes.
#[derive(Debug, Clone, Copy)]
struct Slot {
    op: IoOp,
    /// Bytes moved so far (short transfers are resubmitted for the remainder).
    done: usize,
    /// Just before the submit call that handed the op's first SQE to the kernel.
    start: Instant,
    phase: Phase,
}

/// Keep up to `iodepth` ops in flight on one ring. Plain Read/Write with unregistered buffers
/// and files, like fio's io_uring defaults, so the comparison with fio is like for like.
///
/// Latency runs from the submit call that hands an op to the kernel to the return of the wait in
/// which its final completion was seen; fill() and check() of other ops stay outside it.
///
/// The fdatasync of a synchronous write is submitted after the write has fully completed rather
/// than linked to it: a linked chain is cut by a short write, and the write's latency must
/// include the flush either way.
fn run_uring(job: &EngineJob, w: &mut dyn Workload) -> Result<ThreadStats, BenchError> {
    // validate() keeps iodepth <= 32768, a power of two at most, which fits u32.
    let entries = job.iodepth.next_power_of_two() as u32;
    // One thread submits and reaps, so let the kernel run completion work when we ask for
    // events instead of interrupting us for it (DEFER_TASKRUN, 6.1+, needs SINGLE_ISSUER; fio
    // asks for the same). Older kernels reject the flags: fall back to a plain ring.
    let ring = IoUring::builder()
        .setup_coop_taskrun()
        .setup_single_issuer()
        .setup_defer_taskrun()
        .build(entries)
        .or_else(|_| IoUring::new(entries))
        .map_err(|e| {
            BenchError::Unsupported(format!(
                "io_uring with {entries} entries: {}",
                setup_error_reason(&e)
            ))
        })?;
    let bufs = BufPool::new(job.iodepth, job.block_bytes, job.align(), job.pages)?;
    let mut u = Uring {
        ring,
        bufs: ManuallyDrop::new(bufs),
        in_flight: 0,
        fd: job.fd,
    };
    let mut slots: Vec<Option<Slot>> = vec![None; job.iodepth];
    // Reversed so slot 0 is used first: single-op runs always touch the same buffer.
    let mut free: Vec<usize> = (0..job.iodepth).rev().collect();
    // The CQ holds twice the SQ entries by default.
    let mut cqes: Vec<(u64, i32)> = Vec::with_capacity(2 * entries as usize);
    let mut st = ThreadStats::for_job(job, &u.bufs);
    let mut exhausted = false;

    loop {
        // Refill every free slot, handing each SQE to the kernel as soon as the next is built, as
        // fio does. Submitting them one by one looks wasteful, but a virtio disk stops asking for
        // doorbells (VM exits) while its host thread is still draining the queue, so a steady
        // trickle costs fewer exits than bursts after every wait: batching refills measured
        // 0.83 × fio at QD 32 on the test VM, eager submission 1.0 ×.
        // The newest SQE waits in the ring until the next one is built or until the wait
        // below, which submits it in the same io_uring_enter: one system call per I/O in the
        // steady state (one completion reaped, one op refilled), as fio does, instead of two.
        // An op's clock starts just before the call that hands it to the kernel, so neither its
        // own fill() nor the next op's counts in its latency.
        let mut queued: Option<usize> = None;
        let mut stamp = |k: usize, slots: &mut [Option<Slot>]| {
            let now = Instant::now();
            st.started.get_or_insert(now);
            if let Some(slot) = slots.get_mut(k).and_then(Option::as_mut) {
                slot.start = now;
            }
        };
        while !exhausted {
            let Some(&idx) = free.last() else { break };
            let Some(op) = w.next() else {
                exhausted = true;
                break;
            };
            check_op(&op, job)?;
            free.pop();
            if op.write {
                // SAFETY: slot idx is free: no SQE for its buffer is in flight.
                w.fill(&op, unsafe { u.bufs.slice_mut(idx, op.len) });
            }
            if let Some(k) = queued.take() {
                stamp(k, &mut slots);
                u.submit()?;
            }
            u.push_transfer(idx, &op, 0)?;
            slots[idx] = Some(Slot {
                op,
                done: 0,
                // Restamped at its submit call.
                start: Instant::now(),
                phase: Phase::Transfer,
            });
            queued = Some(idx);
        }
        if u.in_flight == 0 {
            break;
        }
        if let Some(k) = queued.take() {
            stamp(k, &mut slots);
        }
        u.submit_and_wait()?;
        // One completion time for everything reaped here: all these CQEs were seen now, and
        // the check() of one read must not count in the latency of the next.
        let reaped = Instant::now();

        cqes.clear();
        cqes.extend(u.ring.completion().map(|c| (c.user_data(), c.result())));
        u.in_flight = u.in_flight.saturating_sub(cqes.len());
        for &(user_data, res) in &cqes {
            let idx = user_data as usize;
            let Some(slot) = slots.get_mut(idx).and_then(Option::as_mut) else {
                return Err(BenchError::Failed(format!(
                    "io_uring returned a completion for unknown slot {user_data}"
                )));
            };
            let op = slot.op;
            match slot.phase {
                Phase::Sync => {
                    if res < 0 {
                        return Err(sync_failed(&op, io::Error::from_raw_os_error(-res)));
                    }
                }
                Phase::Transfer => {
                    if res < 0 {
                        return Err(io_failed(&op, io::Error::from_raw_os_error(-res)));
                    }
                    if res == 0 {
                        return Err(no_progress(&op, slot.done));
                    }
                    slot.done += res as usize;
                    if slot.done < op.len {
                        // Short transfer: the op is not done until every byte moved, and its
                        // clock keeps running.
                        let done = slot.done;
                        u.push_transfer(idx, &op, done)?;
                        continue;
                    }
                    if op.write && job.fdatasync_each_write {
                        slot.phase = Phase::Sync;
                        u.push_datasync(idx)?;
                        continue;
                    }
                }
            }
            let start = slot.start;
            slots[idx] = None;
            st.record(&op, reaped.saturating_duration_since(start), reaped);
            st.finished = Some(reaped);
            if !op.write {
                // SAFETY: this op has completed and nothing else is queued on slot idx.
                let data = unsafe { u.bufs.slice(idx, op.len) };
                w.check(&op, data).map_err(|m| check_failed(&op, m))?;
            }
            free.push(idx);
        }
    }
    Ok(st)
}

#[cfg(test)]
mod tests;

//! Loaded latency (Intel MLC's `--loaded_latency` method, reproduced in the open): one thread
//! chases pointers through DRAM while every other thread streams through its own buffer, each
//! pausing `delay` spin iterations after every 64-byte line. Lowering the delay raises the
//! injected bandwidth; each point records the chase's latency and the bandwidth the memory
//! actually delivered during it, and the curve of the two is the figure: flat while the
//! controllers have slack, then a knee where queues build, then latency climbing steeply at
//! the bandwidth ceiling.
//!
//! **The chasing thread** walks one random cycle of cache lines (the same chase as
//! `mem.latency`, final pointers checked) over a DRAM-sized set with huge pages, so translation
//! does not add to what the controllers cost. It is the first CPU of the placement order; the
//! traffic threads take the next ones (one per physical core first, as every other memory
//! benchmark here), and no thread shares a CPU.
//!
//! **The traffic threads** stream sequentially through their own first-touched buffers (their
//! sum is at least 4 × the LLC sum, so the traffic reaches DRAM), line by line: `read` loads the
//! line's eight words, `rw` loads each word and stores it back incremented, so every line is
//! read and written (128 bytes of traffic per line, read:write 1:1, no write-allocate read
//! because the line was just loaded). Every 64 lines the thread checks the sum of what it read
//! against the value the buffer must hold (the words start as a known sequence and `rw` adds
//! exactly one per pass), so a loop the compiler shortened or a lost store fails the case.
//!
//! **The delay** is a loop of `dec`/`jnz` (`subs`/`b.ne` on AArch64) — about one core cycle per
//! iteration, never `pause` (whose length varies 10× between generations); its real length is
//! timed on the run and every record carries `delay_s`. MLC's own delay unit is undocumented, so
//! delays do not compare across tools; the latency-vs-bandwidth curve does.
//!
//! **Bandwidth counts what was moved during the chase only**: each traffic thread publishes its
//! byte count after every 64 lines; the chasing thread reads them when its timed walk starts and
//! ends and adds its own 64 bytes per load.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use hostbench_core::model::{Host, Metric, Record, Work};
use hostbench_core::units::format_bytes_iec;
use hostbench_core::{affinity, parallel, BenchError, Case, Runner, Sample};
use serde_json::json;

use crate::buffer::{Pages, Region};
use crate::latency::{self, chase_walker, Walker};
use crate::sizing;

/// Benchmark id of every record this module produces.
pub const BENCHMARK: &str = "mem.loaded_latency";

/// Delays of `hostbench mem --loaded-latency`: from flat out to nearly idle, doubling.
pub const DEFAULT_DELAYS: [u64; 10] = [0, 25, 50, 100, 200, 400, 800, 1600, 3200, 6400];

/// The standard profile's short curve.
pub const PROFILE_DELAYS: [u64; 5] = [0, 100, 400, 1600, 6400];

/// Largest delay accepted: 10^7 iterations per line is milliseconds per line, no load at all.
pub const MAX_DELAY: u64 = 10_000_000;

/// Lines per checked chunk (and per published byte count).
const CHUNK_LINES: usize = 64;
const WORDS_PER_LINE: usize = 8;
const CHUNK_WORDS: usize = CHUNK_LINES * WORDS_PER_LINE;

/// Smallest traffic buffer per thread.
const MIN_TRAFFIC_BYTES: u64 = 64 * sizing::MIB;

hostbench_core::named_enum! {
    /// What the traffic threads do to each line.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum Traffic("traffic") {
        /// Load every word of the line.
        Read = "read" | "r",
        /// Load every word and store it back incremented: 1:1 read/write.
        Rw = "rw" | "read-write" | "readwrite",
    }
}

impl Traffic {
    /// Memory traffic per line: the line read, and for `rw` written back.
    fn bytes_per_line(self) -> u64 {
        match self {
            Self::Read => 64,
            Self::Rw => 128,
        }
    }
}

/// Plain configuration of the loaded-latency curve.
#[derive(Debug, Clone)]
pub struct LoadedConfig {
    pub traffic: Vec<Traffic>,
    /// Spin iterations after each line of traffic, one case per delay.
    pub delays: Vec<u64>,
    /// All threads: the chasing one plus `threads - 1` traffic threads.
    pub threads: Vec<usize>,
    /// The chase's working set.
    pub working_set: u64,
    /// Each traffic thread's buffer; `None`: 4 × the LLC sum over all of them, at least 64 MiB.
    pub traffic_bytes: Option<u64>,
    pub pages: Pages,
    /// Target length of the chase in one sample.
    pub duration: Duration,
    pub seed: u64,
}

impl LoadedConfig {
    /// Read traffic at every delay, every CPU this process may use, a DRAM-sized chase.
    pub fn for_host(host: &Host) -> Self {
        Self {
            traffic: vec![Traffic::Read, Traffic::Rw],
            delays: DEFAULT_DELAYS.to_vec(),
            threads: vec![affinity::allowed_cpus().len().max(1)],
            working_set: crate::classic_latency_bytes(host),
            traffic_bytes: None,
            pages: Pages::Huge,
            duration: Duration::from_millis(50),
            seed: 0x4C6F_6164_6564,
        }
    }

    pub fn case_count(&self) -> usize {
        self.traffic.len() * self.threads.len() * self.delays.len()
    }

    /// Each traffic thread's buffer for `threads` threads in all.
    pub fn traffic_bytes_for(&self, host: &Host, threads: usize) -> u64 {
        let per = self.traffic_bytes.unwrap_or_else(|| {
            let llc = sizing::llc_total(&host.cpu.caches);
            (4 * llc / (threads.max(2) as u64 - 1)).max(MIN_TRAFFIC_BYTES)
        });
        // Whole chunks, at least one.
        let chunk = (CHUNK_WORDS * 8) as u64;
        (per / chunk).max(1) * chunk
    }

    /// Refuse what cannot be run, before anything is measured.
    pub fn validate(&self, host: &Host) -> Result<(), BenchError> {
        if self.traffic.is_empty() {
            return Err(BenchError::invalid(format!(
                "empty traffic list for {BENCHMARK}"
            )));
        }
        if self.delays.is_empty() {
            return Err(BenchError::invalid(format!(
                "empty delay list for {BENCHMARK}: give at least one delay, e.g. 0,100,1000"
            )));
        }
        if let Some(d) = self.delays.iter().find(|&&d| d > MAX_DELAY) {
            return Err(BenchError::invalid(format!(
                "delay {d} is beyond {MAX_DELAY} spin iterations per line (no load at all)"
            )));
        }
        if self.threads.is_empty() {
            return Err(BenchError::invalid(format!(
                "empty thread list for {BENCHMARK}"
            )));
        }
        if self.duration.is_zero() {
            return Err(BenchError::invalid(
                "loaded-latency sample duration must be positive, got 0 s",
            ));
        }
        let cpus = affinity::allowed_cpus().len().max(1);
        if cpus < 2 {
            // Not the user's input: the host cannot run it, whatever the thread list.
            return Err(BenchError::unsupported(
                "loaded latency needs two CPUs (one chases, the others load memory); this \
                 process may use one",
            ));
        }
        for &t in &self.threads {
            if t < 2 {
                return Err(BenchError::invalid(format!(
                    "loaded latency needs at least 2 threads (one chases, the others load \
                     memory), got {t}"
                )));
            }
            if t > cpus {
                return Err(BenchError::invalid(format!(
                    "loaded latency runs one thread per CPU: {t} threads exceed the {cpus} CPUs \
                     this process may use"
                )));
            }
        }
        if self.working_set < 2 * latency::LINE {
            return Err(BenchError::invalid(format!(
                "chase working set {} B is smaller than two cache lines",
                self.working_set
            )));
        }
        if let Some((limit, _)) = crate::memory_budget() {
            for &t in &self.threads {
                let need = latency::per_thread_bytes(self.working_set)
                    + self.traffic_bytes_for(host, t) * (t as u64 - 1);
                if need > limit {
                    return Err(BenchError::invalid(format!(
                        "loaded latency with {t} threads needs about {} of memory (chase and \
                         traffic buffers), more than the {} available for it",
                        format_bytes_iec(need),
                        format_bytes_iec(limit)
                    )));
                }
            }
        }
        Ok(())
    }
}

/// One traffic thread's buffer: words that start as a known sequence, streamed chunk by chunk.
struct Stream {
    region: Region,
    /// Sum of each chunk's initial words, to check every chunk read.
    chunk_sums: Vec<u64>,
    /// Next chunk.
    pos: usize,
    /// Completed passes (what `rw` has added to every word).
    pass: u64,
}

/// The initial value of word `w`: distinct, so a chunk read from the wrong place sums wrong.
fn initial_word(w: usize) -> u64 {
    (w as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x5555
}

impl Stream {
    /// Map, first-touch (on the calling, pinned thread) and fill `bytes` of traffic buffer.
    fn build(bytes: u64) -> Result<Self, BenchError> {
        let len = usize::try_from(bytes)
            .map_err(|_| BenchError::invalid(format!("traffic buffer {bytes} B is too large")))?;
        let mut region = Region::new(len, Pages::Huge)?;
        let words = words_mut(&mut region);
        let mut chunk_sums = Vec::with_capacity(words.len() / CHUNK_WORDS);
        for (c, chunk) in words.chunks_exact_mut(CHUNK_WORDS).enumerate() {
            let mut sum = 0u64;
            for (i, w) in chunk.iter_mut().enumerate() {
                *w = initial_word(c * CHUNK_WORDS + i);
                sum = sum.wrapping_add(*w);
            }
            chunk_sums.push(sum);
        }
        if chunk_sums.is_empty() {
            return Err(BenchError::invalid("traffic buffer smaller than one chunk"));
        }
        Ok(Self {
            region,
            chunk_sums,
            pos: 0,
            pass: 0,
        })
    }

    /// Stream one chunk (64 lines) with `delay` after each line; check what was read.
    #[inline(never)]
    fn chunk(&mut self, traffic: Traffic, delay: u64) -> Result<(), BenchError> {
        let c = self.pos;
        let words = &mut words_mut(&mut self.region)[c * CHUNK_WORDS..(c + 1) * CHUNK_WORDS];
        let mut sum = 0u64;
        for line in words.chunks_exact_mut(WORDS_PER_LINE) {
            match traffic {
                Traffic::Read => {
                    for w in line.iter() {
                        sum = sum.wrapping_add(*w);
                    }
                }
                Traffic::Rw => {
                    for w in line.iter_mut() {
                        let v = *w;
                        sum = sum.wrapping_add(v);
                        *w = v.wrapping_add(1);
                    }
                }
            }
            spin(delay);
        }
        let added = match traffic {
            Traffic::Read => 0,
            Traffic::Rw => self.pass.wrapping_mul(CHUNK_WORDS as u64),
        };
        let want = self.chunk_sums[c].wrapping_add(added);
        if sum != want {
            return Err(BenchError::Validation(format!(
                "loaded-latency {} traffic read {sum:#x} from chunk {c} in pass {} instead of \
                 {want:#x}: the traffic loop did not run as written",
                traffic.name(),
                self.pass
            )));
        }
        self.pos += 1;
        if self.pos == self.chunk_sums.len() {
            self.pos = 0;
            self.pass += 1;
        }
        Ok(())
    }
}

fn words_mut(region: &mut Region) -> &mut [u64] {
    let s = region.as_f64_mut();
    // SAFETY: f64 and u64 have the same size and alignment and every bit pattern is valid for
    // both; the slice keeps the borrow of `region`.
    unsafe { std::slice::from_raw_parts_mut(s.as_mut_ptr().cast::<u64>(), s.len()) }
}

/// Spin `n` iterations of a one-cycle loop (see the module notes on why not `pause`).
#[inline(always)]
fn spin(n: u64) {
    if n == 0 {
        return;
    }
    // Not `nomem`: the block must stay a compiler barrier, or the next line's loads may be
    // scheduled ahead of the pause and the traffic would no longer be paced line by line.
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a register-only countdown; n > 0 so the loop ends at zero.
    unsafe {
        std::arch::asm!("2:", "dec {n}", "jnz 2b", n = inout(reg) n => _, options(nostack));
    }
    #[cfg(target_arch = "aarch64")]
    // SAFETY: a register-only countdown; n > 0 so the loop ends at zero.
    unsafe {
        std::arch::asm!("2:", "subs {n}, {n}, #1", "b.ne 2b", n = inout(reg) n => _, options(nostack));
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        let mut i = n;
        while i > 0 {
            i = std::hint::black_box(i) - 1;
        }
    }
}

/// Seconds per spin iteration on the calling thread (best of three ~2 ms loops).
fn spin_seconds() -> f64 {
    let n = 4_000_000u64;
    (0..3)
        .map(|_| {
            let t0 = Instant::now();
            spin(n);
            t0.elapsed().as_secs_f64() / n as f64
        })
        .fold(f64::INFINITY, f64::min)
}

/// A byte counter on a line of its own, so publishing it does not bounce a shared line.
#[repr(C, align(128))]
#[derive(Default)]
struct Counter(AtomicU64);

/// Everything one (traffic, threads) group keeps between its delay cases.
struct Group {
    chase: Mutex<Walker>,
    streams: Vec<Mutex<Stream>>,
    /// Bytes moved so far by each traffic thread (index 0 unused: the chase).
    counters: Vec<Counter>,
    /// Blocks of 16 loads per sample, calibrated idle.
    blocks: u64,
    idle_s: f64,
}

/// Run the curve through `runner`: traffic kind × threads × delay.
pub fn run_loaded(runner: &mut Runner, cfg: &LoadedConfig, host: &Host) -> Result<(), BenchError> {
    cfg.validate(host)?;
    let order = affinity::placement_order();
    runner.plan(cfg.case_count());
    let spin_s = parallel::run_pinned(1, &order, |_| Ok(spin_seconds()), |_| ())?
        .results
        .first()
        .copied()
        .unwrap_or(f64::NAN);
    for &traffic in &cfg.traffic {
        for &threads in &cfg.threads {
            let cases: Vec<(u64, Case)> = cfg
                .delays
                .iter()
                .map(|&d| {
                    let case = Case::new(BENCHMARK, Metric::Latency, "s")
                        .work(Work::Memory)
                        .param("traffic", traffic.name())
                        .param("delay", d)
                        .param("threads", threads)
                        .param("working_set_bytes", cfg.working_set);
                    (d, case)
                })
                .collect();
            if runner.over_budget() {
                for (_, case) in &cases {
                    runner.run_case(case, || Err(BenchError::Failed("not run".into())), |_| {})?;
                }
                continue;
            }
            let stream_bytes = cfg.traffic_bytes_for(host, threads);
            let group = match build(cfg, &order, threads, stream_bytes) {
                Ok(g) => g,
                Err(e @ BenchError::InvalidInput(_)) => return Err(e),
                Err(e) => {
                    for (_, case) in &cases {
                        runner.skip(case, &e)?;
                    }
                    continue;
                }
            };
            let huge = latency::chase_notes(std::slice::from_ref(&group.chase), cfg.pages)
                .ok()
                .and_then(|n| n.granted);
            for (delay, case) in &cases {
                let delay = *delay;
                runner.run_case(
                    case,
                    || sample(&group, &order, traffic, delay),
                    |rec| {
                        annotate(
                            rec,
                            &group,
                            threads,
                            stream_bytes,
                            delay,
                            spin_s,
                            huge,
                            &order,
                        )
                    },
                )?;
            }
        }
    }
    Ok(())
}

/// Build the chase on the first CPU and each traffic buffer on its own, then time the chase
/// alone: the blocks per sample and the idle latency the curve starts from.
fn build(
    cfg: &LoadedConfig,
    order: &[usize],
    threads: usize,
    stream_bytes: u64,
) -> Result<Group, BenchError> {
    enum Built {
        Chase(Walker),
        Stream(Stream),
    }
    let built = parallel::run_pinned(
        threads,
        order,
        |i| {
            if i == 0 {
                chase_walker(cfg.working_set, cfg.pages, cfg.seed, None).map(Built::Chase)
            } else {
                Stream::build(stream_bytes).map(Built::Stream)
            }
        },
        |_| (),
    )?;
    let mut chase = None;
    let mut streams = Vec::new();
    for b in built.results {
        match b {
            Built::Chase(w) => chase = Some(w),
            Built::Stream(s) => streams.push(Mutex::new(s)),
        }
    }
    let chase = Mutex::new(chase.ok_or_else(|| BenchError::Failed("no chase built".into()))?);
    let target = cfg.duration;
    let (blocks, idle_s) = parallel::run_pinned(
        1,
        order,
        |_| {
            let mut w = latency::lock(&chase)?;
            let per_block = latency::probe(&mut w, 1, target)?;
            let blocks = latency::blocks_for(target, per_block, w.units(), 1);
            let loads = (blocks * 16) as f64;
            let mut idle = f64::INFINITY;
            for _ in 0..2 {
                idle = idle.min(w.walk(1, blocks)? / loads);
            }
            Ok((blocks, idle))
        },
        |_| (),
    )?
    .results
    .pop()
    .ok_or_else(|| BenchError::Failed("chase calibration did not run".into()))?;
    Ok(Group {
        chase,
        counters: (0..threads).map(|_| Counter::default()).collect(),
        streams,
        blocks,
        idle_s,
    })
}

/// One sample: traffic threads stream until the chase's timed walk is over; the chase's
/// seconds per load and the bandwidth delivered during its walk.
fn sample(g: &Group, order: &[usize], traffic: Traffic, delay: u64) -> Result<Sample, BenchError> {
    let threads = g.streams.len() + 1;
    let started = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let chunk_bytes = CHUNK_LINES as u64 * traffic.bytes_per_line();
    let t = parallel::run_pinned(
        threads,
        order,
        |i| {
            if i == 0 {
                // Whatever happens, the traffic threads stop when the chase is done.
                struct StopOnDrop<'a>(&'a AtomicBool);
                impl Drop for StopOnDrop<'_> {
                    fn drop(&mut self) {
                        self.0.store(true, Ordering::Release);
                    }
                }
                let _stop = StopOnDrop(&stop);
                // Traffic first: every thread has streamed a chunk before the clock starts.
                let began = Instant::now();
                while started.load(Ordering::Acquire) < threads - 1 {
                    if began.elapsed() > Duration::from_secs(10) {
                        return Err(BenchError::Failed(
                            "traffic threads did not start within 10 s".into(),
                        ));
                    }
                    std::hint::spin_loop();
                }
                let moved =
                    || -> u64 { g.counters.iter().map(|c| c.0.load(Ordering::Relaxed)).sum() };
                let before = moved();
                let t0 = Instant::now();
                let secs = latency::lock(&g.chase)?.walk(1, g.blocks)?;
                let window = t0.elapsed().as_secs_f64();
                let after = moved();
                let loads = g.blocks * 16;
                let bytes = (after - before) + loads * latency::LINE;
                Ok(Some((secs / loads as f64, bytes as f64 / window.max(1e-9))))
            } else {
                let mut s = g.streams[i - 1]
                    .lock()
                    .map_err(|_| BenchError::Failed("traffic buffer poisoned".into()))?;
                let counter = &g.counters[i].0;
                let mut total = counter.load(Ordering::Relaxed);
                let mut first = true;
                let result = loop {
                    if let Err(e) = s.chunk(traffic, delay) {
                        break Err(e);
                    }
                    total += chunk_bytes;
                    counter.store(total, Ordering::Relaxed);
                    if first {
                        started.fetch_add(1, Ordering::AcqRel);
                        first = false;
                    }
                    if stop.load(Ordering::Acquire) {
                        break Ok(None);
                    }
                };
                if first {
                    // Failed before its first chunk: let the chase go on to report it.
                    started.fetch_add(1, Ordering::AcqRel);
                }
                result
            }
        },
        |_| (),
    )?;
    let (per_load, bandwidth) = t
        .results
        .into_iter()
        .flatten()
        .next()
        .ok_or_else(|| BenchError::Failed("the chase returned nothing".into()))?;
    Ok(Sample::new(per_load).with("bandwidth", bandwidth))
}

#[allow(clippy::too_many_arguments)]
fn annotate(
    rec: &mut Record,
    g: &Group,
    threads: usize,
    stream_bytes: u64,
    delay: u64,
    spin_s: f64,
    huge: Option<f64>,
    order: &[usize],
) {
    rec.extra
        .insert("traffic_threads".into(), json!(threads - 1));
    rec.extra
        .insert("traffic_bytes_per_thread".into(), json!(stream_bytes));
    rec.extra.insert(
        "chase_cpu".into(),
        json!(affinity::cpu_for_thread(order, 0)),
    );
    rec.extra
        .insert("loads_per_sample".into(), json!(g.blocks * 16));
    rec.extra.insert("idle_latency_s".into(), json!(g.idle_s));
    if spin_s.is_finite() {
        rec.extra.insert("spin_s".into(), json!(spin_s));
        rec.extra
            .insert("delay_s".into(), json!(spin_s * delay as f64));
    }
    if let Some(h) = huge {
        rec.extra.insert("huge_fraction".into(), json!(h));
    }
    rec.extra.insert("validated".into(), json!(true));
    if rec.value.is_finite() && g.idle_s > 0.0 {
        rec.extra
            .insert("vs_idle".into(), json!(rec.value / g.idle_s));
    }
    rec.extra.insert(
        "note".into(),
        json!(
            "seconds per dependent load of one chasing thread while the others stream through \
             their own buffers with `delay` spin iterations after each 64-byte line; \
             extra.bandwidth is what all threads moved during the chase (B/s)"
        ),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use hostbench_core::RunnerConfig;

    #[test]
    fn streams_check_what_they_read_in_both_traffic_kinds() {
        let bytes = 3 * (CHUNK_WORDS * 8) as u64;
        for traffic in Traffic::ALL {
            let mut s = Stream::build(bytes).unwrap();
            // Three passes over three chunks: rw's increments accumulate and are expected.
            for _ in 0..9 {
                s.chunk(traffic, 3).unwrap();
            }
            assert_eq!((s.pos, s.pass), (0, 3));
            // Corrupt one word: the next read of that chunk fails.
            words_mut(&mut s.region)[5] ^= 1;
            let e = s.chunk(traffic, 0).unwrap_err();
            assert!(matches!(e, BenchError::Validation(_)), "{e}");
            assert!(e.to_string().contains("chunk 0"), "{e}");
        }
    }

    #[test]
    fn spin_takes_time_in_proportion() {
        let s = spin_seconds();
        assert!(s.is_finite() && s > 0.0 && s < 1e-6, "{s}");
    }

    #[test]
    fn bad_input_is_refused_by_name() {
        let host = hostbench_core::host::inventory();
        let mut cfg = LoadedConfig::for_host(&host);
        cfg.delays.clear();
        assert!(cfg
            .validate(&host)
            .unwrap_err()
            .to_string()
            .contains("empty delay list"));
        cfg.delays = vec![MAX_DELAY + 1];
        assert!(cfg
            .validate(&host)
            .unwrap_err()
            .to_string()
            .contains("delay 10000001"));
        cfg.delays = vec![0];
        cfg.threads = vec![1];
        let e = cfg.validate(&host).unwrap_err();
        if affinity::allowed_cpus().len() < 2 {
            assert!(matches!(e, BenchError::Unsupported(_)), "{e}");
            return;
        }
        assert!(e.to_string().contains("at least 2 threads"), "{e}");
        cfg.threads = vec![affinity::allowed_cpus().len() + 1];
        assert!(cfg
            .validate(&host)
            .unwrap_err()
            .to_string()
            .contains("exceed"));
    }

    #[test]
    fn a_short_curve_runs_and_records_bandwidth() {
        let cpus = affinity::allowed_cpus().len();
        if cpus < 2 {
            return;
        }
        let host = hostbench_core::host::inventory();
        let cfg = LoadedConfig {
            traffic: vec![Traffic::Read, Traffic::Rw],
            delays: vec![0, 400],
            threads: vec![2],
            working_set: 4 * sizing::MIB,
            traffic_bytes: Some(4 * sizing::MIB),
            pages: Pages::Huge,
            duration: Duration::from_millis(5),
            seed: 1,
        };
        let mut runner = Runner::new(RunnerConfig::quiet(2), host.clone());
        run_loaded(&mut runner, &cfg, &host).unwrap();
        let result = runner.finish().unwrap();
        assert_eq!(result.records.len(), 4, "{:?}", result.skipped);
        for rec in &result.records {
            assert_eq!(rec.benchmark, BENCHMARK);
            let keys: Vec<&str> = rec.params.keys().map(String::as_str).collect();
            assert_eq!(keys, ["traffic", "delay", "threads", "working_set_bytes"]);
            assert!(rec.value > 0.0 && rec.value.is_finite());
            let bw = rec.extra["bandwidth"].as_f64().unwrap();
            assert!(bw > 0.0 && bw.is_finite(), "{bw}");
            assert_eq!(rec.extra["traffic_threads"], json!(1));
            assert!(rec.extra["idle_latency_s"].as_f64().unwrap() > 0.0);
        }
    }
}

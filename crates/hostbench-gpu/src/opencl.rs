//! The OpenCL backend, through the system ICD loader loaded at run time.
//!
//! `opencl3`'s `dynamic` feature dlopens `libOpenCL.so.1` on first use and turns its absence
//! into an error (`DLOPEN_RUNTIME_LOAD_FAILED`), and an ICD loader without vendor drivers answers
//! `CL_PLATFORM_NOT_FOUND_KHR`; both become the "no device" reason, never a panic. Devices are
//! numbered platform by platform in the loader's order. Kernels are OpenCL C compiled at run time
//! (`kernels`); each compiled program is kept for the session because a compile costs PoCL a
//! noticeable fraction of a second.
//!
//! Timing is the host wall clock around a batch of back-to-back enqueues and one `clFinish`, so
//! launch overhead is amortised for large work and dominates (honestly) for tiny blocks.

use std::ffi::c_void;
use std::ptr;

use hostbench_core::BenchError;
use opencl3::command_queue::CommandQueue;
use opencl3::context::Context;
use opencl3::device::{
    Device, CL_DEVICE_COMPUTE_CAPABILITY_MAJOR_NV, CL_DEVICE_COMPUTE_CAPABILITY_MINOR_NV,
    CL_DEVICE_TYPE_ACCELERATOR, CL_DEVICE_TYPE_ALL, CL_DEVICE_TYPE_CPU, CL_DEVICE_TYPE_GPU,
};
use opencl3::error_codes::{ClError, CL_DEVICE_NOT_FOUND};
use opencl3::kernel::Kernel;
use opencl3::memory::{
    Buffer, ClMem, CL_MAP_READ, CL_MAP_WRITE, CL_MEM_ALLOC_HOST_PTR, CL_MEM_READ_ONLY,
    CL_MEM_READ_WRITE,
};
use opencl3::platform::get_platforms;
use opencl3::program::Program;
use opencl3::types::{cl_device_id, CL_BLOCKING, CL_NON_BLOCKING};
use serde_json::{json, Value};

use crate::kernels::{self, MemLayout, MemOrder, FETCH, UNROLL};
use crate::replay::{self, FLOAT_B, INT_A, INT_B, STEPS};
use crate::session::time_batch;
use crate::{
    peak, Backend, DeviceInfo, Direction, Dtype, HostMemory, MemKernel, PeakOr, Session, Timed,
};

/// Independent chains per work-item (× the vector width): enough to cover FMA latency × pipes on
/// GPUs and on a CPU's SIMD units (PoCL does not invent instruction-level parallelism).
pub const CHAINS: u32 = 8;

/// Error codes with a clearer meaning for people than their CL_ names.
const DLOPEN_RUNTIME_LOAD_FAILED: i32 = -2000;
const CL_PLATFORM_NOT_FOUND_KHR: i32 = -1001;

fn cl_err(what: &str) -> impl Fn(ClError) -> BenchError + '_ {
    move |e| {
        match e.0 {
        DLOPEN_RUNTIME_LOAD_FAILED => BenchError::unsupported(
            "no OpenCL library: libOpenCL.so.1 (an ICD loader, e.g. ocl-icd-libopencl1) is not installed",
        ),
        CL_PLATFORM_NOT_FOUND_KHR => BenchError::unsupported(
            "no OpenCL platform: the ICD loader found no vendor driver (e.g. pocl-opencl-icd, or OCL_ICD_VENDORS points elsewhere)",
        ),
        // Allocation failures are the device's limit, not a bug: skip the case.
        -4 | -5 | -6 | -61 => BenchError::unsupported(format!("{what}: {e} (device out of memory or resources)")),
        _ => BenchError::Failed(format!("{what}: {e}")),
    }
    }
}

/// Where a device sits: its platform's name and index, and its index within that platform (the
/// `-p`/`-d` pair clpeak and clinfo address it by).
#[derive(Debug, Clone)]
struct Place {
    platform: String,
    platform_index: usize,
    platform_device: usize,
}

/// PoCL's CPU device starts one worker per online CPU whatever this process may run on, so under
/// `taskset` or a Slurm allocation of 2 CPUs on a 16-core node its 16 workers shared 2 CPUs (the
/// Emerald Rapids device machine listed "16 compute units" under `taskset -c 0,1`). Every other
/// phase plans its threads from the affinity mask; PoCL is told the same through its worker
/// count (`POCL_CPU_MAX_CU_COUNT` from PoCL 4, `POCL_MAX_PTHREAD_COUNT` before, as in Debian 12's
/// 3.1), unless the user set either. Once, before the ICD loader loads PoCL, and so before
/// PoCL's threads could read the environment; clpeak, run as a child, inherits it.
fn pocl_follows_affinity() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        const VARS: [&str; 2] = ["POCL_CPU_MAX_CU_COUNT", "POCL_MAX_PTHREAD_COUNT"];
        if VARS.iter().all(|v| std::env::var_os(v).is_none()) {
            let allowed = hostbench_core::affinity::allowed_cpus().len().max(1);
            for v in VARS {
                std::env::set_var(v, allowed.to_string());
            }
        }
    });
}

/// Every OpenCL device, numbered in platform order.
fn device_ids() -> Result<Vec<(Place, cl_device_id)>, BenchError> {
    pocl_follows_affinity();
    let mut out = Vec::new();
    for (pi, p) in get_platforms()
        .map_err(cl_err("clGetPlatformIDs"))?
        .into_iter()
        .enumerate()
    {
        let pname = p.name().unwrap_or_default();
        match p.get_devices(CL_DEVICE_TYPE_ALL) {
            Ok(ids) => out.extend(ids.into_iter().enumerate().map(|(di, id)| {
                let place = Place {
                    platform: pname.clone(),
                    platform_index: pi,
                    platform_device: di,
                };
                (place, id)
            })),
            Err(e) if e.0 == CL_DEVICE_NOT_FOUND => {}
            Err(e) => return Err(cl_err("clGetDeviceIDs")(e)),
        }
    }
    Ok(out)
}

pub fn list() -> Result<Vec<DeviceInfo>, BenchError> {
    device_ids()?
        .into_iter()
        .enumerate()
        .map(|(i, (place, id))| describe(i, &place, id))
        .collect()
}

fn describe(index: usize, place: &Place, id: cl_device_id) -> Result<DeviceInfo, BenchError> {
    let d = Device::new(id);
    let e = cl_err("clGetDeviceInfo");
    let ty = d.dev_type().map_err(&e)?;
    let kind = if ty & CL_DEVICE_TYPE_GPU != 0 {
        "gpu"
    } else if ty & CL_DEVICE_TYPE_CPU != 0 {
        "cpu"
    } else if ty & CL_DEVICE_TYPE_ACCELERATOR != 0 {
        "accelerator"
    } else {
        "other"
    };
    let ext = d.extensions().unwrap_or_default();
    let units = d.max_compute_units().map_err(&e)?;
    let clock_hz = d
        .max_clock_frequency()
        .ok()
        .filter(|&c| c > 0)
        .map(|mhz| f64::from(mhz) * 1e6);
    let nv_cc = ext.contains("cl_nv_device_attribute_query").then(|| {
        let get = |p| {
            d.get_data(p).ok().and_then(|b| {
                b.get(..4)
                    .map(|s| u32::from_ne_bytes([s[0], s[1], s[2], s[3]]))
            })
        };
        get(CL_DEVICE_COMPUTE_CAPABILITY_MAJOR_NV).zip(get(CL_DEVICE_COMPUTE_CAPABILITY_MINOR_NV))
    });
    let peak_for = |dt: Dtype| -> PeakOr {
        if kind == "cpu" {
            return Err(peak::CPU_DEVICE_NO_PEAK.to_string());
        }
        let clock = clock_hz.ok_or("the device reports no clock")?;
        match nv_cc.flatten() {
            Some((maj, min)) => {
                let lanes = peak::nv_lanes(maj, min, dt)?;
                Ok(peak::compute_peak(
                    units,
                    "SM",
                    clock,
                    "CL_DEVICE_MAX_CLOCK_FREQUENCY",
                    dt,
                    &lanes,
                ))
            }
            None => Err("OpenCL does not report lanes per compute unit for this device".into()),
        }
    };
    let mut dtypes = Vec::new();
    let mut missing = Vec::new();
    for dt in Dtype::ALL {
        let need = match dt {
            Dtype::F64 => Some("cl_khr_fp64"),
            Dtype::F16 => Some("cl_khr_fp16"),
            _ => None,
        };
        match need {
            Some(x) if !ext.split_whitespace().any(|e| e == x) => {
                missing.push((dt, format!("the device lacks {x}")))
            }
            _ => dtypes.push((dt, peak_for(dt))),
        }
    }
    let mut facts = serde_json::Map::new();
    facts.insert("platform".into(), json!(place.platform));
    facts.insert("platform_index".into(), json!(place.platform_index));
    facts.insert("platform_device".into(), json!(place.platform_device));
    facts.insert(
        "driver_version".into(),
        json!(d.driver_version().unwrap_or_default()),
    );
    facts.insert(
        "max_work_group_size".into(),
        json!(d.max_work_group_size().unwrap_or(0)),
    );
    if let Some(Some((maj, min))) = nv_cc {
        facts.insert("compute_capability".into(), json!(format!("{maj}.{min}")));
    }
    Ok(DeviceInfo {
        backend: Backend::OpenCl,
        index,
        name: d.name().map_err(&e)?.trim().to_string(),
        vendor: d.vendor().unwrap_or_default(),
        kind: kind.to_string(),
        version: d.version().unwrap_or_default(),
        compute_units: units,
        clock_hz,
        global_mem_bytes: d.global_mem_size().unwrap_or(0),
        max_alloc_bytes: d.max_mem_alloc_size().unwrap_or(0),
        dtypes,
        missing,
        mem_peak: Err(
            "no memory peak: OpenCL reports neither the memory clock nor the bus width".into(),
        ),
        facts,
    })
}

/// An open OpenCL device: context, in-order queue and the programs compiled so far.
pub struct ClSession {
    info: DeviceInfo,
    /// CL_DEVICE_MAX_WORK_GROUP_SIZE.
    max_group: u64,
    context: Context,
    queue: CommandQueue,
    programs: Vec<(String, Program)>,
}

impl ClSession {
    pub fn open(info: &DeviceInfo) -> Result<Self, BenchError> {
        let ids = device_ids()?;
        let id = ids.get(info.index).map(|(_, id)| *id).ok_or_else(|| {
            BenchError::Failed(format!("OpenCL device {} disappeared", info.index))
        })?;
        let device = Device::new(id);
        let context = Context::from_device(&device).map_err(cl_err("clCreateContext"))?;
        #[allow(deprecated)]
        // SAFETY: `id` is a device of `context` (the context was made from it).
        let queue = unsafe { CommandQueue::create(&context, id, 0) }
            .map_err(cl_err("clCreateCommandQueue"))?;
        Ok(Self {
            info: info.clone(),
            max_group: device.max_work_group_size().unwrap_or(64) as u64,
            context,
            queue,
            programs: Vec::new(),
        })
    }

    /// A kernel from `src`, compiling the program once per session.
    fn kernel(&mut self, src: &str, name: &str) -> Result<Kernel, BenchError> {
        if !self.programs.iter().any(|(s, _)| s == src) {
            let p =
                Program::create_and_build_from_source(&self.context, src, "").map_err(|log| {
                    let first = log.lines().find(|l| l.contains("error")).unwrap_or(&log);
                    BenchError::Failed(format!("OpenCL build of {name} failed: {}", first.trim()))
                })?;
            self.programs.push((src.to_string(), p));
        }
        let p = self
            .programs
            .iter()
            .find(|(s, _)| s == src)
            .map(|(_, p)| p)
            .ok_or_else(|| BenchError::Failed("program cache".into()))?;
        Kernel::create(p, name).map_err(cl_err("clCreateKernel"))
    }

    fn buffer(&self, flags: u64, bytes: u64) -> Result<Buffer<u8>, BenchError> {
        if bytes > self.info.max_alloc_bytes {
            return Err(BenchError::unsupported(format!(
                "{bytes} B exceeds the device's largest allocation ({} B)",
                self.info.max_alloc_bytes
            )));
        }
        // SAFETY: no host pointer is passed; the buffer is owned by the returned value.
        unsafe {
            Buffer::<u8>::create(&self.context, flags, bytes.max(1) as usize, ptr::null_mut())
        }
        .map_err(cl_err("clCreateBuffer"))
    }

    /// Upload `bytes` of the read/copy source pattern, 16 MiB at a time.
    fn upload_source(
        &self,
        buf: &mut Buffer<u8>,
        bytes: u64,
        elem: usize,
    ) -> Result<(), BenchError> {
        const CHUNK: u64 = 16 << 20;
        let mut staging = vec![0u8; CHUNK.min(bytes) as usize];
        let mut off = 0u64;
        while off < bytes {
            let n = CHUNK.min(bytes - off) as usize;
            let first = off / elem as u64;
            // The pattern is per element index, so fill from the chunk's first element on.
            if elem == 4 {
                for (i, c) in staging[..n].chunks_exact_mut(4).enumerate() {
                    c.copy_from_slice(&replay::pattern_u32(first + i as u64).to_le_bytes());
                }
            } else {
                for (i, b) in staging[..n].iter_mut().enumerate() {
                    *b = replay::pattern_u8(off + i as u64);
                }
            }
            // SAFETY: blocking write from a live host slice of exactly `n` bytes into the buffer's range.
            unsafe {
                self.queue
                    .enqueue_write_buffer(buf, CL_BLOCKING, off as usize, &staging[..n], &[])
            }
            .map_err(cl_err("clEnqueueWriteBuffer"))?;
            off += n as u64;
        }
        Ok(())
    }

    /// Read back `len` bytes of `buf` (in `windows`) and hand each window to `check`.
    fn check_windows(
        &self,
        buf: &Buffer<u8>,
        len: u64,
        align: u64,
        mut check: impl FnMut(&[u8], u64) -> Result<(), BenchError>,
    ) -> Result<(), BenchError> {
        for (off, n) in replay::windows(len, align) {
            let mut tmp = vec![0u8; n as usize];
            // SAFETY: blocking read into a live host slice of exactly the window's size.
            unsafe {
                self.queue
                    .enqueue_read_buffer(buf, CL_BLOCKING, off as usize, &mut tmp, &[])
            }
            .map_err(cl_err("clEnqueueReadBuffer"))?;
            check(&tmp, off)?;
        }
        Ok(())
    }

    fn enqueue(&self, k: &Kernel, global: u64, local: Option<u64>) -> Result<(), BenchError> {
        let g = global as usize;
        let l = local.map(|l| l as usize);
        // SAFETY: every argument of `k` was set and the buffers behind them outlive the queue's
        // work (they belong to the `Timed` that finishes the queue before returning).
        let ev = unsafe {
            self.queue.enqueue_nd_range_kernel(
                k.get(),
                1,
                ptr::null(),
                &g,
                l.as_ref().map_or(ptr::null(), |l| l as *const usize),
                &[],
            )
        }
        .map_err(cl_err("clEnqueueNDRangeKernel"))?;
        drop(ev);
        Ok(())
    }

    fn finish(&self) -> Result<(), BenchError> {
        self.queue.finish().map_err(cl_err("clFinish"))
    }

    /// Zero the first `bytes` of `b` and wait.
    fn clear(&self, b: &mut Buffer<u8>, bytes: u64) -> Result<(), BenchError> {
        // SAFETY: fills `bytes` of the device buffer with a one-byte pattern; no host memory.
        unsafe {
            self.queue
                .enqueue_fill_buffer(b, &[0u8], 0, bytes as usize, &[])
        }
        .map_err(cl_err("clEnqueueFillBuffer"))?;
        self.finish()
    }

    fn is_cpu(&self) -> bool {
        self.info.kind == "cpu"
    }

    /// Work-group size of the memory kernels: large on GPUs (occupancy); on a CPU device one
    /// work-group is a loop PoCL vectorises, and a few dozen items keep it in L1.
    /// GPUs want neighbouring work-items on neighbouring addresses; a CPU device runs a group's
    /// work-items one after another, so one sequential stream per work-item reads fastest there
    /// (PoCL 3.1 on Zen 4, 1 GiB, work-groups of 4096: 1.1–1.8 x the strided order in three
    /// interleaved rounds; BENCHMARKS.md).
    fn mem_order(&self) -> MemOrder {
        if self.is_cpu() {
            MemOrder::Contiguous
        } else {
            MemOrder::Strided
        }
    }

    /// Work-group size of the memory kernels: 256 on GPUs (occupancy); on a CPU device the
    /// largest group (up to 4096, as clpeak uses), because each group is one task for a worker
    /// thread and fewer, larger tasks cost less scheduling per byte.
    fn mem_local(&self) -> u64 {
        if self.is_cpu() {
            self.max_group.clamp(1, 4096)
        } else {
            256.min(self.max_group.max(1))
        }
    }
}

fn set_arg<T>(k: &Kernel, i: u32, v: &T) -> Result<(), BenchError> {
    // SAFETY: `v` has the C layout of the kernel parameter `i` (the sources are generated
    // alongside these calls); OpenCL copies the value.
    unsafe { k.set_arg(i, v) }.map_err(cl_err("clSetKernelArg"))
}

fn set_mem(k: &Kernel, i: u32, b: &Buffer<u8>) -> Result<(), BenchError> {
    set_arg(k, i, &b.get())
}

struct ClCompute<'a> {
    s: &'a ClSession,
    kernel: Kernel,
    out: Buffer<u8>,
    global: u64,
    local: Option<u64>,
    expected: [u32; 2],
    work: f64,
    facts: Vec<(String, Value)>,
}

impl Timed for ClCompute<'_> {
    /// The checksums are cleared, so each sample proves its own launches (see `ClMemory`).
    fn prepare(&mut self, _sample: u64) -> Result<(), BenchError> {
        self.s.clear(&mut self.out, self.global * 4)
    }

    fn run(&mut self, reps: u64) -> Result<f64, BenchError> {
        time_batch(
            reps,
            || self.s.enqueue(&self.kernel, self.global, self.local),
            || self.s.finish(),
        )
    }

    fn validate(&mut self) -> Result<(), BenchError> {
        let mut out = vec![0u8; self.global as usize * 4];
        // SAFETY: blocking read of the whole checksum buffer into a slice of its size.
        unsafe {
            self.s
                .queue
                .enqueue_read_buffer(&self.out, CL_BLOCKING, 0, &mut out, &[])
        }
        .map_err(cl_err("clEnqueueReadBuffer"))?;
        replay::check_checksums(&replay::words(&out), self.expected, "compute kernel")
    }

    fn work(&self) -> f64 {
        self.work
    }

    fn facts(&self) -> Vec<(String, Value)> {
        self.facts.clone()
    }
}

struct ClMemory<'a> {
    s: &'a ClSession,
    kind: MemKernel,
    kernel: Kernel,
    /// Kept alive while the kernel reads it.
    _src: Option<Buffer<u8>>,
    dst: Option<Buffer<u8>>,
    out: Option<Buffer<u8>>,
    layout: MemLayout,
    block: u64,
    global: u64,
    local: u64,
    seed: u32,
    expected_sum: u32,
    facts: Vec<(String, Value)>,
}

impl Timed for ClMemory<'_> {
    fn prepare(&mut self, sample: u64) -> Result<(), BenchError> {
        match self.kind {
            MemKernel::Write => {
                self.seed = (sample as u32).wrapping_mul(0x0101_0101) ^ 0xA5;
                set_arg(&self.kernel, 2, &self.seed)
            }
            MemKernel::Copy => {
                let dst = self
                    .dst
                    .as_mut()
                    .ok_or_else(|| BenchError::Failed("no dst".into()))?;
                self.s.clear(dst, self.block)
            }
            // The per-work-item sums are cleared, so a sample whose launches did nothing cannot
            // pass on the previous sample's sums.
            MemKernel::Read => {
                let out = self
                    .out
                    .as_mut()
                    .ok_or_else(|| BenchError::Failed("no out".into()))?;
                self.s.clear(out, self.global * 4)
            }
        }
    }

    fn run(&mut self, reps: u64) -> Result<f64, BenchError> {
        let s = self.s;
        time_batch(
            reps,
            || s.enqueue(&self.kernel, self.global, Some(self.local)),
            || s.finish(),
        )
    }

    fn validate(&mut self) -> Result<(), BenchError> {
        let elem = self.layout.elem;
        let missing = || BenchError::Failed("buffer missing".into());
        match self.kind {
            MemKernel::Read => {
                let out = self.out.as_ref().ok_or_else(missing)?;
                let mut sum = 0u32;
                self.s.check_windows(out, self.global * 4, 4, |b, _| {
                    for c in b.chunks_exact(4) {
                        sum = sum.wrapping_add(u32::from_le_bytes([c[0], c[1], c[2], c[3]]));
                    }
                    Ok(())
                })?;
                if sum != self.expected_sum {
                    return Err(BenchError::Validation(format!(
                        "read kernel: the work-items' sums add up to {sum:#x}, the source to {:#x}",
                        self.expected_sum
                    )));
                }
                Ok(())
            }
            MemKernel::Write => {
                let dst = self.dst.as_ref().ok_or_else(missing)?;
                let seed = self.seed;
                self.s
                    .check_windows(dst, self.block, elem as u64, |b, off| {
                        replay::check_written(b, off, seed, elem)
                    })
            }
            MemKernel::Copy => {
                let dst = self.dst.as_ref().ok_or_else(missing)?;
                self.s
                    .check_windows(dst, self.block, elem as u64, |b, off| {
                        replay::check_source(b, off, elem, "copy kernel")
                    })
            }
        }
    }

    fn work(&self) -> f64 {
        self.block as f64
    }

    fn facts(&self) -> Vec<(String, Value)> {
        self.facts.clone()
    }
}

enum HostBuf<'a> {
    Pageable(Vec<u8>),
    /// A mapped `CL_MEM_ALLOC_HOST_PTR` buffer and its mapping.
    Pinned {
        s: &'a ClSession,
        buf: Buffer<u8>,
        ptr: *mut u8,
        len: usize,
    },
}

impl HostBuf<'_> {
    fn slice(&mut self) -> &mut [u8] {
        match self {
            HostBuf::Pageable(v) => v,
            // SAFETY: `ptr` maps `len` bytes for reading and writing until `drop` unmaps it.
            HostBuf::Pinned { ptr, len, .. } => unsafe {
                std::slice::from_raw_parts_mut(*ptr, *len)
            },
        }
    }
}

impl Drop for HostBuf<'_> {
    fn drop(&mut self) {
        if let HostBuf::Pinned { s, buf, ptr, .. } = self {
            // SAFETY: `ptr` is the live mapping of `buf`; nothing uses it after this.
            let unmapped = unsafe {
                s.queue
                    .enqueue_unmap_mem_object(buf.get(), *ptr as *mut c_void, &[])
            };
            if unmapped.is_ok() {
                let _ = s.finish();
            }
        }
    }
}

struct ClTransfer<'a> {
    s: &'a ClSession,
    dir: Direction,
    host: HostBuf<'a>,
    dev: Buffer<u8>,
    block: u64,
    seed: u32,
}

impl Timed for ClTransfer<'_> {
    fn prepare(&mut self, sample: u64) -> Result<(), BenchError> {
        self.seed = sample as u32;
        let seed = self.seed;
        match self.dir {
            Direction::HostToDevice => replay::fill_bytes(self.host.slice(), 0, seed),
            Direction::DeviceToHost => {
                let mut v = vec![0u8; self.block as usize];
                replay::fill_bytes(&mut v, 0, seed);
                // SAFETY: blocking write of a live host slice of the buffer's size.
                unsafe {
                    self.s
                        .queue
                        .enqueue_write_buffer(&mut self.dev, CL_BLOCKING, 0, &v, &[])
                }
                .map_err(cl_err("clEnqueueWriteBuffer"))?;
                self.host.slice().fill(0);
            }
        }
        Ok(())
    }

    fn run(&mut self, reps: u64) -> Result<f64, BenchError> {
        let s = self.s;
        let (dir, dev, host) = (self.dir, &mut self.dev, &mut self.host);
        time_batch(
            reps,
            || {
                let h = host.slice();
                // SAFETY: non-blocking transfers between a live host slice of the buffer's size and
                // the buffer; `finish` below waits for all of them before the slice can be touched.
                let ev = unsafe {
                    match dir {
                        Direction::HostToDevice => {
                            s.queue
                                .enqueue_write_buffer(dev, CL_NON_BLOCKING, 0, h, &[])
                        }
                        Direction::DeviceToHost => {
                            s.queue.enqueue_read_buffer(dev, CL_NON_BLOCKING, 0, h, &[])
                        }
                    }
                }
                .map_err(cl_err("clEnqueue{Read,Write}Buffer"))?;
                drop(ev);
                Ok(())
            },
            || s.finish(),
        )
    }

    fn validate(&mut self) -> Result<(), BenchError> {
        let seed = self.seed;
        match self.dir {
            Direction::HostToDevice => self.s.check_windows(&self.dev, self.block, 1, |b, off| {
                replay::check_bytes(b, off, seed, "host-to-device copy")
            }),
            Direction::DeviceToHost => {
                replay::check_bytes(self.host.slice(), 0, seed, "device-to-host copy")
            }
        }
    }

    fn work(&self) -> f64 {
        self.block as f64
    }

    fn facts(&self) -> Vec<(String, Value)> {
        let how = match &self.host {
            HostBuf::Pageable(_) => "clEnqueue{Write,Read}Buffer from/to ordinary process memory",
            HostBuf::Pinned { .. } => {
                "clEnqueue{Write,Read}Buffer from/to a mapped CL_MEM_ALLOC_HOST_PTR buffer (the OpenCL pinned-memory recipe)"
            }
        };
        vec![("method".into(), json!(how))]
    }
}

struct ClLaunch<'a> {
    s: &'a ClSession,
    kernel: Kernel,
    _arg: Buffer<u8>,
}

impl Timed for ClLaunch<'_> {
    fn run(&mut self, reps: u64) -> Result<f64, BenchError> {
        // Each launch waits for its own completion: a round trip, not a throughput.
        time_batch(
            reps,
            || {
                self.s.enqueue(&self.kernel, 1, Some(1))?;
                self.s.finish()
            },
            || Ok(()),
        )
    }

    fn validate(&mut self) -> Result<(), BenchError> {
        Ok(())
    }

    fn work(&self) -> f64 {
        1.0
    }

    fn facts(&self) -> Vec<(String, Value)> {
        vec![(
            "validated".into(),
            json!("nothing to check: the kernel is empty"),
        )]
    }
}

impl Session for ClSession {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn compute(&mut self, dtype: Dtype, width: u32) -> Result<Box<dyn Timed + '_>, BenchError> {
        let chains = CHAINS;
        let src = kernels::compute_source(dtype, width, chains);
        let kernel = self.kernel(&src, "compute")?;
        // Enough work-items to fill every compute unit several times over (GPU: thousands of
        // lanes each; CPU: one work-group per core and round).
        let (global, local) = if self.is_cpu() {
            (u64::from(self.info.compute_units) * 64 * 4, Some(64))
        } else {
            (u64::from(self.info.compute_units) * 2048, Some(256))
        };
        let out = self.buffer(CL_MEM_READ_WRITE, global * 4)?;
        set_mem(&kernel, 0, &out)?;
        if dtype.is_float() {
            set_arg(&kernel, 1, &1.0f32)?;
            set_arg(&kernel, 2, &(FLOAT_B as f32))?;
        } else {
            set_arg(&kernel, 1, &INT_A)?;
            set_arg(&kernel, 2, &INT_B)?;
        }
        set_arg(&kernel, 3, &((STEPS / UNROLL) as i32))?;
        let expected = replay::expected_checksums(dtype, chains, width, STEPS)?;
        let work = global as f64 * f64::from(chains * width) * f64::from(STEPS) * 2.0;
        let facts = vec![
            ("chains".into(), json!(chains)),
            ("steps_per_chain".into(), json!(STEPS)),
            ("global_size".into(), json!(global)),
            ("local_size".into(), json!(local)),
            (
                "operation".into(),
                json!(if dtype.is_float() {
                    "mad(x, a, b)"
                } else {
                    "x * a + b"
                }),
            ),
        ];
        Ok(Box::new(ClCompute {
            s: self,
            kernel,
            out,
            global,
            local,
            expected,
            work,
            facts,
        }))
    }

    fn memory(&mut self, kind: MemKernel, block: u64) -> Result<Box<dyn Timed + '_>, BenchError> {
        let layout = MemLayout::for_block(block, 16);
        let n = layout.vectors(block);
        let (local, global, checked) = kernels::mem_geometry(n, self.mem_local());
        let order = self.mem_order();
        let src = kernels::memory_source(layout, order, checked);
        let name = match kind {
            MemKernel::Read => "bw_read",
            MemKernel::Write => "bw_write",
            MemKernel::Copy => "bw_copy",
        };
        let kernel = self.kernel(&src, name)?;
        let (mut src_buf, mut dst_buf, mut out_buf) = (None, None, None);
        let mut expected_sum = 0;
        if kind != MemKernel::Write {
            let mut b = self.buffer(CL_MEM_READ_ONLY, block)?;
            self.upload_source(&mut b, block, layout.elem)?;
            set_mem(&kernel, 0, &b)?;
            src_buf = Some(b);
        }
        match kind {
            MemKernel::Read => {
                let o = self.buffer(CL_MEM_READ_WRITE, global * 4)?;
                set_mem(&kernel, 1, &o)?;
                set_arg(&kernel, 2, &n)?;
                out_buf = Some(o);
                expected_sum = replay::source_sum(block / layout.elem as u64, layout.elem);
            }
            MemKernel::Write => {
                let d = self.buffer(CL_MEM_READ_WRITE, block)?;
                set_mem(&kernel, 0, &d)?;
                set_arg(&kernel, 1, &n)?;
                set_arg(&kernel, 2, &0u32)?;
                dst_buf = Some(d);
            }
            MemKernel::Copy => {
                let d = self.buffer(CL_MEM_READ_WRITE, block)?;
                set_mem(&kernel, 1, &d)?;
                set_arg(&kernel, 2, &n)?;
                dst_buf = Some(d);
            }
        }
        let facts = vec![
            (
                "element".into(),
                json!(format!(
                    "{}{}",
                    layout.c_elem(),
                    if layout.width > 1 {
                        layout.width.to_string()
                    } else {
                        String::new()
                    }
                )),
            ),
            ("vector_width".into(), json!(layout.width)),
            ("vectors_per_work_item".into(), json!(FETCH)),
            ("order".into(), json!(order.name())),
            ("global_size".into(), json!(global)),
            ("local_size".into(), json!(local)),
        ];
        Ok(Box::new(ClMemory {
            s: self,
            kind,
            kernel,
            _src: src_buf,
            dst: dst_buf,
            out: out_buf,
            layout,
            block,
            global,
            local,
            seed: 0,
            expected_sum,
            facts,
        }))
    }

    fn transfer(
        &mut self,
        dir: Direction,
        host: HostMemory,
        block: u64,
    ) -> Result<Box<dyn Timed + '_>, BenchError> {
        let dev = self.buffer(CL_MEM_READ_WRITE, block)?;
        let host = match host {
            HostMemory::Pageable => HostBuf::Pageable(vec![0u8; block as usize]),
            HostMemory::Pinned => {
                let buf = self.buffer(CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, block)?;
                let mut mapped: *mut c_void = ptr::null_mut();
                // SAFETY: a blocking map of the whole buffer; the mapping lives in `HostBuf`
                // until its `drop` unmaps it.
                unsafe {
                    self.queue.enqueue_map_buffer(
                        &buf,
                        CL_BLOCKING,
                        CL_MAP_READ | CL_MAP_WRITE,
                        0,
                        block as usize,
                        &mut mapped,
                        &[],
                    )
                }
                .map_err(cl_err("clEnqueueMapBuffer"))?;
                if mapped.is_null() {
                    return Err(BenchError::Failed(
                        "clEnqueueMapBuffer returned NULL".into(),
                    ));
                }
                HostBuf::Pinned {
                    s: self,
                    buf,
                    ptr: mapped as *mut u8,
                    len: block as usize,
                }
            }
        };
        Ok(Box::new(ClTransfer {
            s: self,
            dir,
            host,
            dev,
            block,
            seed: 0,
        }))
    }

    fn burn(&mut self) -> Result<Box<dyn crate::burn::BurnKernels + '_>, BenchError> {
        Ok(Box::new(burn::ClBurn::new(self)?))
    }

    fn launch(&mut self) -> Result<Box<dyn Timed + '_>, BenchError> {
        let kernel = self.kernel(kernels::EMPTY_SOURCE, "empty")?;
        let arg = self.buffer(CL_MEM_READ_WRITE, 4)?;
        set_mem(&kernel, 0, &arg)?;
        Ok(Box::new(ClLaunch {
            s: self,
            kernel,
            _arg: arg,
        }))
    }
}

impl Drop for ClSession {
    fn drop(&mut self) {
        // Work still queued would outlive the buffers of a dropped `Timed`.
        let _ = self.queue.finish();
    }
}

mod burn;

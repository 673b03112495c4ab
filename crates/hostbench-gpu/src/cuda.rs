//! The CUDA backend: the driver API (`libcuda.so`) loaded at run time through cudarc.
//!
//! cudarc's dynamic loading panics when the library is missing, so `probe` looks for it first
//! (`is_culib_present`, a plain dlopen) and nothing else in this module runs without it; symbols
//! are resolved lazily (cudarc ≥ 0.19.5), so a driver that lacks one only panics at the call that
//! needs it (every entry point used here is in the drivers of CUDA 11 and later).
//! Kernels are PTX text (`ptx`) that the driver JIT-compiles: no toolkit or NVRTC is needed.
//! Timing is the host wall clock around a batch of launches or copies on one stream and a
//! `cuStreamSynchronize`, as in the OpenCL backend.
//!
//! This file holds the driver, the devices, the buffers and the timed operations; the `Session`
//! methods, what each benchmark launches with them, are in `benchmarks`.
//!
//! Measured on an NVIDIA H200 (BENCHMARKS.md, "CUDA on an NVIDIA H200"); without a GPU it is
//! unit-tested where it can be (the probe without a driver, the PTX text and its assembly by
//! `ptxas`, the argument marshalling, the driver-copy reference on a simulated session, the
//! burn's PTX run by `ptx_sim`), and the burn runs end to end against a stand-in driver that
//! executes its kernels on the host (crates/hostbench/tests/burn_driver.rs).

use std::ffi::{c_void, CString};

use cudarc::driver::result::{self, stream::StreamKind, DriverError};
use cudarc::driver::sys::{self, CUdevice_attribute as Attr, CUresult};
use hostbench_core::BenchError;
use serde_json::{json, Value};

use crate::cublas::{self, Types};
use crate::ptx::{self, Arg, KernelArgs};
use crate::replay;
use crate::session::time_batch;
use crate::{peak, Backend, DeviceInfo, Direction, Dtype, MemKernel, PeakOr, Timed};

/// Independent chains per thread (scalar SIMT lanes: latency 4 × 2 issue covers Volta–Hopper).
pub const CHAINS: u32 = 8;

/// The most 256-thread blocks per SM a memory kernel is launched with; `resident` is how many
/// the SM holds at once (8 on Hopper). The read kernel runs one wave of resident blocks, each
/// thread looping over the block: measured on an H200 (BENCHMARKS.md, issue 34), 8, 16, 32, 64
/// and 128 blocks per SM read 4.29, 4.17, 4.10, 4.02 and 3.95 TB/s at 256 MiB and 4.55, 4.52,
/// 4.47, 4.37 and 4.28 at 1 GiB. With several waves, blocks retire and start at different times
/// and the last wave's tail leaves SMs idle: a fixed few microseconds per launch, 9 % of a 256
/// MiB read (62 µs) and 2 % of a 1 GiB one. What stays (about 5 µs per launch: the gap between
/// launches, the first loads' latency and the last loads' drain) still puts 256 MiB 6 % below
/// 1 GiB, and the record says so. A write or copy drains better through many short-lived
/// blocks: at 1 GiB write 4.34 TB/s with 32 and 4.44 with 128, copy 0.94 and 0.96 of the
/// driver's copy. (A sweep of the same copy kernel from CuPy reached 1.00 of the driver's copy
/// with one to two vectors per thread, 512 or 1024 blocks per SM: untested in hostbench.)
fn blocks_per_sm(kind: MemKernel, resident: u32) -> u32 {
    match kind {
        MemKernel::Read => resident.max(1),
        MemKernel::Write | MemKernel::Copy => 128,
    }
}

/// Waves of resident blocks per compute launch (see `compute`).
const COMPUTE_WAVES: u32 = 8;

/// Is the driver library loadable? (A dlopen, nothing more: safe to call anywhere.)
pub fn driver_present() -> bool {
    // SAFETY: only tries `dlopen` on the candidate library names and closes what it opened.
    unsafe { sys::is_culib_present() }
}

fn cu_err(what: &str) -> impl Fn(DriverError) -> BenchError + '_ {
    move |e| match e.0 {
        CUresult::CUDA_ERROR_NO_DEVICE => {
            BenchError::unsupported("the CUDA driver reports no device")
        }
        CUresult::CUDA_ERROR_NOT_INITIALIZED | CUresult::CUDA_ERROR_NOT_SUPPORTED => {
            BenchError::unsupported(format!(
                "{what}: {:?} (driver too old or not initialised)",
                e.0
            ))
        }
        CUresult::CUDA_ERROR_OUT_OF_MEMORY => {
            BenchError::unsupported(format!("{what}: out of device memory"))
        }
        // The GPU detected corrupted data it could not correct: a wrong result the hardware
        // caught, not a failure to measure (the burn fails the device on it).
        CUresult::CUDA_ERROR_ECC_UNCORRECTABLE => BenchError::Validation(format!(
            "{what}: the GPU reported an uncorrectable ECC error (CUDA_ERROR_ECC_UNCORRECTABLE)"
        )),
        code => BenchError::Failed(format!("{what}: {code:?}")),
    }
}

/// Every driver entry point this backend calls through cudarc. cudarc resolves each at its first
/// call and panics where the library lacks it, so the probe looks them all up first: a driver
/// too old for one is `unsupported`, named, rather than a panic midway through a run.
pub const ENTRY_POINTS: &[&str] = &[
    "cuInit",
    "cuDriverGetVersion",
    "cuDeviceGetCount",
    "cuDeviceGet",
    "cuDeviceGetAttribute",
    "cuDeviceTotalMem_v2",
    "cuDeviceGetName",
    "cuDevicePrimaryCtxRetain",
    "cuDevicePrimaryCtxRelease_v2",
    "cuCtxSetCurrent",
    "cuStreamCreate",
    "cuStreamDestroy_v2",
    "cuStreamSynchronize",
    "cuModuleLoadData",
    "cuModuleUnload",
    "cuModuleGetFunction",
    "cuLaunchKernel",
    "cuOccupancyMaxActiveBlocksPerMultiprocessor",
    "cuMemGetInfo_v2",
    "cuMemAlloc_v2",
    "cuMemFree_v2",
    "cuMemsetD8_v2",
    "cuMemcpyHtoD_v2",
    "cuMemcpyDtoH_v2",
    "cuMemHostAlloc",
    "cuMemFreeHost",
    "cuMemcpyHtoDAsync_v2",
    "cuMemcpyDtoHAsync_v2",
    "cuMemcpyDtoDAsync_v2",
];

/// Initialise the driver, or say why CUDA is unavailable.
pub fn probe() -> Result<(), BenchError> {
    if !driver_present() {
        return Err(BenchError::unsupported(
            "no CUDA driver: libcuda.so (the NVIDIA driver library) is not installed",
        ));
    }
    // SAFETY: the library is present (just checked), so `culib` opens it rather than panicking.
    let lib = unsafe { sys::culib() };
    let missing: Vec<&str> = ENTRY_POINTS
        .iter()
        .copied()
        // SAFETY: `get` only looks the name up; the pointer is never called or dereferenced.
        .filter(|name| unsafe { lib.get::<*const c_void>(name.as_bytes()) }.is_err())
        .collect();
    if !missing.is_empty() {
        return Err(BenchError::unsupported(format!(
            "the CUDA driver lacks {} (hostbench needs the driver of CUDA 11 or later)",
            missing.join(", ")
        )));
    }
    result::init().map_err(cu_err("cuInit"))
}

/// The CUDA version the driver implements ("13.0"), after a successful `probe`.
pub fn driver_version() -> Option<String> {
    let mut v: std::ffi::c_int = 0;
    // SAFETY: writes one int; the library is present (callers probed first).
    let ok = unsafe { sys::cuDriverGetVersion(&mut v) } == CUresult::CUDA_SUCCESS;
    (ok && v > 0).then(|| format!("{}.{}", v / 1000, (v % 1000) / 10))
}

pub fn list() -> Result<Vec<DeviceInfo>, BenchError> {
    probe()?;
    let n = result::device::get_count().map_err(cu_err("cuDeviceGetCount"))?;
    (0..n.max(0)).map(|i| describe(i as usize)).collect()
}

fn attr(dev: sys::CUdevice, a: Attr) -> Result<i32, BenchError> {
    // SAFETY: `dev` came from `cuDeviceGet` after a successful `cuInit`.
    unsafe { result::device::get_attribute(dev, a) }.map_err(cu_err("cuDeviceGetAttribute"))
}

fn describe(index: usize) -> Result<DeviceInfo, BenchError> {
    let dev = result::device::get(index as i32).map_err(cu_err("cuDeviceGet"))?;
    let sms = attr(dev, Attr::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?.max(0) as u32;
    let clock_khz = attr(dev, Attr::CU_DEVICE_ATTRIBUTE_CLOCK_RATE).unwrap_or(0);
    let mem_khz = attr(dev, Attr::CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE).unwrap_or(0);
    let bus = attr(dev, Attr::CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH).unwrap_or(0);
    let major = attr(dev, Attr::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?.max(0) as u32;
    let minor = attr(dev, Attr::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?.max(0) as u32;
    let clock_hz = (clock_khz > 0).then(|| f64::from(clock_khz) * 1e3);
    // SAFETY: as for `attr`.
    let total = unsafe { result::device::total_mem(dev) }.map_err(cu_err("cuDeviceTotalMem"))?;
    let peak_for = |d: Dtype| -> PeakOr {
        let clock =
            clock_hz.ok_or("the driver reports no clock (CUDA 13 dropped the attribute)")?;
        let lanes = peak::nv_lanes(major, minor, d)?;
        Ok(peak::compute_peak(
            sms,
            "SM",
            clock,
            "CU_DEVICE_ATTRIBUTE_CLOCK_RATE",
            d,
            &lanes,
        ))
    };
    let mut dtypes = Vec::new();
    let mut missing = Vec::new();
    for d in Dtype::ALL {
        if ptx::compute_ptx(d, 1).is_none() {
            missing.push((
                d,
                format!("no {} kernel in the CUDA path (a dp4a kernel is not written); use --backend opencl", d.name()),
            ));
        } else if d == Dtype::F16 && (major, minor) < (5, 3) {
            missing.push((
                d,
                format!("half-precision arithmetic (f16x2) needs compute capability 5.3, this device is {major}.{minor}"),
            ));
        } else {
            dtypes.push((d, peak_for(d)));
        }
    }
    let mem_peak = if bus > 0 && mem_khz > 0 {
        Ok(peak::memory_peak(
            bus as u32,
            f64::from(mem_khz) * 1e3,
            "CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE",
        ))
    } else {
        Err("the driver reports no memory clock or bus width".to_string())
    };
    let mut facts = serde_json::Map::new();
    facts.insert(
        "compute_capability".into(),
        json!(format!("{major}.{minor}")),
    );
    if let Some(v) = driver_version() {
        facts.insert("driver_cuda_version".into(), json!(v));
    }
    // The PCI address NVML finds the same device by (its index order may differ from CUDA's).
    let pci = (
        attr(dev, Attr::CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID),
        attr(dev, Attr::CU_DEVICE_ATTRIBUTE_PCI_BUS_ID),
        attr(dev, Attr::CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID),
    );
    // The L2's size: blocks that fit in it are labelled level=L2, the rest DRAM.
    if let Ok(l2) = attr(dev, Attr::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE) {
        if l2 > 0 {
            facts.insert("l2_bytes".into(), json!(l2));
        }
    }
    if let (Ok(d), Ok(b), Ok(s)) = pci {
        facts.insert(
            "pci_bus_id".into(),
            json!(format!("{d:08x}:{b:02x}:{s:02x}.0")),
        );
    }
    Ok(DeviceInfo {
        backend: Backend::Cuda,
        index,
        name: result::device::get_name(dev).map_err(cu_err("cuDeviceGetName"))?,
        vendor: "NVIDIA".into(),
        kind: "gpu".into(),
        version: format!("compute capability {major}.{minor}"),
        compute_units: sms,
        clock_hz,
        global_mem_bytes: total as u64,
        max_alloc_bytes: total as u64,
        dtypes,
        missing,
        mem_peak,
        facts,
    })
}

/// Device memory, freed on drop.
struct DevBuf {
    ptr: sys::CUdeviceptr,
    bytes: usize,
}

impl DevBuf {
    fn new(bytes: u64) -> Result<Self, BenchError> {
        // SAFETY: plain allocation in the current context; freed exactly once in `drop`.
        let ptr =
            unsafe { result::malloc_sync(bytes.max(1) as usize) }.map_err(cu_err("cuMemAlloc"))?;
        Ok(Self {
            ptr,
            bytes: bytes as usize,
        })
    }

    fn read(&self, off: u64, len: u64) -> Result<Vec<u8>, BenchError> {
        let mut v = vec![0u8; len as usize];
        // SAFETY: `off + len` lies within the allocation; the host slice has `len` bytes.
        unsafe { result::memcpy_dtoh_sync(&mut v, self.ptr + off) }
            .map_err(cu_err("cuMemcpyDtoH"))?;
        Ok(v)
    }

    fn write(&self, off: u64, data: &[u8]) -> Result<(), BenchError> {
        // SAFETY: `off + data.len()` lies within the allocation.
        unsafe { result::memcpy_htod_sync(self.ptr + off, data) }.map_err(cu_err("cuMemcpyHtoD"))
    }
}

impl Drop for DevBuf {
    fn drop(&mut self) {
        // SAFETY: `ptr` was allocated by `cuMemAlloc` and is freed once.
        let _ = unsafe { result::free_sync(self.ptr) };
    }
}

/// An open CUDA device: its primary context, one stream, the modules loaded so far.
pub struct CudaSession {
    info: DeviceInfo,
    dev: sys::CUdevice,
    stream: sys::CUstream,
    modules: Vec<(String, sys::CUmodule)>,
}

impl CudaSession {
    pub fn open(info: &DeviceInfo) -> Result<Self, BenchError> {
        probe()?;
        let dev = result::device::get(info.index as i32).map_err(cu_err("cuDeviceGet"))?;
        // SAFETY: `dev` is a valid device; the retained context is released in `drop`.
        let ctx = unsafe { result::primary_ctx::retain(dev) }
            .map_err(cu_err("cuDevicePrimaryCtxRetain"))?;
        // SAFETY: `ctx` is the live primary context just retained.
        unsafe { result::ctx::set_current(ctx) }.map_err(cu_err("cuCtxSetCurrent"))?;
        let stream =
            result::stream::create(StreamKind::NonBlocking).map_err(cu_err("cuStreamCreate"))?;
        Ok(Self {
            info: info.clone(),
            dev,
            stream,
            modules: Vec::new(),
        })
    }

    /// A function of the PTX module `src`, JIT-compiling the module once per session.
    fn function(&mut self, src: &str, name: &str) -> Result<sys::CUfunction, BenchError> {
        let module = match self.modules.iter().find(|(s, _)| s == src) {
            Some((_, m)) => *m,
            None => {
                let text =
                    CString::new(src).map_err(|_| BenchError::Failed("NUL in PTX".into()))?;
                // SAFETY: `text` is a NUL-terminated PTX image alive for the call.
                let m = unsafe { result::module::load_data(text.as_ptr().cast()) }
                    .map_err(cu_err("cuModuleLoadData (PTX JIT)"))?;
                self.modules.push((src.to_string(), m));
                m
            }
        };
        let cname = CString::new(name).map_err(|_| BenchError::Failed("NUL in name".into()))?;
        // SAFETY: `module` is loaded and not unloaded before the session drops.
        unsafe { result::module::get_function(module, cname) }
            .map_err(cu_err("cuModuleGetFunction"))
    }

    fn launch(
        &self,
        f: sys::CUfunction,
        grid: u32,
        block: u32,
        args: &mut KernelArgs,
    ) -> Result<(), BenchError> {
        let mut ptrs = args.pointers();
        // SAFETY: `args` matches the kernel's parameters (checked by the ptx tests) and every
        // device pointer in it belongs to a `DevBuf` that outlives the synchronisation.
        unsafe { result::launch_kernel(f, (grid, 1, 1), (block, 1, 1), 0, self.stream, &mut ptrs) }
            .map_err(cu_err("cuLaunchKernel"))
    }

    fn sync(&self) -> Result<(), BenchError> {
        // SAFETY: the stream is live until the session drops.
        unsafe { result::stream::synchronize(self.stream) }.map_err(cu_err("cuStreamSynchronize"))
    }

    /// Blocks for grid-stride kernels: one thread per item, up to `per_sm` blocks per SM.
    fn grid_for(&self, n: u64, block: u32, per_sm: u32) -> u32 {
        let want = n.div_ceil(u64::from(block)).max(1);
        want.min(u64::from(self.info.compute_units.max(1)) * u64::from(per_sm)) as u32
    }

    fn check_windows(
        buf: &DevBuf,
        len: u64,
        align: u64,
        mut check: impl FnMut(&[u8], u64) -> Result<(), BenchError>,
    ) -> Result<(), BenchError> {
        for (off, n) in replay::windows(len, align) {
            check(&buf.read(off, n)?, off)?;
        }
        Ok(())
    }
}

impl Drop for CudaSession {
    fn drop(&mut self) {
        let _ = self.sync();
        for (_, m) in self.modules.drain(..) {
            // SAFETY: each module was loaded once and nothing launches from it any more.
            let _ = unsafe { result::module::unload(m) };
        }
        // SAFETY: the stream and the primary-context reference were created in `open`.
        unsafe {
            let _ = result::stream::destroy(self.stream);
            let _ = result::primary_ctx::release(self.dev);
        }
    }
}

struct CuKernel<'a> {
    s: &'a CudaSession,
    f: sys::CUfunction,
    args: KernelArgs,
    grid: u32,
    block: u32,
    bufs: Vec<DevBuf>,
    check: Check,
    work: f64,
    facts: Vec<(String, Value)>,
}

/// How a kernel's output is checked (buffers by index into `bufs`).
enum Check {
    Checksums([u32; 2]),
    ReadSum {
        out: usize,
        threads: u64,
        expected: u32,
    },
    Written {
        dst: usize,
        bytes: u64,
        elem: usize,
    },
    Copied {
        dst: usize,
        bytes: u64,
        elem: usize,
    },
    Nothing,
}

impl Timed for CuKernel<'_> {
    fn prepare(&mut self, sample: u64) -> Result<(), BenchError> {
        // Each sample must prove its own work: a fresh seed, or the output cleared, so a batch
        // of launches that did nothing cannot pass on the previous sample's results.
        let clear = match self.check {
            Check::Written { .. } => {
                self.args.set(
                    2,
                    Arg::U32((sample as u32).wrapping_mul(0x0101_0101) ^ 0xA5),
                );
                None
            }
            Check::Copied { dst, .. } => Some(dst),
            Check::ReadSum { out, .. } => Some(out),
            Check::Checksums(_) => Some(0),
            Check::Nothing => None,
        };
        if let Some(i) = clear {
            let b = &self.bufs[i];
            // SAFETY: clears exactly that allocation.
            unsafe { result::memset_d8_sync(b.ptr, 0, b.bytes) }.map_err(cu_err("cuMemsetD8"))?;
        }
        Ok(())
    }

    fn run(&mut self, reps: u64) -> Result<f64, BenchError> {
        let (s, f, grid, block) = (self.s, self.f, self.grid, self.block);
        let args = &mut self.args;
        time_batch(reps, || s.launch(f, grid, block, args), || s.sync())
    }

    fn validate(&mut self) -> Result<(), BenchError> {
        match self.check {
            Check::Checksums(expected) => {
                let threads = u64::from(self.grid) * u64::from(self.block);
                let words = replay::words(&self.bufs[0].read(0, threads * 4)?);
                replay::check_checksums(&words, expected, "compute kernel")
            }
            Check::ReadSum {
                out,
                threads,
                expected,
            } => {
                let b = self.bufs[out].read(0, threads * 4)?;
                let sum = b.chunks_exact(4).fold(0u32, |a, c| {
                    a.wrapping_add(u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                });
                if sum == expected {
                    Ok(())
                } else {
                    Err(BenchError::Validation(format!(
                        "read kernel: the threads' sums add up to {sum:#x}, the source to {expected:#x}"
                    )))
                }
            }
            Check::Written { dst, bytes, elem } => {
                let seed = match self.args.args().get(2) {
                    Some(Arg::U32(s)) => *s,
                    _ => 0,
                };
                CudaSession::check_windows(&self.bufs[dst], bytes, elem as u64, |b, off| {
                    replay::check_written(b, off, seed, elem)
                })
            }
            Check::Copied { dst, bytes, elem } => {
                CudaSession::check_windows(&self.bufs[dst], bytes, elem as u64, |b, off| {
                    replay::check_source(b, off, elem, "copy kernel")
                })
            }
            Check::Nothing => Ok(()),
        }
    }

    fn work(&self) -> f64 {
        self.work
    }

    fn facts(&self) -> Vec<(String, Value)> {
        self.facts.clone()
    }
}

enum CuHost {
    Pageable(Vec<u8>),
    Pinned(*mut u8, usize),
}

impl CuHost {
    fn slice(&mut self) -> &mut [u8] {
        match self {
            CuHost::Pageable(v) => v,
            // SAFETY: `cuMemHostAlloc` returned `len` bytes, freed only in `drop`.
            CuHost::Pinned(p, len) => unsafe { std::slice::from_raw_parts_mut(*p, *len) },
        }
    }
}

impl Drop for CuHost {
    fn drop(&mut self) {
        if let CuHost::Pinned(p, _) = self {
            // SAFETY: allocated by `cuMemHostAlloc`, freed once.
            let _ = unsafe { result::free_host(p.cast::<c_void>()) };
        }
    }
}

/// The driver's device-to-device copy (`cuMemcpyDtoDAsync`), the copy kernel's reference.
struct CuMemcpy<'a> {
    s: &'a CudaSession,
    src: DevBuf,
    dst: DevBuf,
    elem: usize,
}

impl Timed for CuMemcpy<'_> {
    fn prepare(&mut self, _sample: u64) -> Result<(), BenchError> {
        // SAFETY: clears exactly the destination allocation.
        unsafe { result::memset_d8_sync(self.dst.ptr, 0, self.dst.bytes) }
            .map_err(cu_err("cuMemsetD8"))
    }

    fn run(&mut self, reps: u64) -> Result<f64, BenchError> {
        let (s, src, dst, n) = (self.s, self.src.ptr, self.dst.ptr, self.dst.bytes);
        time_batch(
            reps,
            // SAFETY: both allocations hold `n` bytes and outlive the synchronisation.
            || {
                unsafe { result::memcpy_dtod_async(dst, src, n, s.stream) }
                    .map_err(cu_err("cuMemcpyDtoDAsync"))
            },
            || s.sync(),
        )
    }

    fn validate(&mut self) -> Result<(), BenchError> {
        CudaSession::check_windows(
            &self.dst,
            self.dst.bytes as u64,
            self.elem as u64,
            |b, off| replay::check_source(b, off, self.elem, "cuMemcpyDtoDAsync"),
        )
    }

    fn work(&self) -> f64 {
        self.dst.bytes as f64
    }

    fn facts(&self) -> Vec<(String, Value)> {
        let version = driver_version().map_or("unknown".into(), |v| format!("CUDA driver {v}"));
        vec![
            ("tool".into(), json!("cuMemcpyDtoDAsync")),
            ("version".into(), json!(version)),
        ]
    }
}

/// cuBLASLt's GEMM of the tensor record's precision (see `cublas`), the reference beside it.
struct CuGemm<'a> {
    s: &'a CudaSession,
    lt: cublas::Lt,
    types: Types,
    n: u64,
    a: DevBuf,
    b: DevBuf,
    d: DevBuf,
    ws: DevBuf,
    /// The algorithm timed fastest, and every trial's FLOP/s (heuristic order).
    chosen: Option<usize>,
    trials: Vec<f64>,
}

impl Timed for CuGemm<'_> {
    fn prepare(&mut self, _sample: u64) -> Result<(), BenchError> {
        // SAFETY: clears exactly the output allocation, so a sample must write it again.
        unsafe { result::memset_d8_sync(self.d.ptr, 0, self.d.bytes) }.map_err(cu_err("cuMemsetD8"))
    }

    fn run(&mut self, reps: u64) -> Result<f64, BenchError> {
        let plan = self.lt.plan(&self.types, self.n)?;
        let (s, types, a, b, d, ws) = (
            self.s,
            self.types,
            self.a.ptr,
            self.b.ptr,
            self.d.ptr,
            self.ws.ptr,
        );
        // SAFETY: the buffers hold n×n elements of their types and the workspace
        // `cublas::WORKSPACE` bytes, all alive until each batch's `sync`.
        let batch = |which: usize, reps: u64| {
            time_batch(
                reps,
                || unsafe { plan.enqueue(which, &types, a, b, d, ws, s.stream.cast()) },
                || s.sync(),
            )
        };
        let chosen = match self.chosen {
            Some(c) => c,
            None => {
                // A short trial of each proposed algorithm (one warm call, then three).
                let flop = 2.0 * (self.n as f64).powi(3);
                let mut trials = Vec::with_capacity(plan.algos.len());
                for which in 0..plan.algos.len() {
                    let rate = batch(which, 1).and_then(|_| batch(which, 3));
                    trials.push(rate.map_or(0.0, |secs| 3.0 * flop / secs));
                }
                let best = (0..trials.len())
                    .max_by(|&x, &y| trials[x].total_cmp(&trials[y]))
                    .unwrap_or(0);
                self.trials = trials;
                self.chosen = Some(best);
                best
            }
        };
        batch(chosen, reps)
    }

    fn validate(&mut self) -> Result<(), BenchError> {
        // Every element of D is K = n (a power of two) in D's type, and every element is read
        // back and compared, 16 MiB at a time after the timed batch (256 MiB of f32 for the
        // 8192² GEMM: tens of milliseconds against a sample of about a second): a GEMM that left
        // any tile unwritten since `prepare` cleared D, or wrote a wrong value anywhere, fails
        // the sample.
        const PIECE: u64 = 16 << 20;
        let want = Types::power_of_two(self.types.c, self.n.trailing_zeros());
        let size = want.len() as u64;
        let total = self.n * self.n * size;
        let piece = (PIECE / size).max(1) * size;
        let mut off = 0;
        while off < total {
            let len = piece.min(total - off);
            let got = self.d.read(off, len)?;
            if let Some(i) = first_wrong(&got, &want) {
                return Err(BenchError::Validation(format!(
                    "cuBLASLt GEMM: element {} of D is {:02x?}, the product of ones gives {want:02x?}",
                    (off / size) + i as u64,
                    &got[i * want.len()..(i + 1) * want.len()]
                )));
            }
            off += len;
        }
        Ok(())
    }

    fn work(&self) -> f64 {
        2.0 * (self.n as f64).powi(3)
    }

    fn facts(&self) -> Vec<(String, Value)> {
        vec![
            ("tool".into(), json!("cuBLASLt")),
            ("version".into(), json!(self.lt.version)),
            ("library".into(), json!(self.lt.path)),
            ("algorithm".into(), json!(self.chosen)),
            ("algorithm_trials".into(), json!(self.trials)),
        ]
    }
}

/// The index of the first element of `got` (elements of `want.len()` bytes) that is not `want`.
fn first_wrong(got: &[u8], want: &[u8]) -> Option<usize> {
    got.chunks_exact(want.len()).position(|c| c != want)
}

struct CuTransfer<'a> {
    s: &'a CudaSession,
    dir: Direction,
    host: CuHost,
    dev: DevBuf,
    seed: u32,
}

impl Timed for CuTransfer<'_> {
    fn prepare(&mut self, sample: u64) -> Result<(), BenchError> {
        self.seed = sample as u32;
        match self.dir {
            Direction::HostToDevice => replay::fill_bytes(self.host.slice(), 0, self.seed),
            Direction::DeviceToHost => {
                let mut v = vec![0u8; self.dev.bytes];
                replay::fill_bytes(&mut v, 0, self.seed);
                self.dev.write(0, &v)?;
                self.host.slice().fill(0);
            }
        }
        Ok(())
    }

    fn run(&mut self, reps: u64) -> Result<f64, BenchError> {
        let (s, dir, dev) = (self.s, self.dir, self.dev.ptr);
        let host = &mut self.host;
        time_batch(
            reps,
            || {
                let h = host.slice();
                // SAFETY: copies between the live host slice and the allocation of the same size;
                // `sync` below completes them before the slice is touched again.
                unsafe {
                    match dir {
                        Direction::HostToDevice => result::memcpy_htod_async(dev, h, s.stream),
                        Direction::DeviceToHost => result::memcpy_dtoh_async(h, dev, s.stream),
                    }
                }
                .map_err(cu_err("cuMemcpyAsync"))
            },
            || s.sync(),
        )
    }

    fn validate(&mut self) -> Result<(), BenchError> {
        let seed = self.seed;
        match self.dir {
            Direction::HostToDevice => {
                CudaSession::check_windows(&self.dev, self.dev.bytes as u64, 1, |b, off| {
                    replay::check_bytes(b, off, seed, "host-to-device copy")
                })
            }
            Direction::DeviceToHost => {
                replay::check_bytes(self.host.slice(), 0, seed, "device-to-host copy")
            }
        }
    }

    fn work(&self) -> f64 {
        self.dev.bytes as f64
    }

    fn facts(&self) -> Vec<(String, Value)> {
        let how = match self.host {
            CuHost::Pageable(_) => "cuMemcpy{HtoD,DtoH}Async from/to ordinary process memory",
            CuHost::Pinned(..) => {
                "cuMemcpy{HtoD,DtoH}Async from/to cuMemHostAlloc (page-locked) memory"
            }
        };
        vec![("method".into(), json!(how))]
    }
}

// The benchmarks: what each `Session` method launches.
mod benchmarks;
mod burn;

#[cfg(test)]
mod tests;

//! hostbench-gpu: GPU (and any OpenCL device) compute throughput, device-memory bandwidth,
//! host↔device transfers and kernel launch latency, through OpenCL and CUDA.
//!
//! Both backends are loaded at run time: OpenCL through the system ICD loader (`libOpenCL.so.1`,
//! dlopen'ed by `opencl3`'s `dynamic` feature) and CUDA through the driver API (`libcuda.so`,
//! dlopen'ed by `cudarc`, probed first because cudarc panics when the library is missing). The
//! binary therefore builds with no SDK and runs where neither library exists; a machine without
//! any device gets a clean "no device" answer, never a panic.
//!
//! Every case goes through the shared runner and every kernel's output is checked on the host:
//! compute chains against a host replay of the same arithmetic (chosen so that every
//! intermediate value is exact, hence bit-identical whether the device fuses the multiply-add or
//! not), memory kernels against the data they read or were asked to write. A kernel whose work a
//! compiler deleted fails its case instead of reporting an impossible figure.
//!
//! * `opencl` / `cuda` — the backends: device listing, sessions, timed operations.
//! * `kernels` — the OpenCL C sources (generated per dtype, vector width and chain count).
//! * `tensor` — the tensor cores: precisions, dense peaks per SM, the wgmma and mma.sync kernels
//!   and the model that predicts their results exactly.
//! * `cublas` — cuBLASLt's GEMM (dlopen'ed where installed), the reference beside the tensor cases.
//! * `ptx` — the CUDA kernels as PTX text (JIT-compiled by the driver, no NVRTC needed) and the
//!   kernel-argument marshalling.
//! * `replay` — the host side of validation: chain replay and memory patterns.
//! * `peak` — theoretical peaks from device attributes, with their basis.
//! * `config` — backends, dtypes, kernels, directions; the configuration, defaults, validation.
//! * `device` — device facts, listing and `--device` selection.
//! * `session` — the backend interface (`Session`, `Timed`) and the shared timing.
//! * `run` — running the cases through the runner and filling the records.
//! * `burn` — the GPU burn-in: checked FMA chains per SM, the tensor kernels, device-memory
//!   patterns, with a timeline (`hostbench burn`).
//! * `health` — NVML's error and link counters (`health.gpu`): ECC, row remapping, the PCIe link.
//! * `xid` — NVML's XID events watched while `hostbench burn` runs, and their verdict lines.
//! * `reference` — clpeak beside the OpenCL cases (`--reference`), run once per device.

pub mod burn;
mod causes;
mod config;
pub mod cublas;
pub mod cuda;
mod device;
pub mod health;
pub mod kernels;
pub mod nvml;
pub mod opencl;
pub mod peak;
pub mod ptx;
#[cfg(test)]
mod ptx_sim;
pub mod reference;
pub mod replay;
mod run;
mod session;
pub mod subsystem;
pub mod tensor;
pub mod xid;

pub use config::{
    default_mem_blocks, default_transfer_blocks, Backend, ComputeConfig, Direction, Dtype,
    GpuConfig, HostMemory, MemKernel, MemoryConfig, TensorConfig, TransferConfig, MAX_BLOCK,
    VECTOR_WIDTHS,
};
pub use device::{list_devices, select, DeviceInfo, Listing, PeakOr};
pub use run::{run_available, run_gpu};
pub use session::{open, Session, Timed};
pub use subsystem::Gpu;
pub use tensor::TensorType;

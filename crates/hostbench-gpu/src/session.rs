//! The backend interface: a `Session` is one open device, making `Timed` operations (a compute
//! kernel, a memory kernel, a transfer, a launch round trip), each validated on the host.
//!
//! `open` picks the backend; `time_batch` and `reps_for` are the timing both backends and the
//! runner share.

use std::time::{Duration, Instant};

use hostbench_core::BenchError;
use serde_json::Value;

use crate::burn::BurnKernels;
use crate::config::{Backend, Direction, Dtype, HostMemory, MemKernel};
use crate::device::DeviceInfo;
use crate::tensor::{Form, TensorType};
use crate::{cuda, opencl};

/// One timed operation on a device: a kernel launch, a transfer, or a round trip, ready to run.
pub trait Timed {
    /// Untimed per-sample setup (fresh pattern or seed, cleared output), so each sample's
    /// validation proves that *this* sample did the work.
    fn prepare(&mut self, _sample: u64) -> Result<(), BenchError> {
        Ok(())
    }
    /// Run `reps` operations back to back and wait for the last; wall seconds.
    fn run(&mut self, reps: u64) -> Result<f64, BenchError>;
    /// Check the output of the last `run` on the host.
    fn validate(&mut self) -> Result<(), BenchError>;
    /// Work units per operation: FLOP or OP for compute, bytes for memory and transfers.
    fn work(&self) -> f64;
    /// Facts for `extra` (work sizes, vector width, chains, kernel layout).
    fn facts(&self) -> Vec<(String, Value)>;
    /// One of the facts, by name.
    fn fact(&self, name: &str) -> Option<Value> {
        self.facts()
            .into_iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v)
    }
}

/// A backend's open device: makes the timed operations.
pub trait Session {
    fn info(&self) -> &DeviceInfo;
    fn compute(&mut self, dtype: Dtype, width: u32) -> Result<Box<dyn Timed + '_>, BenchError>;
    fn memory(&mut self, kernel: MemKernel, block: u64) -> Result<Box<dyn Timed + '_>, BenchError>;
    fn transfer(
        &mut self,
        dir: Direction,
        host: HostMemory,
        block: u64,
    ) -> Result<Box<dyn Timed + '_>, BenchError>;
    fn launch(&mut self) -> Result<Box<dyn Timed + '_>, BenchError>;
    /// The backend's own device-to-device copy of `block` bytes, validated like the copy
    /// kernel: the reference beside it (CUDA: `cuMemcpyDtoDAsync`, what `cudaMemcpy` calls).
    /// `None` where the backend's reference is an outside tool instead (OpenCL: clpeak).
    fn driver_copy(&mut self, _block: u64) -> Option<Result<Box<dyn Timed + '_>, BenchError>> {
        None
    }
    /// The tensor-core throughput kernel for `t` in `form` (CUDA only: OpenCL has no portable
    /// tensor instruction).
    fn tensor(&mut self, _t: TensorType, _form: Form) -> Result<Box<dyn Timed + '_>, BenchError> {
        Err(BenchError::unsupported(
            "OpenCL has no portable tensor-core instruction: use --backend cuda",
        ))
    }
    /// The burn's kernels (`burn`): the chains, and a pattern buffer of most of the device's
    /// free memory, allocated here and freed when the returned value drops.
    fn burn(&mut self) -> Result<Box<dyn BurnKernels + '_>, BenchError> {
        Err(BenchError::unsupported("no burn kernels on this backend"))
    }
    /// A vendor GEMM of `t` at n×n×n, validated: the reference beside the tensor records
    /// (CUDA: cuBLASLt). `None` where the backend has none.
    fn gemm(&mut self, _t: TensorType, _n: u64) -> Option<Result<Box<dyn Timed + '_>, BenchError>> {
        None
    }
}

/// Open a device of either backend.
pub fn open(info: &DeviceInfo) -> Result<Box<dyn Session>, BenchError> {
    match info.backend {
        Backend::OpenCl => Ok(Box::new(opencl::ClSession::open(info)?)),
        Backend::Cuda => Ok(Box::new(cuda::CudaSession::open(info)?)),
    }
}

/// Wall seconds of `reps` calls of `one` (enqueue a launch or a copy) and then `wait` (the
/// queue's finish): launches go back to back, as a real workload issues them.
pub(crate) fn time_batch(
    reps: u64,
    mut one: impl FnMut() -> Result<(), BenchError>,
    wait: impl FnOnce() -> Result<(), BenchError>,
) -> Result<f64, BenchError> {
    let t = Instant::now();
    for _ in 0..reps {
        one()?;
    }
    wait()?;
    Ok(t.elapsed().as_secs_f64())
}

/// Repetitions that fill `target`, from one timed repetition (at least 1, at most `cap`).
pub(crate) fn reps_for(t: &mut dyn Timed, target: Duration, cap: u64) -> Result<u64, BenchError> {
    let one = t.run(1)?.max(1e-9);
    let reps = (target.as_secs_f64() / one).ceil();
    Ok((reps as u64).clamp(1, cap))
}

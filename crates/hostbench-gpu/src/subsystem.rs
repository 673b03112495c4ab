//! The GPU subsystem for `hostbench run`, on every OpenCL and CUDA device found (none: not
//! applicable, with the reason): `standard` runs every dtype and every tensor precision (CUDA), the three memory kernels at 1 B,
//! 1 KiB, 1 MiB and 256 MiB, transfers of 1 MiB and 64 MiB and the launch latency; `quick` trims
//! each; `full` is `hostbench gpu`'s default (blocks up to 1 GiB); `classic` the 1 B / 1 KiB /
//! 1 MiB points.

use std::time::Duration;

use hostbench_core::model::{Diagnosis, HealthReading, Host, Record};
use hostbench_core::subsystem::{Applicable, Profile, ReferenceTool, RunContext, Subsystem};
use hostbench_core::{BenchError, Phase, Runner};

use crate::{Dtype, GpuConfig, MemKernel, TensorType};

/// Compute, device memory, transfers and launch latency per device.
pub struct Gpu;

/// What a profile runs, before `--duration` and `--scale`.
pub fn profile_config(profile: Profile) -> GpuConfig {
    let mut cfg = GpuConfig::default();
    let (mem, xfer) = match profile {
        // The health probe: the f32 FMA rate and the device memory's read bandwidth at 256 MiB.
        Profile::Check => {
            if let Some(c) = cfg.compute.as_mut() {
                c.dtypes = vec![Dtype::F32];
                c.widths = vec![4, 16];
            }
            if let Some(m) = cfg.memory.as_mut() {
                m.kernels = vec![MemKernel::Read];
            }
            cfg.tensor = None;
            cfg.transfer = None;
            cfg.launch = false;
            cfg.duration = Duration::from_millis(100);
            (vec![256 << 20], vec![])
        }
        Profile::Quick => {
            if let Some(c) = cfg.compute.as_mut() {
                c.dtypes = vec![Dtype::F64, Dtype::F32];
                c.widths = vec![4, 16];
            }
            if let Some(m) = cfg.memory.as_mut() {
                m.kernels = vec![MemKernel::Read, MemKernel::Copy];
            }
            if let Some(t) = cfg.tensor.as_mut() {
                t.types = vec![TensorType::Bf16];
            }
            cfg.duration = Duration::from_millis(50);
            (vec![1 << 20, 64 << 20], vec![64 << 20])
        }
        Profile::Standard => {
            cfg.duration = Duration::from_millis(100);
            // f16 runs at bf16's rate and fp8-e5m2 at e4m3's on every NVIDIA part with them
            // (whitepapers; measured alike on an H200): a run measures one of each pair.
            if let Some(t) = cfg.tensor.as_mut() {
                t.types = vec![
                    TensorType::Bf16,
                    TensorType::Tf32,
                    TensorType::E4m3,
                    TensorType::I8,
                    TensorType::F64,
                ];
            }
            (
                vec![1, 1 << 10, 1 << 20, 256 << 20],
                vec![1 << 20, 64 << 20],
            )
        }
        Profile::Full => (
            crate::default_mem_blocks(),
            crate::default_transfer_blocks(),
        ),
        Profile::Classic => (vec![1, 1 << 10, 1 << 20], vec![1 << 10, 1 << 20]),
    };
    if let Some(m) = cfg.memory.as_mut() {
        m.blocks = mem;
    }
    // A run measures each tensor precision on the instruction form that measured fastest on
    // the devices it was tuned on (the first); `hostbench gpu --tensor` tries them all.
    if let Some(t) = cfg.tensor.as_mut() {
        t.sweep = profile == Profile::Full;
    }
    if let Some(t) = cfg.transfer.as_mut() {
        t.blocks = xfer;
    }
    cfg
}

fn run_config(ctx: &RunContext<'_>) -> GpuConfig {
    let mut cfg = profile_config(ctx.profile);
    cfg.duration = ctx.sample_length(cfg.duration);
    cfg.reference = ctx.reference;
    cfg
}

impl Subsystem for Gpu {
    fn name(&self) -> &'static str {
        "gpu"
    }

    fn summary(&self) -> &'static str {
        "OpenCL and CUDA compute, device memory, transfers and launch latency"
    }

    /// A host with no OpenCL or CUDA device has no GPU to measure: not applicable, so a run
    /// there is complete (exit 0), and the reason names what each backend found.
    fn applicable(&self, _host: &Host) -> Applicable {
        let listing = crate::list_devices(&GpuConfig::default().backends);
        if listing.devices.is_empty() {
            Applicable::No(listing.none_reason())
        } else {
            Applicable::Yes
        }
    }

    fn estimate(&self, ctx: &RunContext<'_>) -> Phase {
        let cfg = run_config(ctx);
        // Devices are not known before probing: one device's worth, corrected by `plan`.
        let compute = cfg.compute.as_ref().map_or(0, |c| c.dtypes.len())
            + cfg.tensor.as_ref().map_or(0, |t| t.types.len());
        let memory = cfg
            .memory
            .as_ref()
            .map_or(0, |m| m.kernels.len() * m.blocks.len());
        let transfer = cfg.transfer.as_ref().map_or(0, |t| t.blocks.len() * 4);
        let cases = compute + memory + transfer + 1;
        Phase::new(self.name(), cases, cfg.duration.as_secs_f64())
    }

    fn run(&self, runner: &mut Runner, ctx: &RunContext<'_>) -> Result<(), BenchError> {
        crate::run_available(runner, &run_config(ctx))
    }

    /// A clock its power cap or its temperature held, from NVML's clock reasons.
    fn causes(&self, rec: &Record) -> Vec<Diagnosis> {
        crate::causes::gpu_causes(rec)
    }

    fn health(&self) -> Vec<(&'static str, Result<Vec<HealthReading>, String>)> {
        vec![("health.gpu", crate::health::read())]
    }

    fn reference_tools(&self) -> &'static [ReferenceTool] {
        &[ReferenceTool {
            name: "clpeak",
            package: "clpeak",
            serves:
                "gpu.flops f32/f64, gpu.iops i32 (its compute tests), gpu.bandwidth read at the \
                     largest block (its global bandwidth)",
            in_run: "the read kernel's largest block on an OpenCL GPU (global bandwidth; not \
                     on a CPU OpenCL device, whose headline is cache-resident)",
            also: "once per device, every test the cases want; scripts/bench/gpu-vs-clpeak for \
                   interleaved rounds",
        },
        ReferenceTool {
            name: "libcublasLt.so",
            package: "nvidia-cuda-toolkit",
            serves: "gpu.flops / gpu.iops unit=tensor (cuBLASLt's GEMM, 8192 square, of the same \
                     input precision)",
            in_run: "bf16 tensor (the headline) on a CUDA device",
            also: "in process (dlopen): the CUDA toolkit's copy or a Python wheel's \
                   (nvidia/cublas/lib), HOSTBENCH_CUBLASLT=PATH names one",
        },
        ReferenceTool {
            name: "libcuda.so.1",
            package: "libcuda1",
            serves: "gpu.bandwidth copy on CUDA devices (cuMemcpyDtoDAsync, the driver's own \
                     device-to-device copy, what cudaMemcpy calls)",
            in_run: "the copy kernel's largest block on a CUDA device",
            also: "in process, through the driver hostbench already loads",
        }]
    }
}

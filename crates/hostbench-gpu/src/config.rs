//! The configuration of `hostbench gpu`: the vocabulary (backends, compute dtypes, device-memory
//! kernels, transfer directions and host memory), the per-section configs, their defaults and
//! validation.
//!
//! Plain data with no device behind it, so the binary's argument parsing and the subsystem's
//! profile can build and check a configuration without loading either backend.

use std::time::Duration;

use hostbench_core::subsystem::ReferenceScope;
use hostbench_core::BenchError;

use crate::tensor::TensorType;

hostbench_core::named_enum! {
    /// A programming interface to the device.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Backend("backend") {
        OpenCl = "opencl" | "ocl" | "cl",
        Cuda = "cuda" | "nvidia",
    }
}

hostbench_core::named_enum! {
    /// Arithmetic types of the compute kernels.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Dtype("dtype") {
        F64 = "f64" | "dp" | "double" | "fp64",
        F32 = "f32" | "sp" | "float" | "fp32",
        F16 = "f16" | "half" | "fp16",
        I32 = "i32" | "int" | "int32",
        I8 = "i8" | "qp" | "char" | "int8",
    }
}

impl Dtype {
    pub fn is_float(self) -> bool {
        matches!(self, Dtype::F64 | Dtype::F32 | Dtype::F16)
    }

    /// `gpu.flops` in FLOP/s for floating point, `gpu.iops` in OP/s for integers.
    pub fn benchmark(self) -> (&'static str, &'static str) {
        if self.is_float() {
            ("gpu.flops", "FLOP/s")
        } else {
            ("gpu.iops", "OP/s")
        }
    }
}

hostbench_core::named_enum! {
    /// Device-memory kernels.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum MemKernel("kernel") {
        /// Every byte read once, reduced into a per-work-item sum that is checked.
        Read = "read",
        /// Every byte written with a per-sample pattern that is checked.
        Write = "write",
        /// Every byte read and written to a second buffer (counted twice, as bandwidthTest does).
        Copy = "copy",
    }
}

impl MemKernel {
    /// Bytes moved per byte of block.
    pub fn traffic(self) -> f64 {
        match self {
            MemKernel::Copy => 2.0,
            _ => 1.0,
        }
    }
}

hostbench_core::named_enum! {
    /// Direction of a host↔device transfer.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Direction("direction") {
        HostToDevice = "h2d" | "htod" | "upload",
        DeviceToHost = "d2h" | "dtoh" | "download",
    }
}

hostbench_core::named_enum! {
    /// Host memory a transfer reads or writes.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum HostMemory("host-memory") {
        /// Ordinary (pageable) process memory: the driver stages it through a pinned bounce buffer.
        Pageable = "pageable",
        /// Page-locked memory the device can DMA directly (CUDA `cuMemHostAlloc`; OpenCL a mapped
        /// `CL_MEM_ALLOC_HOST_PTR` buffer, the vendors' recipe for pinned memory).
        Pinned = "pinned" | "page-locked",
    }
}

/// The compute section: dtypes × vector widths (the best width becomes the record).
#[derive(Debug, Clone)]
pub struct ComputeConfig {
    pub dtypes: Vec<Dtype>,
    /// Vector widths tried per dtype (1, 2, 4, 8, 16 as clpeak); the best is the record.
    pub widths: Vec<u32>,
    /// The dtypes were asked for by name (`--dtype`): one the device lacks is a skipped case
    /// (exit 3). Otherwise they are defaults, and a dtype the device lacks (f16 without
    /// `cl_khr_fp16`) is left out, not counted against the run.
    pub explicit: bool,
}

impl ComputeConfig {
    /// The dtypes to run on `info`: all of them when asked for by name, else those it has.
    pub fn dtypes_for(&self, info: &crate::DeviceInfo) -> Vec<Dtype> {
        self.dtypes
            .iter()
            .copied()
            .filter(|d| self.explicit || !info.missing.iter().any(|(m, _)| m == d))
            .collect()
    }
}

/// The tensor cores: input precisions, each on the best of the instruction forms tried.
#[derive(Debug, Clone)]
pub struct TensorConfig {
    pub types: Vec<TensorType>,
    /// Asked for by name (`--tensor`): a precision the device lacks is a skipped case (exit 3);
    /// otherwise it is left out, and OpenCL devices get no tensor case at all.
    pub explicit: bool,
    /// Try every instruction form written for the device (`hostbench gpu`), or only the first,
    /// the one that measured fastest (a run's quick and standard profiles).
    pub sweep: bool,
    /// Asked for by name, an OpenCL device gets a skip per precision saying why; `run_gpu`
    /// turns this off when a CUDA device is measured beside it.
    pub opencl_skips: bool,
}

/// Device-memory bandwidth: kernels × block sizes.
#[derive(Debug, Clone)]
pub struct MemoryConfig {
    pub kernels: Vec<MemKernel>,
    pub blocks: Vec<u64>,
}

/// Host↔device transfers: directions × host memory × block sizes.
#[derive(Debug, Clone)]
pub struct TransferConfig {
    pub directions: Vec<Direction>,
    pub host: Vec<HostMemory>,
    pub blocks: Vec<u64>,
}

/// Plain configuration of `hostbench gpu`.
#[derive(Debug, Clone)]
pub struct GpuConfig {
    pub backends: Vec<Backend>,
    /// Device indices (within each backend); `None`: every device.
    pub devices: Option<Vec<usize>>,
    pub compute: Option<ComputeConfig>,
    pub tensor: Option<TensorConfig>,
    pub memory: Option<MemoryConfig>,
    pub transfer: Option<TransferConfig>,
    pub launch: bool,
    /// Target length of one sample.
    pub duration: Duration,
    /// Which cases run clpeak beside them (OpenCL devices only).
    pub reference: ReferenceScope,
}

/// Largest block: 1 GiB (the range is 1 B to 1 GiB).
pub const MAX_BLOCK: u64 = 1 << 30;
pub const VECTOR_WIDTHS: [u32; 5] = [1, 2, 4, 8, 16];

/// The classic 1 B, 1 KiB and 1 MiB points, then up to 1 GiB.
pub fn default_mem_blocks() -> Vec<u64> {
    vec![1, 1 << 10, 64 << 10, 1 << 20, 16 << 20, 256 << 20, 1 << 30]
}

pub fn default_transfer_blocks() -> Vec<u64> {
    vec![1 << 10, 1 << 20, 64 << 20]
}

impl Default for GpuConfig {
    fn default() -> Self {
        Self {
            backends: Backend::ALL.to_vec(),
            devices: None,
            compute: Some(ComputeConfig {
                dtypes: Dtype::ALL.to_vec(),
                widths: VECTOR_WIDTHS.to_vec(),
                explicit: false,
            }),
            tensor: Some(TensorConfig {
                types: TensorType::ALL.to_vec(),
                explicit: false,
                sweep: true,
                opencl_skips: true,
            }),
            memory: Some(MemoryConfig {
                kernels: MemKernel::ALL.to_vec(),
                blocks: default_mem_blocks(),
            }),
            transfer: Some(TransferConfig {
                directions: Direction::ALL.to_vec(),
                host: HostMemory::ALL.to_vec(),
                blocks: default_transfer_blocks(),
            }),
            launch: true,
            duration: Duration::from_millis(200),
            reference: ReferenceScope::Off,
        }
    }
}

impl GpuConfig {
    pub fn validate(&self) -> Result<(), BenchError> {
        if self.backends.is_empty() {
            return Err(BenchError::invalid("no GPU backend selected"));
        }
        let blocks = self
            .memory
            .iter()
            .flat_map(|m| m.blocks.iter())
            .chain(self.transfer.iter().flat_map(|t| t.blocks.iter()));
        for &b in blocks {
            if b == 0 || b > MAX_BLOCK {
                return Err(BenchError::invalid(format!(
                    "block size must be between 1 B and 1 GiB, got {b} B"
                )));
            }
        }
        if self.tensor.as_ref().is_some_and(|t| t.types.is_empty()) {
            return Err(BenchError::invalid("empty tensor precision list"));
        }
        if let Some(c) = &self.compute {
            if let Some(w) = c.widths.iter().find(|w| !VECTOR_WIDTHS.contains(w)) {
                return Err(BenchError::invalid(format!(
                    "vector width must be one of 1, 2, 4, 8, 16, got {w}"
                )));
            }
            if c.dtypes.is_empty() || c.widths.is_empty() {
                return Err(BenchError::invalid("empty dtype or vector-width list"));
            }
        }
        if self.duration.is_zero() {
            return Err(BenchError::invalid("sample duration must be above zero"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back_and_unknowns_are_invalid() {
        for d in Dtype::ALL {
            assert_eq!(Dtype::parse(d.name()).unwrap(), d);
        }
        assert_eq!(Dtype::parse("SP").unwrap(), Dtype::F32);
        assert_eq!(Dtype::parse("qp").unwrap(), Dtype::I8);
        for b in Backend::ALL {
            assert_eq!(Backend::parse(b.name()).unwrap(), b);
        }
        for k in MemKernel::ALL {
            assert_eq!(MemKernel::parse(k.name()).unwrap(), k);
        }
        assert!(matches!(
            Dtype::parse("f128"),
            Err(BenchError::InvalidInput(m)) if m.contains("f128")
        ));
        assert!(matches!(
            Backend::parse("vulkan"),
            Err(BenchError::InvalidInput(m)) if m.contains("vulkan")
        ));
    }

    #[test]
    fn config_validation_bounds_blocks_and_widths() {
        let mut cfg = GpuConfig::default();
        assert!(cfg.validate().is_ok());
        cfg.memory = Some(MemoryConfig {
            kernels: vec![MemKernel::Read],
            blocks: vec![(1 << 30) + 1],
        });
        assert!(matches!(cfg.validate(), Err(BenchError::InvalidInput(_))));
        let cfg = GpuConfig {
            compute: Some(ComputeConfig {
                dtypes: vec![Dtype::F32],
                widths: vec![3],
                explicit: true,
            }),
            ..GpuConfig::default()
        };
        assert!(matches!(cfg.validate(), Err(BenchError::InvalidInput(m)) if m.contains('3')));
    }
}

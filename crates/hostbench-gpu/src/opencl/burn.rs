//! The burn's kernels on OpenCL (`burn::BurnKernels`): the program of `burn::opencl_source`
//! (with the f64 chain where the device has doubles), work-groups of up to 256 items, and a
//! pattern buffer of most of a GPU's largest allocation. A CPU device (PoCL) gets 64 MiB: it is
//! the CPU, whose memory `hostbench burn`'s own memory burn covers; there the GPU burn is the
//! test of the burn's path on a machine without a GPU. OpenCL does not say which compute unit ran
//! a work-group, so the chain results carry no SM.

use hostbench_core::BenchError;
use opencl3::kernel::Kernel;
use opencl3::memory::{Buffer, CL_MEM_READ_WRITE};
use opencl3::types::CL_BLOCKING;

use super::{cl_err, set_arg, set_mem, ClSession};
use crate::burn::{self, BurnKernels, ChainRun, MemRecord};
use crate::replay;
use crate::{Dtype, Session};

/// Work-items per compute unit in a chain launch (a GPU's full occupancy is about this).
const ITEMS_PER_CU: u64 = 2048;
/// Lanes per chain (f32, f64) on a CPU device.
const CPU_WIDTHS: [u32; 2] = [16, 8];
/// The pattern buffer of a CPU device.
const CPU_BYTES: u64 = 64 << 20;

pub(super) struct ClBurn<'a> {
    s: &'a mut ClSession,
    chain: [Option<Kernel>; 2],
    fill: Kernel,
    check: Kernel,
    global: u64,
    local: u64,
    sums: Buffer<u8>,
    records: Buffer<u8>,
    mem: Buffer<u8>,
    words: u64,
    widths: [u32; 2],
}

impl<'a> ClBurn<'a> {
    pub(super) fn new(s: &'a mut ClSession) -> Result<Self, BenchError> {
        let double = s.info.dtypes.iter().any(|(d, _)| *d == Dtype::F64);
        // On a CPU device, 64 bytes of lanes per chain: one AVX-512 register, two AVX2 ones
        // (`hostbench gpu` measures width 16 best for f32 on PoCL).
        let widths = if s.is_cpu() { CPU_WIDTHS } else { [1, 1] };
        let src = burn::opencl_source(double, widths);
        let chain = [
            Some(s.kernel(&src, burn::chain_entry(false))?),
            if double {
                Some(s.kernel(&src, burn::chain_entry(true))?)
            } else {
                None
            },
        ];
        let fill = s.kernel(&src, "burn_fill")?;
        let check = s.kernel(&src, "burn_check")?;
        let local = 256.min(s.max_group.max(1));
        let global =
            (u64::from(s.info.compute_units.max(1)) * ITEMS_PER_CU).div_ceil(local) * local;
        let sums = s.buffer(CL_MEM_READ_WRITE, global * 4)?;
        let records = s.buffer(CL_MEM_READ_WRITE, global * 16)?;
        let want = if s.is_cpu() {
            CPU_BYTES
        } else {
            s.info.global_mem_bytes / 10 * 8
        };
        let (mem, bytes) = burn::alloc_halving(want.min(s.info.max_alloc_bytes) & !3, |b| {
            s.buffer(CL_MEM_READ_WRITE, b)
        })?;
        Ok(Self {
            s,
            chain,
            fill,
            check,
            global,
            local,
            sums,
            records,
            words: bytes / 4,
            mem,
            widths,
        })
    }

    /// Words per work-item in one run on a CPU device; 0 (interleaved) on a GPU.
    fn per(&self) -> u64 {
        if self.s.is_cpu() {
            self.words.div_ceil(self.global)
        } else {
            0
        }
    }

    fn read(&self, b: &Buffer<u8>, bytes: u64) -> Result<Vec<u8>, BenchError> {
        let mut v = vec![0u8; bytes as usize];
        // SAFETY: blocking read into a live host slice of exactly `bytes`, within the buffer.
        unsafe {
            self.s
                .queue
                .enqueue_read_buffer(b, CL_BLOCKING, 0, &mut v, &[])
        }
        .map_err(cl_err("clEnqueueReadBuffer"))?;
        Ok(v)
    }
}

impl BurnKernels for ClBurn<'_> {
    fn session(&mut self) -> &mut dyn Session {
        self.s
    }

    fn chain(&mut self, double: bool, iters: u32) -> Result<ChainRun, BenchError> {
        let k = self.chain[usize::from(double)]
            .as_ref()
            .ok_or_else(|| BenchError::unsupported("the device has no double precision"))?;
        self.s.clear(&mut self.sums, self.global * 4)?;
        set_mem(k, 0, &self.sums)?;
        if double {
            set_arg(k, 1, &burn::C)?;
            set_arg(k, 2, &burn::STEP)?;
        } else {
            set_arg(k, 1, &(burn::C as f32))?;
            set_arg(k, 2, &(burn::STEP as f32))?;
        }
        set_arg(k, 3, &iters.max(1))?;
        self.s.enqueue(k, self.global, Some(self.local))?;
        self.s.finish()?;
        Ok(ChainRun {
            sums: replay::words(&self.read(&self.sums, self.global * 4)?),
            sms: None,
            block: self.local as u32,
        })
    }

    fn width(&self, double: bool) -> u32 {
        self.widths[usize::from(double)]
    }

    fn words(&self) -> u64 {
        self.words
    }

    fn fill(&mut self, mode: u32, seed: u32) -> Result<(), BenchError> {
        set_mem(&self.fill, 0, &self.mem)?;
        set_arg(&self.fill, 1, &self.words)?;
        set_arg(&self.fill, 2, &mode)?;
        set_arg(&self.fill, 3, &seed)?;
        set_arg(&self.fill, 4, &self.per())?;
        self.s.enqueue(&self.fill, self.global, Some(self.local))?;
        self.s.finish()
    }

    fn check(&mut self, mode: u32, seed: u32) -> Result<Vec<MemRecord>, BenchError> {
        set_mem(&self.check, 0, &self.mem)?;
        set_arg(&self.check, 1, &self.words)?;
        set_arg(&self.check, 2, &mode)?;
        set_arg(&self.check, 3, &seed)?;
        set_arg(&self.check, 4, &self.per())?;
        set_mem(&self.check, 5, &self.records)?;
        self.s.enqueue(&self.check, self.global, Some(self.local))?;
        self.s.finish()?;
        Ok(MemRecord::parse(
            &self.read(&self.records, self.global * 16)?,
        ))
    }
}

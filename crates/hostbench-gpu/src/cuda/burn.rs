//! The burn's kernels on CUDA (`burn::BurnKernels`): the module of `burn::ptx_source`, one wave
//! of full SMs per launch (eight 256-thread blocks each, 2048 threads: every SM's whole thread
//! capacity from Volta to Hopper), and the pattern buffer sized from the free memory the driver
//! reports.

use cudarc::driver::result;
use cudarc::driver::sys;
use hostbench_core::BenchError;

use super::{cu_err, CudaSession, DevBuf};
use crate::burn::{self, BurnKernels, ChainRun, MemRecord};
use crate::replay;
use crate::Session;

const BLOCK: u32 = 256;
const BLOCKS_PER_SM: u32 = 8;
/// Left free beside the pattern buffer: the tensor kernels' outputs, the driver's own needs.
const MARGIN: u64 = 1 << 30;

pub(super) struct CuBurn<'a> {
    s: &'a mut CudaSession,
    chain: [sys::CUfunction; 2],
    fill: sys::CUfunction,
    check: sys::CUfunction,
    grid: u32,
    sums: DevBuf,
    sms: DevBuf,
    records: DevBuf,
    mem: DevBuf,
    words: u64,
}

impl<'a> CuBurn<'a> {
    pub(super) fn new(s: &'a mut CudaSession) -> Result<Self, BenchError> {
        let src = burn::ptx_source();
        let chain = [
            s.function(&src, burn::chain_entry(false))?,
            s.function(&src, burn::chain_entry(true))?,
        ];
        let fill = s.function(&src, "burn_fill")?;
        let check = s.function(&src, "burn_check")?;
        let grid = s.info.compute_units.max(1) * BLOCKS_PER_SM;
        let threads = u64::from(grid * BLOCK);
        let sums = DevBuf::new(threads * 4)?;
        let sms = DevBuf::new(u64::from(grid) * 4)?;
        let records = DevBuf::new(threads * 16)?;
        let (free, _) = result::mem_get_info().map_err(cu_err("cuMemGetInfo"))?;
        // Nine tenths of what is free, less the margin, in 2 MiB steps.
        let want = ((free as u64 / 10 * 9).saturating_sub(MARGIN) & !((2 << 20) - 1)).max(2 << 20);
        let (mem, bytes) = burn::alloc_halving(want, DevBuf::new)?;
        Ok(Self {
            s,
            chain,
            fill,
            check,
            grid,
            sums,
            sms,
            records,
            words: bytes / 4,
            mem,
        })
    }
}

impl BurnKernels for CuBurn<'_> {
    fn session(&mut self) -> &mut dyn Session {
        self.s
    }

    fn chain(&mut self, double: bool, iters: u32) -> Result<ChainRun, BenchError> {
        // SAFETY: clears exactly these allocations, so a launch that wrote nothing is caught.
        unsafe {
            result::memset_d8_sync(self.sums.ptr, 0, self.sums.bytes)
                .and_then(|_| result::memset_d8_sync(self.sms.ptr, 0xFF, self.sms.bytes))
        }
        .map_err(cu_err("cuMemsetD8"))?;
        let mut args = burn::ptx_chain_args(double, self.sums.ptr, self.sms.ptr, iters);
        let f = self.chain[usize::from(double)];
        CudaSession::launch(self.s, f, self.grid, BLOCK, &mut args)?;
        self.s.sync()?;
        Ok(ChainRun {
            sums: replay::words(&self.sums.read(0, self.sums.bytes as u64)?),
            sms: Some(replay::words(&self.sms.read(0, self.sms.bytes as u64)?)),
            block: BLOCK,
        })
    }

    fn words(&self) -> u64 {
        self.words
    }

    fn fill(&mut self, mode: u32, seed: u32) -> Result<(), BenchError> {
        let mut args = burn::ptx_pattern_args(self.mem.ptr, self.words, mode, seed, None);
        CudaSession::launch(self.s, self.fill, self.grid, BLOCK, &mut args)?;
        self.s.sync()
    }

    fn check(&mut self, mode: u32, seed: u32) -> Result<Vec<MemRecord>, BenchError> {
        let mut args =
            burn::ptx_pattern_args(self.mem.ptr, self.words, mode, seed, Some(self.records.ptr));
        CudaSession::launch(self.s, self.check, self.grid, BLOCK, &mut args)?;
        self.s.sync()?;
        Ok(MemRecord::parse(
            &self.records.read(0, self.records.bytes as u64)?,
        ))
    }
}

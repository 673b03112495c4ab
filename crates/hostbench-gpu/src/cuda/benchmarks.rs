//! What each benchmark of the [`Session`] trait launches on CUDA: the PTX kernel (or the cuBLAS
//! call, the copy) with its grid, arguments, buffers and the check of its output, built from the
//! parent's driver calls and timed operations. Apart from them so the parent reads as the
//! driver's lifetime and the operations, this file as the benchmark catalogue.

use cudarc::driver::result;
use hostbench_core::BenchError;
use serde_json::json;

use super::{
    blocks_per_sm, cu_err, Check, CuGemm, CuHost, CuKernel, CuMemcpy, CuTransfer, CudaSession,
    DevBuf, CHAINS, COMPUTE_WAVES,
};
use crate::cublas::{self, Types};
use crate::ptx::{self, Arg, KernelArgs};
use crate::replay::{self, FLOAT_B, INT_A, INT_B, STEPS};
use crate::tensor::{self, Form, TensorType};
use crate::{DeviceInfo, Direction, Dtype, HostMemory, MemKernel, Session, Timed};

impl Session for CudaSession {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn compute(&mut self, dtype: Dtype, width: u32) -> Result<Box<dyn Timed + '_>, BenchError> {
        if width != 1 {
            return Err(BenchError::unsupported(
                "CUDA threads are scalar (SIMT): vector width 1 only",
            ));
        }
        let src = ptx::compute_ptx(dtype, CHAINS)
            .ok_or_else(|| BenchError::unsupported(format!("no CUDA {} kernel", dtype.name())))?;
        let f = self.function(&src, &ptx::compute_entry(dtype))?;
        let block = 256u32;
        // Eight waves of full SMs (2048 threads each): a launch then lasts about half a
        // millisecond on an H100, so the gap between back-to-back launches costs well under 1 %.
        let grid = self.info.compute_units.max(1) * 8 * COMPUTE_WAVES;
        let out = DevBuf::new(u64::from(grid * block) * 4)?;
        let iters = Arg::U32(STEPS / ptx::UNROLL);
        let args = match dtype {
            Dtype::F64 => {
                KernelArgs::new(&[Arg::U64(out.ptr), Arg::F64(1.0), Arg::F64(FLOAT_B), iters])
            }
            Dtype::F32 => KernelArgs::new(&[
                Arg::U64(out.ptr),
                Arg::F32(1.0),
                Arg::F32(FLOAT_B as f32),
                iters,
            ]),
            Dtype::F16 => KernelArgs::new(&[
                Arg::U64(out.ptr),
                Arg::U32(ptx::HALF2_ONE),
                Arg::U32(ptx::HALF2_STEP),
                iters,
            ]),
            _ => KernelArgs::new(&[Arg::U64(out.ptr), Arg::I32(INT_A), Arg::I32(INT_B), iters]),
        };
        let lanes = ptx::lanes(dtype);
        let expected = replay::expected_checksums(dtype, CHAINS, lanes, STEPS)?;
        let work =
            f64::from(grid) * f64::from(block) * f64::from(CHAINS * lanes) * f64::from(STEPS) * 2.0;
        Ok(Box::new(CuKernel {
            s: self,
            f,
            args,
            grid,
            block,
            bufs: vec![out],
            check: Check::Checksums(expected),
            work,
            facts: vec![
                ("chains".into(), json!(CHAINS)),
                ("lanes_per_chain".into(), json!(lanes)),
                ("steps_per_chain".into(), json!(STEPS)),
                ("grid".into(), json!(grid)),
                ("block".into(), json!(block)),
                ("kernel".into(), json!("PTX, driver JIT")),
            ],
        }))
    }

    fn memory(
        &mut self,
        kind: MemKernel,
        block_bytes: u64,
    ) -> Result<Box<dyn Timed + '_>, BenchError> {
        let elem = replay::element_bytes(block_bytes);
        let n = block_bytes / elem as u64;
        let src = ptx::memory_ptx(elem);
        let suffix = if elem == 4 { "u32" } else { "u8" };
        let name = format!("bw_{}_{suffix}", kind.name());
        let f = self.function(&src, &name)?;
        let block = 256u32;
        // SAFETY: `f` was just resolved from a loaded module.
        let resident =
            unsafe { result::occupancy::max_active_block_per_multiprocessor(f, block as i32, 0) }
                .map_or(8, |r| r.max(1) as u32);
        // The 32-bit kernels move 16-byte vectors: one thread per vector before the cap.
        let grid = self.grid_for(
            if elem == 4 { n.div_ceil(4) } else { n },
            block,
            blocks_per_sm(kind, resident),
        );
        let threads = u64::from(grid) * u64::from(block);
        let mut bufs = Vec::new();
        if kind != MemKernel::Write {
            let s = DevBuf::new(block_bytes)?;
            let mut staging = vec![0u8; block_bytes as usize];
            replay::fill_source(&mut staging, elem);
            s.write(0, &staging)?;
            bufs.push(s);
        }
        let (args, check) = match kind {
            MemKernel::Read => {
                let out = DevBuf::new(threads * 4)?;
                let a = KernelArgs::new(&[Arg::U64(bufs[0].ptr), Arg::U64(out.ptr), Arg::U64(n)]);
                bufs.push(out);
                let expected = replay::source_sum(n, elem);
                (
                    a,
                    Check::ReadSum {
                        out: 1,
                        threads,
                        expected,
                    },
                )
            }
            MemKernel::Write => {
                let d = DevBuf::new(block_bytes)?;
                let a = KernelArgs::new(&[Arg::U64(d.ptr), Arg::U64(n), Arg::U32(0)]);
                bufs.push(d);
                (
                    a,
                    Check::Written {
                        dst: 0,
                        bytes: block_bytes,
                        elem,
                    },
                )
            }
            MemKernel::Copy => {
                let d = DevBuf::new(block_bytes)?;
                let a = KernelArgs::new(&[Arg::U64(bufs[0].ptr), Arg::U64(d.ptr), Arg::U64(n)]);
                bufs.push(d);
                (
                    a,
                    Check::Copied {
                        dst: 1,
                        bytes: block_bytes,
                        elem,
                    },
                )
            }
        };
        Ok(Box::new(CuKernel {
            s: self,
            f,
            args,
            grid,
            block,
            bufs,
            check,
            work: block_bytes as f64,
            facts: vec![
                ("element".into(), json!(suffix)),
                ("grid".into(), json!(grid)),
                ("block".into(), json!(block)),
                (
                    "layout".into(),
                    json!(if elem == 4 {
                        "grid-stride loop of 16-byte vectors, 4 in flight per thread"
                    } else {
                        "grid-stride loop of bytes"
                    }),
                ),
            ],
        }))
    }

    fn transfer(
        &mut self,
        dir: Direction,
        host: HostMemory,
        block: u64,
    ) -> Result<Box<dyn Timed + '_>, BenchError> {
        let dev = DevBuf::new(block)?;
        let host = match host {
            HostMemory::Pageable => CuHost::Pageable(vec![0u8; block as usize]),
            HostMemory::Pinned => {
                // SAFETY: page-locked allocation freed by `CuHost::drop`.
                let p = unsafe { result::malloc_host(block.max(1) as usize, 0) }
                    .map_err(cu_err("cuMemHostAlloc"))?;
                CuHost::Pinned(p.cast::<u8>(), block as usize)
            }
        };
        Ok(Box::new(CuTransfer {
            s: self,
            dir,
            host,
            dev,
            seed: 0,
        }))
    }

    fn driver_copy(&mut self, block: u64) -> Option<Result<Box<dyn Timed + '_>, BenchError>> {
        let elem = replay::element_bytes(block);
        let made = (|| {
            let src = DevBuf::new(block)?;
            let mut staging = vec![0u8; block as usize];
            replay::fill_source(&mut staging, elem);
            src.write(0, &staging)?;
            let dst = DevBuf::new(block)?;
            Ok(Box::new(CuMemcpy {
                s: &*self,
                src,
                dst,
                elem,
            }) as Box<dyn Timed + '_>)
        })();
        Some(made)
    }

    fn burn(&mut self) -> Result<Box<dyn crate::burn::BurnKernels + '_>, BenchError> {
        Ok(Box::new(super::burn::CuBurn::new(self)?))
    }

    fn tensor(&mut self, t: TensorType, form: Form) -> Result<Box<dyn Timed + '_>, BenchError> {
        let k = tensor::kernel(t, form);
        let f = self.function(&k.ptx, &k.entry)?;
        // SAFETY: `f` was just resolved from a loaded module.
        let per_sm =
            unsafe { result::occupancy::max_active_block_per_multiprocessor(f, k.block as i32, 0) }
                .map_err(cu_err("cuOccupancyMaxActiveBlocksPerMultiprocessor"))?
                .max(1) as u32;
        // One wave of resident blocks: every block runs the same chunks, so the SMs finish
        // together and a launch has no tail.
        let grid = self.info.compute_units.max(1) * per_sm;
        // About 2 ms per launch at the table's rate (the gap between launches is then well
        // under 1 %), at least 4 chunks.
        let (major, minor) = self.info.compute_capability().unwrap_or((0, 0));
        let rate = tensor::macs_per_sm(major, minor, t, &self.info.name)
            .map(|(m, _)| {
                f64::from(m)
                    * f64::from(self.info.compute_units)
                    * self.info.clock_hz.unwrap_or(1.5e9)
            })
            .unwrap_or(1e14);
        let per_chunk = k.macs_per_launch(grid, 1);
        let chunks = ((2e-3 * rate / per_chunk).ceil() as u32).clamp(4, 1 << 16);
        let out = DevBuf::new(u64::from(grid * k.block) * 4)?;
        let args = KernelArgs::new(&[Arg::U64(out.ptr), Arg::U32(chunks)]);
        let expected = k.expected(chunks);
        Ok(Box::new(CuKernel {
            s: self,
            f,
            args,
            grid,
            block: k.block,
            bufs: vec![out],
            check: Check::Checksums([expected, expected]),
            work: 2.0 * k.macs_per_launch(grid, chunks),
            facts: vec![
                ("instruction".into(), json!(form.describe(t))),
                ("accumulate".into(), json!(t.accumulate())),
                ("grid".into(), json!(grid)),
                ("block".into(), json!(k.block)),
                ("blocks_per_sm".into(), json!(per_sm)),
                ("chunks".into(), json!(chunks)),
                ("instructions_per_chunk".into(), json!(k.per_chunk)),
                (
                    "validated".into(),
                    json!(format!(
                        "every input 1: each accumulator is {} x {} = {} at the end of each chunk; \
                         every thread's sum of them over the chunks is checked ({expected:#x})",
                        k.per_chunk,
                        k.k,
                        k.per_chunk * k.k
                    )),
                ),
                ("kernel".into(), json!("PTX, driver JIT")),
            ],
        }))
    }

    fn gemm(&mut self, t: TensorType, n: u64) -> Option<Result<Box<dyn Timed + '_>, BenchError>> {
        let made = (|| {
            let lt = cublas::Lt::open()?;
            let types = Types::for_tensor(t);
            let fill = |ty, count: u64| -> Result<DevBuf, BenchError> {
                let one = Types::one(ty);
                let bytes = count * one.len() as u64;
                let buf = DevBuf::new(bytes)?;
                let host: Vec<u8> = one.iter().copied().cycle().take(bytes as usize).collect();
                buf.write(0, &host)?;
                Ok(buf)
            };
            let a = fill(types.a, n * n)?;
            let b = fill(types.b, n * n)?;
            let d = DevBuf::new(n * n * Types::bytes(types.c) as u64)?;
            let ws = DevBuf::new(cublas::WORKSPACE as u64)?;
            Ok(Box::new(CuGemm {
                s: &*self,
                lt,
                types,
                n,
                a,
                b,
                d,
                ws,
                chosen: None,
                trials: Vec::new(),
            }) as Box<dyn Timed + '_>)
        })();
        Some(made)
    }

    fn launch(&mut self) -> Result<Box<dyn Timed + '_>, BenchError> {
        let f = self.function(ptx::EMPTY_PTX, "empty")?;
        let arg = DevBuf::new(4)?;
        let args = KernelArgs::new(&[Arg::U64(arg.ptr)]);
        Ok(Box::new(CuKernel {
            s: self,
            f,
            args,
            grid: 1,
            block: 1,
            bufs: vec![arg],
            check: Check::Nothing,
            work: 1.0,
            facts: vec![(
                "validated".into(),
                json!("nothing to check: the kernel is empty"),
            )],
        }))
    }
}

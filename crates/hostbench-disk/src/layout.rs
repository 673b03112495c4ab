//! Laying out the data file before the cases run (fully written, incompressible, O_DIRECT where
//! the cases use it) and opening it per case. Its own module so the driver in `run.rs` stays
//! under 1,000 lines and `lib.rs` a facade (issue 53).

use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use hostbench_core::buffer::Pages;
use hostbench_core::BenchError;

use crate::place::{self, DirectIo};
use crate::workload::{self, Op};
use crate::*;

/// Per-thread slice of the file for a case: whole blocks, the same size for every thread.
pub(crate) fn slice_bytes(file_bytes: u64, c: &CaseSpec) -> u64 {
    file_bytes / c.threads as u64 / c.block * c.block
}

pub(crate) fn aligned_for_direct(c: &CaseSpec, dio: &DirectIo) -> Result<usize, String> {
    match dio {
        DirectIo::Supported {
            mem_align,
            offset_align,
            ..
        } => {
            let a = (*offset_align).max(1) as u64;
            if c.block.is_multiple_of(a) {
                Ok((*mem_align).max(4096))
            } else {
                Err(format!(
                    "block size {} B is not a multiple of the O_DIRECT alignment {a} B",
                    c.block
                ))
            }
        }
        DirectIo::Unsupported(why) => Err(why.clone()),
    }
}

/// How the data file was written (`extra.layout` of every record).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Layout {
    /// O_DIRECT, sequential, from one reused buffer (an unaligned tail, if any, buffered).
    Direct,
    /// Through the page cache, then flushed and evicted.
    Buffered,
}

impl Layout {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Direct => "direct",
            Self::Buffered => "buffered",
        }
    }
}

/// Bytes per layout write: fio's 1 MiB write pass, and a multiple of every O_DIRECT alignment up
/// to it.
pub(crate) const LAYOUT_CHUNK: usize = 1 << 20;

/// Write the whole data file with incompressible (or checksummed) data, so no read ever hits a
/// hole and no write lands on an unwritten extent, then flush it and drop any of it from the page
/// cache.
///
/// `direct` (the O_DIRECT alignments, `Some` when the cases will use direct I/O) writes it as
/// `fio --rw=write --bs=1M --direct=1` does, the layout fio is compared on: sequentially, with
/// O_DIRECT, from one reused buffer. Written through the page cache instead (1 GiB of dirty pages
/// flushed by write-back), the same file took 4 KiB random writes at QD 32 at 0.4–0.5 × the rate
/// of a file written directly, run after run, on the Firecracker VM of issue 31 (ext4 on
/// virtio-blk; BENCHMARKS.md): the guest's path per I/O was the same (one bio, one request, two
/// extent lookups), the device's latency was twice as long for blocks first written by
/// write-back, and rewriting them later did not undo it. What decided it was the guest memory the
/// first write's data came from: O_DIRECT from one 1 GiB buffer (a page per block, as the page
/// cache is) was as slow, so the buffer here is one 1 MiB chunk, reused. A direct layout also
/// keeps a run from pushing a file's worth of other data out of the page cache.
///
/// Where O_DIRECT is refused after all (EINVAL on open or on the first write) the layout falls
/// back to the page cache; the result says which ran.
pub(crate) fn lay_out(
    path: &Path,
    bytes: u64,
    verify: bool,
    seed: u64,
    direct: Option<(usize, usize)>,
) -> Result<Layout, BenchError> {
    let io = |e: std::io::Error| BenchError::Failed(format!("laying out {}: {e}", path.display()));
    let f = File::create(path).map_err(io)?;
    let mut done = 0u64;
    let mut layout = Layout::Buffered;
    if let Some((mem_align, offset_align)) = direct {
        // Aligned chunks only: whatever is left below one `offset_align` goes through `f`.
        let align = offset_align.max(1);
        let chunk = LAYOUT_CHUNK.next_multiple_of(align);
        let aligned = bytes / align as u64 * align as u64;
        if mem_align <= hostbench_core::buffer::ALIGN && aligned > 0 {
            match lay_out_direct(path, aligned, chunk, verify, seed) {
                Ok(()) => {
                    done = aligned;
                    layout = Layout::Direct;
                }
                // EINVAL: this file or filesystem refuses O_DIRECT after all (the probe file
                // may have been luckier); anything else is a real failure.
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {}
                Err(e) => return Err(io(e)),
            }
        }
    }
    lay_out_buffered(&f, done, bytes, verify, seed).map_err(io)?;
    f.sync_all().map_err(io)?;
    place::evict_cache(f.as_raw_fd()).map_err(io)?;
    Ok(layout)
}

/// The bytes the layout writes at `off` (the generator continues from chunk to chunk, so a
/// layout's data does not depend on its chunk size).
pub(crate) fn layout_fill(
    buf: &mut [u8],
    off: u64,
    verify: bool,
    seed: u64,
    rng: &mut workload::Rng,
) {
    if verify {
        workload::fill_verified(buf, off, seed);
    } else {
        rng.fill(buf);
    }
}

/// `[0, bytes)` with O_DIRECT in `chunk`-byte writes (the last one shorter, still aligned) from
/// one buffer on a 2 MiB boundary, which satisfies any memory alignment O_DIRECT asks.
pub(crate) fn lay_out_direct(
    path: &Path,
    bytes: u64,
    chunk: usize,
    verify: bool,
    seed: u64,
) -> std::io::Result<()> {
    let f = OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)?;
    let mut buf = hostbench_core::buffer::Region::new(chunk, Pages::Small)
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    let mut rng = workload::Rng::new(seed);
    let mut off = 0u64;
    while off < bytes {
        let n = chunk.min((bytes - off) as usize);
        let data = &mut buf.as_mut_slice()[..n];
        layout_fill(data, off, verify, seed, &mut rng);
        write_all_at(&f, data, off)?;
        off += n as u64;
    }
    f.sync_all()
}

/// `[from, bytes)` through the page cache, in 1 MiB writes.
pub(crate) fn lay_out_buffered(
    f: &File,
    from: u64,
    bytes: u64,
    verify: bool,
    seed: u64,
) -> std::io::Result<()> {
    let mut buf = vec![0u8; LAYOUT_CHUNK];
    let mut rng = workload::Rng::new(seed ^ from);
    let mut off = from;
    while off < bytes {
        let n = LAYOUT_CHUNK.min((bytes - off) as usize);
        layout_fill(&mut buf[..n], off, verify, seed, &mut rng);
        write_all_at(f, &buf[..n], off)?;
        off += n as u64;
    }
    Ok(())
}

pub(crate) fn write_all_at(f: &File, data: &[u8], off: u64) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    f.write_all_at(data, off)
}

pub(crate) fn open_for(path: &Path, direct: bool, op: Op) -> std::io::Result<File> {
    let mut o = OpenOptions::new();
    o.read(true).write(op.writes());
    if direct {
        o.custom_flags(libc::O_DIRECT);
    }
    o.open(path)
}

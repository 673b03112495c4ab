//! What a disk case does: the access pattern (fio's names), the data written, and verification.
//!
//! Written data is incompressible: each I/O slot's buffer is filled from a PRNG once, and every
//! later write stamps its offset and a counter into each 4 KiB of it, so neither compression nor
//! deduplication (ZFS, SandForce-style SSDs, arrays — fio #463) can shrink what reaches the device,
//! at the cost of a few stores per 4 KiB instead of regenerating megabytes per write.
//!
//! `--verify` switches to checksummed units: every 512-byte unit of a file holds a header (magic,
//! the unit's own file offset, a seed) and a 64-bit checksum over the rest, written by the layout
//! and by every write, and checked on every read, so a torn, misplaced or corrupted block is named
//! by its offset whatever block size later cases use.

use std::time::Instant;

use crate::engine::{IoOp, Workload};

hostbench_core::named_enum! {
    /// The access pattern, with fio's names.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum Op("op") {
        Read = "read" | "seqread",
        Write = "write" | "seqwrite",
        RandRead = "randread",
        RandWrite = "randwrite",
        /// Random reads and writes mixed by `rwmix` (percentage of reads).
        RandRw = "randrw",
        /// Sequential reads and writes mixed by `rwmix`: the classic read+write.
        Rw = "rw" | "readwrite",
    }
}

impl Op {
    pub fn random(self) -> bool {
        matches!(self, Self::RandRead | Self::RandWrite | Self::RandRw)
    }

    pub fn reads(self) -> bool {
        !matches!(self, Self::Write | Self::RandWrite)
    }

    pub fn writes(self) -> bool {
        !matches!(self, Self::Read | Self::RandRead)
    }

    pub fn mixed(self) -> bool {
        matches!(self, Self::RandRw | Self::Rw)
    }
}

/// Bytes per verification unit.
pub const UNIT: usize = 512;
const MAGIC: u64 = 0x6873_626e_6368_2176; // "hsbnch!v"

/// Offsets and incompressible bytes come from the shared splitmix64 generator.
pub use hostbench_core::rng::SplitMix64 as Rng;

/// FNV-1a over 8-byte words: cheap, and any changed byte changes it.
fn checksum(data: &[u8]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for chunk in data.chunks(8) {
        let mut w = [0u8; 8];
        w[..chunk.len()].copy_from_slice(chunk);
        h ^= u64::from_ne_bytes(w);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// Fill `buf`, which will land at file offset `offset`, with checksummed units.
pub fn fill_verified(buf: &mut [u8], offset: u64, seed: u64) {
    for (i, unit) in buf.chunks_mut(UNIT).enumerate() {
        let at = offset + (i * UNIT) as u64;
        if unit.len() < 32 {
            unit.fill(0);
            continue;
        }
        Rng::new(at ^ seed).fill(&mut unit[32..]);
        let sum = checksum(&unit[32..]);
        unit[0..8].copy_from_slice(&MAGIC.to_ne_bytes());
        unit[8..16].copy_from_slice(&at.to_ne_bytes());
        unit[16..24].copy_from_slice(&seed.to_ne_bytes());
        unit[24..32].copy_from_slice(&sum.to_ne_bytes());
    }
}

/// Check data read from file offset `offset`; the error names the first bad unit.
pub fn check_verified(buf: &[u8], offset: u64) -> Result<(), String> {
    for (i, unit) in buf.chunks(UNIT).enumerate() {
        let at = offset + (i * UNIT) as u64;
        if unit.len() < 32 {
            continue;
        }
        let word = |r: std::ops::Range<usize>| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&unit[r]);
            u64::from_ne_bytes(w)
        };
        if word(0..8) != MAGIC {
            return Err(format!("verify failed at offset {at}: no block header"));
        }
        if word(8..16) != at {
            return Err(format!(
                "verify failed at offset {at}: block written for offset {}",
                word(8..16)
            ));
        }
        if word(24..32) != checksum(&unit[32..]) {
            return Err(format!("verify failed at offset {at}: checksum mismatch"));
        }
    }
    Ok(())
}

/// Stamp offset and counter into every 4 KiB of an already random buffer (see the module header).
fn scramble(buf: &mut [u8], offset: u64, counter: u64) {
    for (i, chunk) in buf.chunks_mut(4096).enumerate() {
        if chunk.len() >= 16 {
            chunk[0..8].copy_from_slice(&(offset + (i * 4096) as u64).to_ne_bytes());
            chunk[8..16].copy_from_slice(&counter.to_ne_bytes());
        }
    }
}

/// One thread's I/O stream over its own region of its own file.
#[derive(Debug)]
pub struct Pattern {
    pub op: Op,
    pub block: u64,
    /// Region this thread owns: `[start, start + len)` in its file; `len` is a whole number of
    /// blocks.
    pub start: u64,
    pub len: u64,
    /// Percentage of reads in mixed ops.
    pub rwmix_read: u32,
    pub verify: bool,
    pub seed: u64,
    /// Stop issuing at this instant (time-based runs)…
    pub deadline: Option<Instant>,
    /// …or after this many bytes (amount-based runs).
    pub remaining: Option<u64>,
    rng: Rng,
    cursor: u64,
    counter: u64,
}

impl Pattern {
    pub fn new(op: Op, block: u64, start: u64, len: u64, seed: u64) -> Self {
        Self {
            op,
            block,
            start,
            len,
            rwmix_read: 50,
            verify: false,
            seed,
            deadline: None,
            remaining: None,
            rng: Rng::new(seed),
            cursor: 0,
            counter: 0,
        }
    }

    fn blocks(&self) -> u64 {
        (self.len / self.block).max(1)
    }
}

impl Workload for Pattern {
    fn next(&mut self) -> Option<IoOp> {
        if self.deadline.is_some_and(|d| Instant::now() >= d) {
            return None;
        }
        if let Some(r) = self.remaining {
            if r == 0 {
                return None;
            }
            self.remaining = Some(r.saturating_sub(self.block));
        }
        let index = if self.op.random() {
            self.rng.next_u64() % self.blocks()
        } else {
            let i = self.cursor;
            self.cursor = (self.cursor + 1) % self.blocks();
            i
        };
        let write = match self.op {
            Op::Read | Op::RandRead => false,
            Op::Write | Op::RandWrite => true,
            Op::Rw | Op::RandRw => (self.rng.next_u64() % 100) as u32 >= self.rwmix_read,
        };
        Some(IoOp {
            offset: self.start + index * self.block,
            len: self.block as usize,
            write,
        })
    }

    fn fill(&mut self, op: &IoOp, buf: &mut [u8]) {
        self.counter += 1;
        if self.verify {
            fill_verified(&mut buf[..op.len], op.offset, self.seed ^ self.counter);
            return;
        }
        // Engines hand out zeroed buffers, and `scramble` never touches bytes 16..24: zeros
        // there mean this slot has not been randomised yet (a random 8-byte zero is 2^-64).
        if buf.len() < 24 || buf[16..24].iter().all(|&b| b == 0) {
            self.rng.fill(buf);
        }
        scramble(&mut buf[..op.len], op.offset, self.counter);
    }

    fn check(&mut self, op: &IoOp, buf: &[u8]) -> Result<(), String> {
        if self.verify {
            check_verified(&buf[..op.len], op.offset)
        } else {
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ops_parse_with_fio_names() {
        for op in Op::ALL {
            assert_eq!(Op::parse(op.name()).unwrap(), op);
        }
        assert_eq!(Op::parse("readwrite").unwrap(), Op::Rw);
        assert!(Op::parse("trim").unwrap_err().to_string().contains("trim"));
        assert!(Op::RandRw.mixed() && Op::RandRw.random() && Op::RandRw.writes());
        assert!(!Op::Read.writes() && Op::Read.reads());
    }

    #[test]
    fn sequential_wraps_and_random_stays_in_region() {
        let mut p = Pattern::new(Op::Read, 4096, 1 << 20, 4 * 4096, 1);
        let offs: Vec<u64> = (0..6).map(|_| p.next().unwrap().offset).collect();
        assert_eq!(offs[0], 1 << 20);
        assert_eq!(offs[4], 1 << 20);
        let mut r = Pattern::new(Op::RandRw, 512, 4096, 64 * 512, 2);
        r.rwmix_read = 70;
        let (mut reads, mut n) = (0, 0);
        for _ in 0..10_000 {
            let op = r.next().unwrap();
            assert!(op.offset >= 4096 && op.offset + 512 <= 4096 + 64 * 512);
            assert_eq!(op.offset % 512, 0);
            reads += usize::from(!op.write);
            n += 1;
        }
        let share = reads as f64 / n as f64;
        assert!((0.65..0.75).contains(&share), "{share}");
    }

    #[test]
    fn amount_based_stops_after_the_amount() {
        let mut p = Pattern::new(Op::Write, 1000, 0, 10_000, 3);
        p.remaining = Some(3500);
        assert_eq!(std::iter::from_fn(|| p.next()).count(), 4);
    }

    #[test]
    fn verified_blocks_catch_corruption_and_misplacement() {
        let mut buf = vec![0u8; 8192];
        fill_verified(&mut buf, 40960, 9);
        assert!(check_verified(&buf, 40960).is_ok());
        // The same data read back from elsewhere is caught by the header.
        assert!(check_verified(&buf, 0)
            .unwrap_err()
            .contains("written for offset"));
        let mut bad = buf.clone();
        bad[UNIT * 3 + 100] ^= 1;
        let e = check_verified(&bad, 40960).unwrap_err();
        assert!(e.contains(&format!("offset {}", 40960 + 3 * UNIT)), "{e}");
        assert!(check_verified(&vec![0u8; 512], 0)
            .unwrap_err()
            .contains("header"));
    }

    #[test]
    fn written_data_is_not_compressible_or_repeated() {
        let mut p = Pattern::new(Op::Write, 8192, 0, 1 << 20, 4);
        let mut buf = vec![0u8; 8192];
        let op = p.next().unwrap();
        p.fill(&op, &mut buf);
        let first = buf.clone();
        let op2 = p.next().unwrap();
        p.fill(&op2, &mut buf);
        assert_ne!(first, buf, "two writes carry different data");
        let zeros = buf.iter().filter(|&&b| b == 0).count();
        assert!(zeros < 200, "{zeros} zero bytes in random data");
    }
}

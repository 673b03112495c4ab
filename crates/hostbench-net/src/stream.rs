//! What every data stream shares, TCP or UDP: when it stops, the bytes it sends and the UDP
//! datagram header's size. Its own module so that the wire protocol (which sizes and schedules
//! streams) and the data paths (which run them) both depend on it and not on each other.

use std::time::Instant;

/// When a sender or ping-pong loop stops.
#[derive(Debug, Clone, Copy)]
pub enum Stop {
    At(Instant),
    Bytes(u64),
    Count(u64),
}

/// A block of incompressible bytes (the shared splitmix64), so no compression on the path
/// flatters a link.
pub fn payload(len: usize, seed: u64) -> Vec<u8> {
    let mut out = vec![0u8; len];
    hostbench_core::rng::SplitMix64::new(seed).fill(&mut out);
    out
}

/// UDP datagram header: session tag, sequence number, send time (3 × u64, little-endian).
pub const HEADER_BYTES: usize = 24;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payload_is_not_constant() {
        let p = payload(4096, 7);
        assert_eq!(p.len(), 4096);
        let distinct: std::collections::HashSet<u8> = p.iter().copied().collect();
        assert!(distinct.len() > 200);
    }
}

//! The network phase's schedule: which node pairs are measured, in rounds where no node is in two
//! pairs at once (a node serving one test while it is the client of another would measure
//! itself as much as the link).
//!
//! - `ring`: each node to its successor (N pairs; 2 rounds for even N, 3 for odd).
//! - `all`: every unordered pair once, by the circle method: N−1 rounds of N/2 disjoint pairs
//!   (N rounds with one node resting when N is odd). At N nodes that is N(N−1)/2 tests, so the
//!   phase grows linearly with N in rounds but each round holds N/2 tests at once: with a test
//!   of t seconds it takes about (N−1)·t.
//! - `random:K`: K random partners per node (a deterministic seed, so a re-run measures the same
//!   pairs), then packed into rounds greedily: the bounded schedule for large fleets.
//! - `none`: no network phase.

use hostbench_core::rng::SplitMix64;
use hostbench_core::BenchError;

/// A pair: (client, server) as indices into the node list.
pub type Pair = (usize, usize);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PairSchedule {
    Ring,
    All,
    Random(usize),
    None,
}

impl PairSchedule {
    pub fn parse(text: &str) -> Result<Self, BenchError> {
        let t = text.trim().to_ascii_lowercase();
        let bad = || {
            BenchError::invalid(format!(
                "--net-pairs '{text}': expected ring, all, none or random:K (K partners per node)"
            ))
        };
        Ok(match t.as_str() {
            "ring" => PairSchedule::Ring,
            "all" => PairSchedule::All,
            "none" => PairSchedule::None,
            _ => {
                let k = t.strip_prefix("random:").ok_or_else(bad)?;
                match k.parse::<usize>() {
                    Ok(k) if k > 0 => PairSchedule::Random(k),
                    _ => return Err(bad()),
                }
            }
        })
    }

    pub fn name(&self) -> String {
        match self {
            PairSchedule::Ring => "ring".into(),
            PairSchedule::All => "all".into(),
            PairSchedule::Random(k) => format!("random:{k}"),
            PairSchedule::None => "none".into(),
        }
    }

    /// The rounds for `n` nodes; `seed` picks the random partners.
    pub fn rounds(&self, n: usize, seed: u64) -> Vec<Vec<Pair>> {
        if n < 2 {
            return Vec::new();
        }
        match self {
            PairSchedule::None => Vec::new(),
            PairSchedule::Ring if n == 2 => vec![vec![(0, 1)], vec![(1, 0)]],
            PairSchedule::Ring => pack((0..n).map(|i| (i, (i + 1) % n)).collect()),
            PairSchedule::All => circle(n),
            PairSchedule::Random(k) => pack(random_pairs(n, *k, seed)),
        }
    }
}

/// Round-robin tournament: fix node 0, rotate the others; round r pairs position i with
/// position m−1−i. An odd count gets a resting slot (`n`), whose pairs are dropped.
fn circle(n: usize) -> Vec<Vec<Pair>> {
    let m = n + n % 2;
    let mut ring: Vec<usize> = (0..m).collect();
    let mut rounds = Vec::with_capacity(m - 1);
    for _ in 0..m - 1 {
        let mut round = Vec::with_capacity(m / 2);
        for i in 0..m / 2 {
            let (a, b) = (ring[i], ring[m - 1 - i]);
            if a < n && b < n {
                // Who is the client: of (lo, hi), lo when hi − lo is odd, else hi. Each node is
                // then the client of about half its pairs ((N−1)/2 exactly for odd N), so every
                // node has a figure of its own sends.
                let (lo, hi) = (a.min(b), a.max(b));
                round.push(if (hi - lo) % 2 == 1 {
                    (lo, hi)
                } else {
                    (hi, lo)
                });
            }
        }
        rounds.push(round);
        ring[1..].rotate_right(1);
    }
    rounds
}

/// K distinct partners per node, each (a, b) with a != b, no pair twice (either way round).
fn random_pairs(n: usize, k: usize, seed: u64) -> Vec<Pair> {
    let k = k.min(n - 1);
    let mut rng = SplitMix64::new(seed);
    let mut seen = std::collections::HashSet::new();
    let mut pairs = Vec::with_capacity(n * k);
    for a in 0..n {
        let mut others: Vec<usize> = (0..n).filter(|&b| b != a).collect();
        rng.shuffle(&mut others);
        for b in others.into_iter().take(k) {
            if seen.insert((a.min(b), a.max(b))) {
                pairs.push((a, b));
            }
        }
    }
    pairs
}

/// Greedy packing into rounds of disjoint pairs, first fit, in the given order.
fn pack(pairs: Vec<Pair>) -> Vec<Vec<Pair>> {
    let mut rounds: Vec<(Vec<Pair>, std::collections::HashSet<usize>)> = Vec::new();
    for p in pairs {
        match rounds
            .iter_mut()
            .find(|(_, busy)| !busy.contains(&p.0) && !busy.contains(&p.1))
        {
            Some((round, busy)) => {
                round.push(p);
                busy.extend([p.0, p.1]);
            }
            None => rounds.push((vec![p], [p.0, p.1].into_iter().collect())),
        }
    }
    rounds.into_iter().map(|(r, _)| r).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn disjoint(rounds: &[Vec<Pair>]) -> bool {
        rounds.iter().all(|r| {
            let mut s = HashSet::new();
            r.iter().all(|&(a, b)| a != b && s.insert(a) && s.insert(b))
        })
    }

    #[test]
    fn all_pairs_by_the_circle_method() {
        for n in 2..12 {
            let rounds = PairSchedule::All.rounds(n, 0);
            assert!(disjoint(&rounds), "n={n}");
            let pairs: HashSet<(usize, usize)> = rounds
                .iter()
                .flatten()
                .map(|&(a, b)| (a.min(b), a.max(b)))
                .collect();
            assert_eq!(pairs.len(), n * (n - 1) / 2, "n={n}");
            assert_eq!(rounds.iter().map(Vec::len).sum::<usize>(), n * (n - 1) / 2);
            let expect_rounds = if n % 2 == 0 { n - 1 } else { n };
            assert_eq!(rounds.len(), expect_rounds, "n={n}");
            if n % 2 == 0 {
                assert!(rounds.iter().all(|r| r.len() == n / 2));
            }
            // Every node is the client of about half its pairs.
            let mut clients = vec![0usize; n];
            for &(c, _) in rounds.iter().flatten() {
                clients[c] += 1;
            }
            for (node, &k) in clients.iter().enumerate() {
                assert!(k + 1 >= (n - 1) / 2 && k <= n / 2, "n={n} node {node}: {k}");
            }
        }
    }

    #[test]
    fn ring_each_node_to_its_successor() {
        let rounds = PairSchedule::Ring.rounds(5, 0);
        assert!(disjoint(&rounds));
        let mut pairs: Vec<Pair> = rounds.into_iter().flatten().collect();
        pairs.sort_unstable();
        assert_eq!(pairs, vec![(0, 1), (1, 2), (2, 3), (3, 4), (4, 0)]);
        assert_eq!(PairSchedule::Ring.rounds(4, 0).len(), 2);
        assert_eq!(PairSchedule::Ring.rounds(3, 0).len(), 3);
        assert_eq!(
            PairSchedule::Ring.rounds(2, 0),
            vec![vec![(0, 1)], vec![(1, 0)]]
        );
        assert!(PairSchedule::Ring.rounds(1, 0).is_empty());
    }

    #[test]
    fn random_partners_are_bounded_and_repeatable() {
        let a = PairSchedule::Random(2).rounds(50, 7);
        assert_eq!(a, PairSchedule::Random(2).rounds(50, 7));
        assert!(disjoint(&a));
        let pairs: Vec<Pair> = a.iter().flatten().copied().collect();
        assert!(pairs.len() <= 100 && pairs.len() > 50);
        let mut deg = vec![0usize; 50];
        for &(x, y) in &pairs {
            deg[x] += 1;
            deg[y] += 1;
        }
        assert!(
            deg.iter().all(|&d| d >= 2),
            "every node has its own K partners"
        );
        // K beyond N-1 is every other node.
        let full: usize = PairSchedule::Random(9)
            .rounds(4, 1)
            .iter()
            .map(Vec::len)
            .sum();
        assert_eq!(full, 6);
    }

    #[test]
    fn parse() {
        assert_eq!(PairSchedule::parse("ring").ok(), Some(PairSchedule::Ring));
        assert_eq!(
            PairSchedule::parse("Random:3").ok(),
            Some(PairSchedule::Random(3))
        );
        for bad in ["", "random:", "random:0", "star", "random:x"] {
            let e = PairSchedule::parse(bad).err().map(|e| e.to_string());
            assert!(e.is_some_and(|m| m.contains("--net-pairs")), "{bad}");
        }
    }
}

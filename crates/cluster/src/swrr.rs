//! Smooth weighted round robin, as nginx does it: every pick adds each
//! peer's weight to its running total, takes the peer with the largest
//! total and subtracts the sum of weights from it. Over any window of
//! `sum(weights)` picks each peer is chosen in proportion to its weight,
//! and the picks of a heavy peer are spread out instead of bunched.
//!
//! Weights are kept as integers (hundredths) as nginx does, so equal peers
//! alternate exactly instead of drifting on rounding errors.
//!
//! Totals are kept by worker id, so a peer that leaves and comes back, or a
//! call where some peers are filtered out, does not disturb the others.

use std::collections::HashMap;

/// The running totals of one group of peers (one per kind and model).
#[derive(Debug, Clone, Default)]
pub struct Swrr {
    current: HashMap<String, i64>,
}

impl Swrr {
    pub fn new() -> Swrr {
        Swrr::default()
    }

    /// Picks among `peers` (id, weight); weights below 0.01 count as 0.01
    /// so every eligible peer is still reached. `None` when `peers` is empty.
    pub fn pick(&mut self, peers: &[(&str, f64)]) -> Option<usize> {
        if peers.is_empty() {
            return None;
        }
        let weight = |w: f64| {
            if w.is_finite() {
                (w * 100.0).round().clamp(1.0, 1e12) as i64
            } else {
                1
            }
        };
        let total: i64 = peers.iter().map(|(_, w)| weight(*w)).sum();
        let mut best: Option<(usize, i64)> = None;
        for (i, (id, w)) in peers.iter().enumerate() {
            let c = self.current.entry((*id).to_string()).or_insert(0);
            *c += weight(*w);
            if best.is_none_or(|(_, b)| *c > b) {
                best = Some((i, *c));
            }
        }
        let (i, _) = best?;
        if let Some(c) = self.current.get_mut(peers[i].0) {
            *c -= total;
        }
        Some(i)
    }

    /// Forgets peers no longer in `ids` (workers that left the pool).
    pub fn retain(&mut self, keep: impl Fn(&str) -> bool) {
        self.current.retain(|id, _| keep(id));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn picks(s: &mut Swrr, peers: &[(&str, f64)], n: usize) -> Vec<&'static str> {
        (0..n)
            .map(|_| match peers[s.pick(peers).unwrap()].0 {
                "a" => "a",
                "b" => "b",
                _ => "c",
            })
            .collect()
    }

    #[test]
    fn nginx_sequence_for_weights_5_1_1() {
        let mut s = Swrr::new();
        let peers = [("a", 5.0), ("b", 1.0), ("c", 1.0)];
        assert_eq!(
            picks(&mut s, &peers, 7),
            ["a", "a", "b", "a", "c", "a", "a"]
        );
    }

    #[test]
    fn shares_follow_weights_over_every_full_cycle() {
        let mut s = Swrr::new();
        let peers = [("a", 3.0), ("b", 2.0), ("c", 1.0)];
        for _ in 0..5 {
            let cycle = picks(&mut s, &peers, 6);
            let count = |p: &str| cycle.iter().filter(|x| **x == p).count();
            assert_eq!((count("a"), count("b"), count("c")), (3, 2, 1), "{cycle:?}");
        }
    }

    #[test]
    fn equal_weights_alternate_and_nobody_starves() {
        let mut s = Swrr::new();
        let peers = [("a", 1.0), ("b", 1.0)];
        assert_eq!(picks(&mut s, &peers, 4), ["a", "b", "a", "b"]);
        let zero = [("a", 0.0), ("b", 0.0), ("c", 0.0)];
        let mut s = Swrr::new();
        let got = picks(&mut s, &zero, 3);
        assert!(got.contains(&"a") && got.contains(&"b") && got.contains(&"c"));
        assert_eq!(Swrr::new().pick(&[]), None);
    }
}

//! The prefix cache's second tier: KV states of prompts that a slot had
//! to give up, kept in host memory so a later request that shares their
//! prefix restores them instead of evaluating the prompt again (what
//! llama-server's `--cache-ram` and vLLM's CPU offloading do).
//!
//! A slot keeps only its last prompt's KV. With more distinct prompts in
//! circulation than slots (chat turns, RAG templates, agents' tool loops)
//! the slot that held a prompt is often reused before the prompt comes
//! back; this tier keeps it, up to a byte budget, least recently used out
//! first.
//!
//! Generic over the token and the stored state so the bookkeeping is tested
//! without a model.

/// A byte-budgeted set of (prompt prefix, KV state) entries.
#[derive(Debug)]
pub(super) struct HostCache<T, S> {
    entries: Vec<Entry<T, S>>,
    bytes: usize,
    capacity: usize,
    clock: u64,
}

#[derive(Debug)]
struct Entry<T, S> {
    tokens: Vec<T>,
    state: S,
    bytes: usize,
    used: u64,
}

impl<T: PartialEq + Clone, S> HostCache<T, S> {
    /// An empty cache that holds at most `capacity` bytes of states
    /// (0: the tier is off).
    pub(super) fn new(capacity: usize) -> Self {
        Self {
            entries: Vec::new(),
            bytes: 0,
            capacity,
            clock: 0,
        }
    }

    /// Bytes of the states held.
    pub(super) fn bytes(&self) -> usize {
        self.bytes
    }

    /// Whether an entry already holds `tokens` (or a longer prompt that
    /// starts with them): storing them again would add nothing.
    pub(super) fn covers(&self, tokens: &[T]) -> bool {
        self.entries.iter().any(|e| e.tokens.starts_with(tokens))
    }

    /// The entry sharing the longest prefix with `prompt`, and how many
    /// tokens it shares; the most recently used among equals.
    pub(super) fn best(&self, prompt: &[T]) -> Option<(usize, usize)> {
        self.entries
            .iter()
            .enumerate()
            .map(|(i, e)| (i, common_prefix(&e.tokens, prompt), e.used))
            .filter(|&(_, common, _)| common > 0)
            .max_by_key(|&(_, common, used)| (common, used))
            .map(|(i, common, _)| (i, common))
    }

    /// Entry `at` (from [`Self::best`]): its tokens and state, marked as
    /// just used.
    pub(super) fn take_turn(&mut self, at: usize) -> Option<(&[T], &S)> {
        self.clock += 1;
        let clock = self.clock;
        self.entries.get_mut(at).map(|e| {
            e.used = clock;
            (e.tokens.as_slice(), &e.state)
        })
    }

    /// Stores `tokens` with the state `save` returns (its bytes with it),
    /// unless an entry already covers them or the state alone exceeds the
    /// budget. Entries the new one covers go; then the least recently used
    /// until it fits. Returns whether it was stored. `save` runs only
    /// when the entry is wanted (taking a state costs a copy of the KV).
    pub(super) fn insert_with(
        &mut self,
        tokens: &[T],
        save: impl FnOnce() -> Option<(S, usize)>,
    ) -> bool {
        if self.capacity == 0 || tokens.is_empty() || self.covers(tokens) {
            return false;
        }
        let Some((state, bytes)) = save() else {
            return false;
        };
        if bytes > self.capacity {
            return false;
        }
        let mut i = 0;
        while i < self.entries.len() {
            if tokens.starts_with(&self.entries[i].tokens) {
                self.bytes -= self.entries.swap_remove(i).bytes;
            } else {
                i += 1;
            }
        }
        while self.bytes + bytes > self.capacity {
            let Some(oldest) = (0..self.entries.len()).min_by_key(|&i| self.entries[i].used) else {
                break;
            };
            self.bytes -= self.entries.swap_remove(oldest).bytes;
        }
        self.clock += 1;
        self.entries.push(Entry {
            tokens: tokens.to_vec(),
            state,
            bytes,
            used: self.clock,
        });
        self.bytes += bytes;
        true
    }
}

pub(super) fn common_prefix<T: PartialEq>(a: &[T], b: &[T]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A state that is just its label, 10 bytes per token.
    fn store(
        cache: &mut HostCache<u32, &'static str>,
        tokens: &[u32],
        label: &'static str,
    ) -> bool {
        cache.insert_with(tokens, || Some((label, tokens.len() * 10)))
    }

    #[test]
    fn the_longest_shared_prefix_wins() {
        let mut cache = HostCache::new(1_000);
        assert!(store(&mut cache, &[1, 2, 3], "a"));
        assert!(store(&mut cache, &[1, 2, 7, 8, 9], "b"));
        let (at, common) = cache.best(&[1, 2, 7, 8, 5]).expect("a hit");
        assert_eq!(common, 4);
        assert_eq!(cache.take_turn(at).map(|(_, s)| *s), Some("b"));
        assert_eq!(cache.best(&[4, 5]), None, "nothing shared is no hit");
    }

    #[test]
    fn a_covered_prompt_is_not_stored_twice_and_a_longer_one_replaces_its_prefix() {
        let mut cache = HostCache::new(1_000);
        assert!(store(&mut cache, &[1, 2, 3, 4], "long"));
        let mut saved = false;
        assert!(!cache.insert_with(&[1, 2], || {
            saved = true;
            Some(("short", 20))
        }));
        assert!(!saved, "a covered prompt's state is never taken");
        assert!(store(&mut cache, &[1, 2, 3, 4, 5, 6], "longer"));
        assert_eq!(cache.bytes(), 60, "the prefix entry went");
        let (at, _) = cache.best(&[1, 2, 3]).expect("a hit");
        assert_eq!(cache.take_turn(at).map(|(_, s)| *s), Some("longer"));
    }

    #[test]
    fn the_least_recently_used_goes_when_the_budget_is_full() {
        let mut cache = HostCache::new(100);
        assert!(store(&mut cache, &[1, 1, 1, 1], "one"));
        assert!(store(&mut cache, &[2, 2, 2, 2], "two"));
        // Using "one" makes "two" the oldest.
        let (at, _) = cache.best(&[1, 1]).expect("a hit");
        cache.take_turn(at);
        assert!(store(&mut cache, &[3, 3, 3, 3], "three"));
        assert_eq!(cache.bytes(), 80);
        assert!(cache.covers(&[1, 1, 1, 1]));
        assert!(!cache.covers(&[2, 2, 2, 2]), "the least recently used went");
        assert!(cache.covers(&[3, 3]));
        assert!(
            !store(&mut cache, &[4; 11], "too big"),
            "over the budget alone"
        );
        assert!(!HostCache::<u32, &str>::new(0).insert_with(&[1], || Some(("x", 1))));
    }
}

//! Per-chunk KV reuse (ADR 0013), the parts that need no model: the
//! settings, the retrieved chunks a request names, where they lie in its
//! tokens, and the byte-bounded cache of their saved KV.
//!
//! A RAG prompt is mostly retrieved chunks from a small knowledge base, so
//! the same chunk comes back across requests at other positions and after
//! other chunks. With [`KvReuse::Chunks`] the engine saves a chunk's KV the
//! first time it evaluates it and, when the chunk comes back, places that
//! KV at the new position instead of evaluating it again (llama.cpp
//! re-applies RoPE for the shift). The placed KV attended to the chunk's
//! first context, not to this one, so the result is approximate; the first
//! [`ChunkReuse::recompute`] tokens of each placed chunk are evaluated
//! anew as a correction (EPIC's "recompute the chunk's first tokens").

use std::collections::HashMap;
use std::hash::Hash;
use std::ops::Range;

/// One retrieved chunk of a request's prompt: its id (for the record) and
/// its text, which appears verbatim in one of the messages.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct PromptChunk {
    pub id: String,
    pub text: String,
}

/// How prompt KV is reused across requests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum KvReuse {
    /// Only by shared prefix: a token's KV is reused only where every token
    /// before it and its position are the same, so outputs are exactly
    /// those of a full prefill (the default).
    #[default]
    Exact,
    /// Also per retrieved chunk, wherever it appears (approximate, opt-in).
    Chunks(ChunkReuse),
}

/// Settings of per-chunk reuse.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ChunkReuse {
    /// Tokens at the start of each placed chunk evaluated again in the new
    /// context (the correction). Default 16.
    pub recompute: u32,
    /// Host memory for saved chunk KV, least recently used out first.
    /// Default 256 MiB.
    pub cache_bytes: usize,
    /// Move a chunk placed at another position by rotating its own saved
    /// keys on the host (default), rather than by llama.cpp's shift, which
    /// rotates every cell of the KV cache at the next step. Off only to
    /// compare the two; models whose rotation the host move does not
    /// reproduce use llama.cpp's shift either way.
    pub move_on_host: bool,
}

impl Default for ChunkReuse {
    fn default() -> Self {
        Self {
            recompute: 16,
            cache_bytes: 256 << 20,
            move_on_host: true,
        }
    }
}

/// Byte ranges of `chunks` in `text`, in order of appearance; each is
/// searched after the previous one found, and one not found is left out.
pub(super) fn find_chunks(text: &str, chunks: &[PromptChunk]) -> Vec<Range<usize>> {
    let mut found = Vec::new();
    let mut from = 0;
    for chunk in chunks {
        if chunk.text.is_empty() {
            continue;
        }
        if let Some(at) = text[from..].find(&chunk.text) {
            let start = from + at;
            found.push(start..start + chunk.text.len());
            from = start + chunk.text.len();
        }
    }
    found
}

/// Token ranges of the byte ranges `chunks`, given the byte length of each
/// token's text: the tokens lying wholly inside each range. Ranges that end
/// within `keep_last` tokens of the end, or hold fewer than `min_len`
/// tokens, are left out.
pub(super) fn token_spans(
    piece_lens: &[usize],
    chunks: &[Range<usize>],
    keep_last: usize,
    min_len: usize,
) -> Vec<Range<usize>> {
    let mut starts = Vec::with_capacity(piece_lens.len() + 1);
    let mut at = 0;
    for &len in piece_lens {
        starts.push(at);
        at += len;
    }
    starts.push(at);
    let limit = piece_lens.len().saturating_sub(keep_last);
    chunks
        .iter()
        .filter_map(|bytes| {
            let first = starts.iter().position(|&s| s >= bytes.start)?;
            let end = starts.iter().rposition(|&s| s <= bytes.end)?;
            (end >= first + min_len && end <= limit).then_some(first..end)
        })
        .collect()
}

/// Saved chunk KV by the chunk's tokens, bounded in bytes, least recently
/// used out first. Generic over the token and the state so the bookkeeping
/// is tested without a model.
#[derive(Debug)]
pub(super) struct ChunkCache<T, S> {
    entries: HashMap<Vec<T>, Entry<S>>,
    bytes: usize,
    capacity: usize,
    clock: u64,
}

#[derive(Debug)]
struct Entry<S> {
    state: S,
    /// The position the chunk's first token had when it was saved.
    pos: usize,
    bytes: usize,
    used: u64,
}

impl<T: Eq + Hash + Clone, S> ChunkCache<T, S> {
    pub(super) fn new(capacity: usize) -> Self {
        Self {
            entries: HashMap::new(),
            bytes: 0,
            capacity,
            clock: 0,
        }
    }

    pub(super) fn bytes(&self) -> usize {
        self.bytes
    }

    pub(super) fn contains(&self, tokens: &[T]) -> bool {
        self.entries.contains_key(tokens)
    }

    /// The saved state of `tokens` and the position it was saved at,
    /// marked as just used.
    pub(super) fn get(&mut self, tokens: &[T]) -> Option<(&S, usize)> {
        self.clock += 1;
        let clock = self.clock;
        self.entries.get_mut(tokens).map(|e| {
            e.used = clock;
            (&e.state, e.pos)
        })
    }

    /// Stores the state `save` returns (with its bytes) for `tokens` saved
    /// at `pos`, unless they are there already or the state alone exceeds
    /// the budget; the least recently used go until it fits. `save` runs
    /// only when the entry is wanted.
    pub(super) fn insert_with(
        &mut self,
        tokens: &[T],
        pos: usize,
        save: impl FnOnce() -> Option<(S, usize)>,
    ) -> bool {
        if self.capacity == 0 || tokens.is_empty() || self.contains(tokens) {
            return false;
        }
        let Some((state, bytes)) = save() else {
            return false;
        };
        if bytes > self.capacity {
            return false;
        }
        while self.bytes + bytes > self.capacity {
            let Some(oldest) = self
                .entries
                .iter()
                .min_by_key(|(_, e)| e.used)
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            if let Some(e) = self.entries.remove(&oldest) {
                self.bytes -= e.bytes;
            }
        }
        self.clock += 1;
        self.entries.insert(
            tokens.to_vec(),
            Entry {
                state,
                pos,
                bytes,
                used: self.clock,
            },
        );
        self.bytes += bytes;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(text: &str) -> PromptChunk {
        PromptChunk {
            id: text.to_owned(),
            text: text.to_owned(),
        }
    }

    #[test]
    fn chunks_are_found_in_order_and_missing_ones_left_out() {
        let text = "Notes: alpha beta. gamma. Question?";
        let found = find_chunks(
            text,
            &[chunk("alpha beta."), chunk("zeta"), chunk("gamma.")],
        );
        assert_eq!(found, vec![7..18, 19..25]);
        assert_eq!(&text[found[1].clone()], "gamma.");
        // A chunk is searched after the previous one: a repeat is not
        // found before it.
        assert_eq!(find_chunks("b a", &[chunk("a"), chunk("b")]), vec![2..3]);
    }

    #[test]
    #[allow(clippy::single_range_in_vec_init)] // one chunk per call
    fn token_spans_hold_only_whole_tokens_inside_the_chunk() {
        // Tokens: "ab" "c " "de" "f" "gh" → byte starts 0 2 4 6 7 (end 9).
        let pieces = [2, 2, 2, 1, 2];
        // Bytes 2..7 ("c def"): tokens 1..4.
        assert_eq!(token_spans(&pieces, &[2..7], 0, 1), vec![1..4]);
        // Bytes 3..7: token 1 starts before, so tokens 2..4.
        assert_eq!(token_spans(&pieces, &[3..7], 0, 1), vec![2..4]);
        // Too short, or reaching into the last `keep_last` tokens.
        assert!(token_spans(&pieces, &[3..7], 0, 3).is_empty());
        assert!(token_spans(&pieces, &[2..9], 1, 1).is_empty());
        assert_eq!(token_spans(&pieces, &[2..9], 0, 1), vec![1..5]);
    }

    #[test]
    fn the_cache_is_bounded_and_drops_the_least_recently_used() {
        let mut cache = ChunkCache::<u32, &str>::new(100);
        assert!(cache.insert_with(&[1, 2], 5, || Some(("a", 40))));
        assert!(cache.insert_with(&[3, 4], 9, || Some(("b", 40))));
        let mut saved = false;
        assert!(!cache.insert_with(&[1, 2], 0, || {
            saved = true;
            Some(("again", 40))
        }));
        assert!(!saved, "a chunk already there is not saved again");
        assert_eq!(cache.get(&[1, 2]), Some((&"a", 5)));
        assert!(cache.insert_with(&[5], 0, || Some(("c", 40))));
        assert_eq!(cache.bytes(), 80);
        assert!(cache.contains(&[1, 2]), "used last, kept");
        assert!(!cache.contains(&[3, 4]), "least recently used, dropped");
        assert!(!cache.insert_with(&[6], 0, || Some(("huge", 101))));
        assert!(!ChunkCache::<u32, &str>::new(0).insert_with(&[1], 0, || Some(("x", 1))));
    }
}

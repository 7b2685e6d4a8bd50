//! Per-chunk KV reuse ([`KvReuse::Chunks`](crate::llm::KvReuse), ADR
//! 0013): a retrieved chunk's KV is saved the first time the engine
//! evaluates it and placed, when the chunk comes back, at its new position
//! in the request's sequence instead of being evaluated again.
//!
//! The KV cache is one stream (`kv_unified`), and one sequence id past the
//! slots is a scratch sequence `T`. Saving chunk `c` of sequence `R`:
//! `seq_cp(R → T)` over `c`'s positions (in one stream the cells are
//! shared, nothing is copied), `state_seq_get(T)` (only `T`'s cells), then
//! `seq_rm(T)` (the cells stay `R`'s). Placing it at position `p`:
//! `state_seq_set(T)` (clears `T`, writes fresh cells nobody else holds),
//! `seq_rm` of the first `recompute` tokens (evaluated anew instead), then
//! `seq_add(T, +shift)` (RoPE is re-applied to the moved keys at the next
//! decode), `seq_cp(T → R)` (shared cells) and `seq_rm(T)`, which leaves
//! the cells to `R` alone. llama.cpp requires a sequence's next batch to
//! start right after its last cell, so a chunk is placed when `R`'s prefill
//! has reached its first reused token, and prefill continues after it.

use std::ops::Range;

use llama_cpp_2::context::session::LlamaStateSeqFlags;

use super::Session;
use crate::llm::GenerateRequest;
use crate::llm::chunks::{find_chunks, token_spans};
use crate::llm::sequence::Sequence;
use crate::llm::shape;

/// Chunks shorter than this beyond the recomputed tokens are evaluated as
/// usual: placing them saves too little.
const MIN_PLACED: usize = 8;

impl Session<'_> {
    /// The token ranges of `request`'s retrieved chunks in its prompt
    /// `tokens` (rendered from `text`); none unless chunk reuse is on, or
    /// where a token's text cannot be matched to the prompt's.
    pub(super) fn chunk_spans(
        &self,
        request: &GenerateRequest,
        text: &str,
        tokens: &[llama_cpp_2::token::LlamaToken],
    ) -> Vec<Range<usize>> {
        let Some(reuse) = self.chunk_reuse else {
            return Vec::new();
        };
        let bytes = find_chunks(text, &request.chunks);
        if bytes.is_empty() {
            return Vec::new();
        }
        let vocab = self.model.vocab();
        let pieces: Vec<Vec<u8>> = tokens
            .iter()
            .map(|&t| vocab.detokenize(&[t], false, true))
            .collect();
        // A BOS token added by the tokenizer has no text in the prompt.
        let mut lens: Vec<usize> = pieces.iter().map(Vec::len).collect();
        let joined: Vec<u8> = pieces.concat();
        let offset = joined.len().checked_sub(text.len());
        match offset {
            Some(0) if joined == text.as_bytes() => {}
            Some(n) if n == lens[0] && &joined[n..] == text.as_bytes() => lens[0] = 0,
            _ => return Vec::new(),
        }
        token_spans(
            &lens,
            &bytes,
            shape::MIN_ROWS + 1,
            reuse.recompute as usize + MIN_PLACED,
        )
    }

    /// Where `span` is placed from: its first token not evaluated anew.
    fn anchor(&self, span: &Range<usize>) -> usize {
        let recompute = self.chunk_reuse.map_or(0, |r| r.recompute as usize);
        span.start + recompute.min(span.len())
    }

    /// Prompt tokens `seq` may evaluate before its next placeable chunk
    /// (all that are left when none is).
    pub(super) fn until_placed(&self, seq: &Sequence) -> usize {
        let left = seq.feed_len() - seq.fed;
        seq.spans
            .iter()
            .filter(|s| {
                let anchor = self.anchor(s);
                anchor > seq.fed
                    && anchor < s.end
                    && self.chunk_cache.contains(&seq.prompt[(*s).clone()])
            })
            .map(|s| self.anchor(s) - seq.fed)
            .next()
            .map_or(left, |n| n.min(left))
    }

    /// Places the cached chunks whose first reused token is where each
    /// sequence's prefill stands.
    pub(super) fn place_chunks(&mut self, seqs: &mut [&mut Sequence]) {
        if self.chunk_reuse.is_none() {
            return;
        }
        for seq in seqs.iter_mut() {
            if seq.id < 0 || seq.finish.is_some() || !seq.in_prefill() {
                continue;
            }
            for i in 0..seq.spans.len() {
                let span = seq.spans[i].clone();
                let anchor = self.anchor(&span);
                if anchor != seq.fed || anchor >= span.end {
                    continue;
                }
                if self.place_chunk(seq.id, &seq.prompt[span.clone()], span.start, anchor) {
                    seq.placed += span.end - anchor;
                    self.chunk_placed += (span.end - anchor) as u64;
                    seq.fed = span.end;
                }
            }
        }
    }

    /// Places the cached KV of `tokens` (a chunk starting at `start`) into
    /// sequence `id` from position `anchor` on; whether it worked (if not,
    /// nothing of it is left in `id`).
    fn place_chunk(
        &mut self,
        id: i32,
        tokens: &[llama_cpp_2::token::LlamaToken],
        start: usize,
        anchor: usize,
    ) -> bool {
        let t = self.scratch;
        let Some((state, saved_at)) = self.chunk_cache.get(tokens) else {
            return false;
        };
        let (Ok(skip), Ok(first), Ok(end)) = (
            u32::try_from(saved_at + (anchor - start)),
            u32::try_from(saved_at),
            i32::try_from(start + tokens.len()),
        ) else {
            return false;
        };
        let shift = i64::try_from(start).unwrap_or(0) - i64::try_from(saved_at).unwrap_or(0);
        let Ok(shift) = i32::try_from(shift) else {
            return false;
        };
        let ctx = &mut self.ctx;
        let ok = ctx.state_seq_set(state, t).is_ok()
            && ctx.kv_cache_seq_rm(t, Some(first), Some(skip)).is_ok()
            && ctx.kv_cache_seq_add(t, Some(skip), None, shift).is_ok()
            && ctx.kv_cache_seq_cp(t, id, None, None).is_ok();
        let _ = ctx.clear_kv_cache_seq(u32::try_from(t).ok(), None, None);
        if ok && ctx.kv_cache_seq_pos_max(id) == end - 1 {
            return true;
        }
        let _ = ctx.clear_kv_cache_seq(u32::try_from(id).ok(), u32::try_from(anchor).ok(), None);
        false
    }

    /// Saves the KV of every chunk each sequence has evaluated since the
    /// last call and the cache does not hold yet.
    pub(super) fn save_chunks(&mut self, seqs: &mut [&mut Sequence]) {
        if self.chunk_reuse.is_none() {
            return;
        }
        for seq in seqs.iter_mut() {
            while let Some(span) = seq.spans.get(seq.saved).cloned() {
                if seq.id < 0 || span.end > seq.fed.min(seq.prompt.len()) {
                    break;
                }
                seq.saved += 1;
                self.save(seq.id, &seq.prompt[span.clone()], span.start);
            }
        }
    }

    /// Saves the KV of `tokens`, at positions from `start` in sequence
    /// `id`, to the chunk cache (unless it holds them).
    fn save(&mut self, id: i32, tokens: &[llama_cpp_2::token::LlamaToken], start: usize) {
        let (Ok(p0), Ok(p1)) = (u32::try_from(start), u32::try_from(start + tokens.len())) else {
            return;
        };
        let t = self.scratch;
        let ctx = &mut self.ctx;
        self.chunk_cache.insert_with(tokens, start, || {
            let _ = ctx.clear_kv_cache_seq(u32::try_from(t).ok(), None, None);
            ctx.kv_cache_seq_cp(id, t, Some(p0), Some(p1)).ok()?;
            let state = ctx.state_seq_get(t, LlamaStateSeqFlags::empty());
            let _ = ctx.clear_kv_cache_seq(u32::try_from(t).ok(), None, None);
            let state = state.ok()?;
            let bytes = state.byte_len();
            Some((state, bytes))
        });
    }

    /// Prompt tokens placed from the chunk cache so far, and the bytes it
    /// holds.
    pub(in crate::llm) fn chunk_usage(&self) -> (u64, usize) {
        (self.chunk_placed, self.chunk_cache.bytes())
    }
}

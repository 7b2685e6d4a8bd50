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

use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::context::session::LlamaStateSeqFlags;

use super::Session;
use crate::llm::GenerateRequest;
use crate::llm::chunks::{find_chunks, token_spans};
use crate::llm::host_cache::common_prefix;
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
    /// sequence's prefill stands: from the slot's staging sequence when
    /// staged, else loaded now. A staged chunk prefill went past (its
    /// tokens came from another request) is dropped.
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
                let staged = seq.staged.iter().position(|&k| k == i);
                if let Some(at) = staged.filter(|_| anchor != seq.fed) {
                    if anchor < seq.fed {
                        seq.staged.swap_remove(at);
                        self.drop_staged(seq.id, anchor, span.end);
                    }
                    continue;
                }
                if anchor != seq.fed || anchor >= span.end {
                    continue;
                }
                let from_stage = staged.is_some_and(|at| {
                    seq.staged.swap_remove(at);
                    self.take_staged(seq.id, anchor, span.end)
                });
                if from_stage
                    || self.load_chunk(seq.id, &seq.prompt[span.clone()], span.start, anchor)
                {
                    seq.placed += span.end - anchor;
                    self.chunk_placed += (span.end - anchor) as u64;
                    seq.fed = span.end;
                }
            }
        }
    }

    /// The sequence where slot `id` stages chunks, if the context has it.
    fn stage_of(&self, id: i32) -> Option<i32> {
        let stage = self.scratch.checked_add(1)?.checked_add(id)?;
        (u32::try_from(stage).ok()? < self.n_seq_max).then_some(stage)
    }

    /// Stages, for each sequence in prefill, the cached chunks its prefill
    /// has not reached: each is loaded and moved to its position in the
    /// slot's staging sequence now, and [`Self::place_chunks`] hands it to
    /// the sequence when prefill gets there. llama.cpp applies a move at
    /// the next decode by re-applying RoPE to every cell of the cache,
    /// whatever moved (`llama_kv_cache::build_graph_shift`), so moves made
    /// together cost one such pass rather than one per chunk. Chunks that
    /// another running request shares the prefix of are left to sharing
    /// (`share.rs`); none are staged in a pool, whose cells the scheduler
    /// counts per sequence.
    pub(super) fn stage_chunks(&mut self, seqs: &mut [&mut Sequence]) {
        if self.chunk_reuse.is_none() || self.pooled {
            return;
        }
        for i in 0..seqs.len() {
            let seq = &*seqs[i];
            if seq.id < 0 || seq.finish.is_some() || !seq.in_prefill() {
                continue;
            }
            let Some(stage) = self.stage_of(seq.id) else {
                continue;
            };
            let shared = (0..seqs.len())
                .filter(|&j| j != i && seqs[j].id >= 0)
                .map(|j| common_prefix(&seq.prompt, &seqs[j].prompt))
                .max()
                .unwrap_or(0);
            for k in 0..seq.spans.len() {
                let seq = &*seqs[i];
                let span = seq.spans[k].clone();
                let anchor = self.anchor(&span);
                if anchor <= seq.fed
                    || anchor >= span.end
                    || span.start < shared
                    || seq.staged.contains(&k)
                {
                    continue;
                }
                if self.load_chunk(stage, &seq.prompt[span.clone()], span.start, anchor) {
                    seqs[i].staged.push(k);
                }
            }
        }
    }

    /// Hands positions `anchor..end` of slot `id`'s staging sequence to
    /// `id`; whether it worked (if not, nothing of it is left in `id`).
    fn take_staged(&mut self, id: i32, anchor: usize, end: usize) -> bool {
        let (Some(stage), Ok(p0), Ok(p1)) =
            (self.stage_of(id), u32::try_from(anchor), u32::try_from(end))
        else {
            return false;
        };
        let ok = self
            .ctx
            .kv_cache_seq_cp(stage, id, Some(p0), Some(p1))
            .is_ok();
        self.drop_staged(id, anchor, end);
        if ok && i64::from(self.ctx.kv_cache_seq_pos_max(id)) == end as i64 - 1 {
            return true;
        }
        let _ = self
            .ctx
            .clear_kv_cache_seq(u32::try_from(id).ok(), Some(p0), None);
        false
    }

    /// Frees positions `anchor..end` of slot `id`'s staging sequence.
    fn drop_staged(&mut self, id: i32, anchor: usize, end: usize) {
        if let Some(stage) = self.stage_of(id) {
            let _ = self.ctx.clear_kv_cache_seq(
                u32::try_from(stage).ok(),
                u32::try_from(anchor).ok(),
                u32::try_from(end).ok(),
            );
        }
    }

    /// Frees every chunk staged for `seq` (it ends or is preempted).
    pub(super) fn unstage(&mut self, seq: &mut Sequence) {
        if seq.staged.is_empty() {
            return;
        }
        seq.staged.clear();
        if let Some(stage) = self.stage_of(seq.id) {
            let _ = self
                .ctx
                .clear_kv_cache_seq(u32::try_from(stage).ok(), None, None);
        }
    }

    /// Loads the cached KV of `tokens` (a chunk starting at `start`) into
    /// sequence `id` at positions from `anchor` on; whether it worked (if
    /// not, nothing of it is left in `id`). A chunk saved elsewhere is
    /// moved on the host ([`RopeShift`](crate::llm::state_shift::RopeShift)) where the model's rotation allows,
    /// so llama.cpp has no cells to shift at the next decode; else by
    /// `seq_add`.
    fn load_chunk(
        &mut self,
        id: i32,
        tokens: &[llama_cpp_2::token::LlamaToken],
        start: usize,
        anchor: usize,
    ) -> bool {
        let t = self.scratch;
        let rope = self.rope;
        let Some((state, saved_at)) = self.chunk_cache.get(tokens) else {
            return false;
        };
        let (Ok(skip), Ok(first), Ok(end), Ok(p0), Ok(p1)) = (
            u32::try_from(saved_at + (anchor - start)),
            u32::try_from(saved_at),
            i32::try_from(start + tokens.len()),
            u32::try_from(start),
            u32::try_from(anchor),
        ) else {
            return false;
        };
        let shift = i64::try_from(start).unwrap_or(0) - i64::try_from(saved_at).unwrap_or(0);
        let Ok(shift) = i32::try_from(shift) else {
            return false;
        };
        let moved = rope.filter(|_| shift != 0).and_then(|rope| {
            let mut bytes = state.clone();
            rope.shift(&mut bytes, shift).ok().map(|()| bytes)
        });
        let ctx = &mut self.ctx;
        let placed = match &moved {
            Some(bytes) => {
                set_state(ctx, bytes, t) && ctx.kv_cache_seq_rm(t, Some(p0), Some(p1)).is_ok()
            }
            None => {
                set_state(ctx, state, t)
                    && ctx.kv_cache_seq_rm(t, Some(first), Some(skip)).is_ok()
                    && ctx.kv_cache_seq_add(t, Some(skip), None, shift).is_ok()
            }
        };
        let ok = placed
            && ctx.kv_cache_seq_pos_max(t) == end - 1
            && ctx.kv_cache_seq_cp(t, id, None, None).is_ok();
        let _ = ctx.clear_kv_cache_seq(u32::try_from(t).ok(), None, None);
        if ok && ctx.kv_cache_seq_pos_max(id) >= end - 1 {
            return true;
        }
        let _ = ctx.clear_kv_cache_seq(
            u32::try_from(id).ok(),
            u32::try_from(anchor).ok(),
            u32::try_from(end).ok(),
        );
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
            let state = get_state(ctx, t);
            let _ = ctx.clear_kv_cache_seq(u32::try_from(t).ok(), None, None);
            let state = state?;
            let bytes = state.len();
            Some((state, bytes))
        });
    }

    /// Prompt tokens placed from the chunk cache so far, and the bytes it
    /// holds.
    pub(in crate::llm) fn chunk_usage(&self) -> (u64, usize) {
        (self.chunk_placed, self.chunk_cache.bytes())
    }
}

/// The saved KV state of sequence `t` (llama.cpp's single-sequence layout),
/// as bytes [`RopeShift`](crate::llm::state_shift::RopeShift) can move.
fn get_state(ctx: &LlamaContext<'_>, t: i32) -> Option<Vec<u8>> {
    let flags = LlamaStateSeqFlags::empty();
    let size = ctx.state_seq_get_size_ext(t, flags);
    let mut bytes = vec![0u8; size];
    // SAFETY: `bytes` is as long as llama.cpp just said this sequence's
    // state is, and the context is not used in between (it lives on this
    // worker thread alone).
    #[allow(unsafe_code)]
    let written = unsafe { ctx.state_seq_get_data_ext(bytes.as_mut_ptr(), t, flags) };
    (written == size && size > 0).then_some(bytes)
}

/// Loads `bytes` (from [`get_state`], maybe moved) into sequence `t`;
/// whether llama.cpp took them.
fn set_state(ctx: &mut LlamaContext<'_>, bytes: &[u8], t: i32) -> bool {
    // SAFETY: llama.cpp reads at most `bytes.len()` bytes from the slice
    // and checks the layout as it goes, failing on a mismatch.
    #[allow(unsafe_code)]
    unsafe {
        ctx.state_seq_set_data_ext(bytes, t, LlamaStateSeqFlags::empty())
    }
}

//! The prefix cache's slots: which slot a new request takes and how much
//! of its prompt is already there, a slot's KV offloaded to host memory and
//! restored from it or copied from another slot, preemption and eviction.

use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::context::session::{LlamaStateSeqFlags, SeqState};
use llama_cpp_2::token::LlamaToken;

use super::Session;
use crate::llm::host_cache::common_prefix;
use crate::llm::sequence::Sequence;
use crate::llm::shape::{self, Placement};

/// Cached prompts shorter than this stay out of host memory: evaluating
/// them again costs little.
const HOST_MIN_TOKENS: usize = 16;
/// Tokens a host entry or a donor slot must share beyond the chosen slot's
/// prefix to be copied in (a copy moves the entry's whole KV).
const HOST_MIN_GAIN: usize = 4;

impl Session<'_> {
    /// Keeps `prefix` (the first tokens evaluated in slot `id`) and frees
    /// the slot's cells after it.
    pub(super) fn keep_prefix(&mut self, id: i32, prefix: &[LlamaToken]) {
        let prefix = if self.prefix_cache { prefix } else { &[] };
        let Some(slot) = usize::try_from(id).ok().filter(|&i| i < self.cached.len()) else {
            return;
        };
        let kept = self
            .ctx
            .clear_kv_cache_seq(
                u32::try_from(id).ok(),
                u32::try_from(prefix.len()).ok(),
                None,
            )
            .unwrap_or(false);
        self.cached[slot] = if kept { prefix.to_vec() } else { Vec::new() };
        if !kept {
            let _ = self
                .ctx
                .clear_kv_cache_seq(u32::try_from(id).ok(), None, None);
        }
    }

    /// Tokens slot `id`'s cached prompt shares with `prompt`.
    fn shared(&self, id: i32, prompt: &[LlamaToken]) -> usize {
        usize::try_from(id)
            .ok()
            .and_then(|i| self.cached.get(i))
            .map_or(0, |cached| common_prefix(cached, prompt))
    }

    /// Where a request with `prompt` goes, of the free slots `free`, with
    /// the slots of the sequences `running` (see [`shape::place`]).
    pub(in crate::llm) fn place(
        &self,
        free: &[i32],
        running: &[i32],
        prompt: &[LlamaToken],
    ) -> Placement {
        shape::place(free, running, |id| self.shared(id, prompt), self.pooled)
    }

    /// Puts `seq` in the slot `placed` chose, reusing the prompt tokens
    /// already in its KV (at least the last two prompt tokens are evaluated
    /// again: the last for its logits, and two rows keep the chunk on the
    /// same kernels as a cold prompt's, see [`shape`]). When host memory or
    /// the donor slot holds a prompt that shares more, its KV is copied into
    /// the slot instead; a slot prompt about to be cut goes to host memory
    /// first. Returns the tokens reused.
    pub(in crate::llm) fn attach(
        &mut self,
        seq: &mut Sequence,
        id: i32,
        placed: &Placement,
    ) -> usize {
        let usable = |shared: usize| shared.min(seq.prompt.len().saturating_sub(shape::MIN_ROWS));
        let mut common = placed.common;
        let mut from_host = false;
        let donor = placed
            .donor
            .filter(|&(_, shared)| usable(shared) >= usable(common) + HOST_MIN_GAIN);
        let beaten = donor.map_or(common, |(_, shared)| shared);
        if let Some((at, shared)) = self.host.best(&seq.prompt)
            && usable(shared) >= usable(beaten) + HOST_MIN_GAIN
        {
            self.offload(id);
            from_host = self.restore(at, id);
            common = if from_host { shared } else { 0 };
        } else if let Some((from, shared)) = donor {
            self.offload(id);
            common = if self.copy_slot(from, id) { shared } else { 0 };
        } else if usable(common) < self.cached_len(id) {
            // The slot's prompt is about to be cut: keep it in host memory.
            self.offload(id);
        }
        let reuse = usable(common);
        let kept = reuse > 0
            && self
                .ctx
                .clear_kv_cache_seq(u32::try_from(id).ok(), u32::try_from(reuse).ok(), None)
                .unwrap_or(false);
        let reuse = if kept {
            reuse
        } else {
            let _ = self
                .ctx
                .clear_kv_cache_seq(u32::try_from(id).ok(), None, None);
            0
        };
        if let Some(slot) = usize::try_from(id)
            .ok()
            .and_then(|i| self.cached.get_mut(i))
        {
            slot.clear();
        }
        seq.id = id;
        seq.fed = reuse;
        if seq.preemptions == 0 {
            seq.reused = reuse;
        }
        if from_host {
            self.host_hits += reuse as u64;
        }
        reuse
    }

    /// Tokens of the prompt cached in slot `id`.
    fn cached_len(&self, id: i32) -> usize {
        usize::try_from(id)
            .ok()
            .and_then(|i| self.cached.get(i))
            .map_or(0, Vec::len)
    }

    /// Copies slot `id`'s cached prompt and its KV to host memory, unless
    /// it is short or already there.
    fn offload(&mut self, id: i32) {
        let Some(tokens) = usize::try_from(id).ok().and_then(|i| self.cached.get(i)) else {
            return;
        };
        if tokens.len() < HOST_MIN_TOKENS {
            return;
        }
        let ctx = &self.ctx;
        self.host.insert_with(tokens, || {
            let state = ctx.state_seq_get(id, LlamaStateSeqFlags::empty()).ok()?;
            let bytes = state.byte_len();
            Some((state, bytes))
        });
    }

    /// Copies free slot `from`'s cached prompt and its KV into slot `id`
    /// (emptied first); whether it worked (if not, `id` is left empty).
    fn copy_slot(&mut self, from: i32, id: i32) -> bool {
        let (Some(src), Some(dst)) = (
            usize::try_from(from)
                .ok()
                .filter(|&i| i < self.cached.len()),
            usize::try_from(id).ok().filter(|&i| i < self.cached.len()),
        ) else {
            return false;
        };
        let Ok(state) = self.ctx.state_seq_get(from, LlamaStateSeqFlags::empty()) else {
            let _ = self
                .ctx
                .clear_kv_cache_seq(u32::try_from(id).ok(), None, None);
            self.cached[dst].clear();
            return false;
        };
        let tokens = self.cached[src].clone();
        load_slot(&mut self.ctx, &mut self.cached[dst], id, &state, &tokens)
    }

    /// Loads host entry `at` into slot `id` (emptied first); whether it
    /// worked (if not, the slot is left empty).
    fn restore(&mut self, at: usize, id: i32) -> bool {
        let Some(slot) = usize::try_from(id).ok().filter(|&i| i < self.cached.len()) else {
            return false;
        };
        let Some((tokens, state)) = self.host.take_turn(at) else {
            let _ = self
                .ctx
                .clear_kv_cache_seq(u32::try_from(id).ok(), None, None);
            self.cached[slot].clear();
            return false;
        };
        load_slot(&mut self.ctx, &mut self.cached[slot], id, state, tokens)
    }

    /// Prompt tokens restored from host memory so far, and the bytes held there.
    pub(in crate::llm) fn host_usage(&self) -> (u64, usize) {
        (self.host_hits, self.host.bytes())
    }

    /// Preempts `seq` (recompute): frees every cell of its slot, which the
    /// caller returns to the free list, and resets it to evaluate its prompt
    /// and output again when it resumes.
    pub(in crate::llm) fn preempt(&mut self, seq: &mut Sequence) {
        self.unstage(seq);
        let _ = self
            .ctx
            .clear_kv_cache_seq(u32::try_from(seq.id).ok(), None, None);
        if let Some(slot) = usize::try_from(seq.id)
            .ok()
            .and_then(|i| self.cached.get_mut(i))
        {
            slot.clear();
        }
        seq.preempt();
    }

    /// KV cells held by the cached prefixes of the free slots `ids`.
    pub(in crate::llm) fn cached_cells(&self, ids: &[i32]) -> usize {
        ids.iter()
            .filter_map(|&id| usize::try_from(id).ok())
            .filter_map(|i| self.cached.get(i))
            .map(Vec::len)
            .sum()
    }

    /// Frees the cached prefixes of the free slots `ids` (before preempting
    /// a running request, cached KV nobody uses goes first).
    pub(in crate::llm) fn evict_cached(&mut self, ids: &[i32]) {
        for &id in ids {
            if self.cached_len(id) == 0 {
                continue;
            }
            // Out of the pool, into host memory.
            self.offload(id);
            let _ = self
                .ctx
                .clear_kv_cache_seq(u32::try_from(id).ok(), None, None);
            if let Some(slot) = usize::try_from(id)
                .ok()
                .and_then(|i| self.cached.get_mut(i))
            {
                slot.clear();
            }
        }
    }

    /// Frees every KV cell and forgets the cached prefixes (after a failed step).
    pub(in crate::llm) fn release_all(&mut self) {
        self.ctx.clear_kv_cache();
        self.cached.iter_mut().for_each(Vec::clear);
    }
}

/// Empties slot `id`, then loads `state` (the KV of `tokens`) into it and
/// records `tokens` as its cached prompt; whether it worked (if not, the
/// slot is left empty).
fn load_slot(
    ctx: &mut LlamaContext<'_>,
    cached: &mut Vec<LlamaToken>,
    id: i32,
    state: &SeqState,
    tokens: &[LlamaToken],
) -> bool {
    let seq = u32::try_from(id).ok();
    let _ = ctx.clear_kv_cache_seq(seq, None, None);
    cached.clear();
    if ctx.state_seq_set(state, id).is_ok() {
        cached.extend_from_slice(tokens);
        true
    } else {
        let _ = ctx.clear_kv_cache_seq(seq, None, None);
        false
    }
}

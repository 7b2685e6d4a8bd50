//! Prefix sharing between running sequences: a sequence in prefill takes
//! the KV of the prompt tokens it shares with another running sequence
//! (busy, not only a free slot's cached prompt), and waits rather than
//! evaluating tokens another sequence in prefill is evaluating now.
//!
//! Without this, requests that arrive together each evaluate what they
//! share (the system text, the template's head, a first retrieved chunk
//! they have in common): a slot keeps only its last prompt, and a busy
//! slot's prompt was out of reach. Exact by construction, as the prefix
//! cache: a token's KV is taken only where every token before it and its
//! position are the same. In one KV stream (`kv_unified`: a pool, or
//! per-chunk reuse) `seq_cp` adds the sequence to the donor's cells, so
//! nothing is copied; with a stream per slot the donor's state is copied
//! (`state_seq_get`/`set`, as a free slot's donor is in `slots.rs`).

use llama_cpp_2::context::session::LlamaStateSeqFlags;

use super::Session;
use crate::llm::host_cache::common_prefix;
use crate::llm::sequence::Sequence;
use crate::llm::shape;

/// Tokens a donor must add to be taken: in one stream sharing costs
/// nothing; a state copy moves the donor's whole KV.
const MIN_GAIN_SHARED: usize = 2;
const MIN_GAIN_COPIED: usize = 32;

impl Session<'_> {
    fn min_gain(&self) -> usize {
        if self.unified {
            MIN_GAIN_SHARED
        } else {
            MIN_GAIN_COPIED
        }
    }

    /// Before a prefill step: every sequence in prefill takes, from the
    /// running sequence that evaluated most of its prompt, the tokens
    /// beyond its own.
    pub(super) fn share_prefixes(&mut self, seqs: &mut [&mut Sequence]) {
        if !self.prefix_cache {
            return;
        }
        let gain = self.min_gain();
        for i in 0..seqs.len() {
            let Some(limit) = shareable(seqs[i]) else {
                continue;
            };
            let fed = seqs[i].fed;
            // The donor with the most of this prompt evaluated.
            let donor = (0..seqs.len())
                .filter(|&j| j != i && seqs[j].id >= 0)
                .map(|j| {
                    let other = &*seqs[j];
                    let done = other.fed.min(other.prompt.len());
                    (
                        common_prefix(&seqs[i].prompt[..limit], &other.prompt[..done]),
                        j,
                    )
                })
                .max();
            if let Some((common, j)) = donor
                && common >= fed + gain
            {
                let from = seqs[j].id;
                let held = self.take_prefix(seqs[i].id, from, fed, common);
                let seq = &mut *seqs[i];
                if held == common && seq.preemptions == 0 {
                    seq.reused += common - fed;
                    self.shared_hits += (common - fed) as u64;
                }
                seq.fed = held;
                seq.saved = seq
                    .saved
                    .min(seq.spans.iter().take_while(|s| s.end <= held).count());
            }
        }
    }

    /// Per sequence in prefill, whether it waits this step for another one
    /// in prefill that is evaluating its next prompt tokens (the one
    /// further along, the older among equals), to take them next step
    /// rather than evaluate them twice.
    pub(super) fn waiting(&self, seqs: &[&mut Sequence]) -> Vec<bool> {
        let gain = self.min_gain();
        (0..seqs.len())
            .map(|i| {
                let me = &*seqs[i];
                let Some(limit) = shareable(me).filter(|_| self.prefix_cache) else {
                    return false;
                };
                (0..seqs.len()).any(|j| {
                    let other = &*seqs[j];
                    j != i
                        && other.id >= 0
                        && other.finish.is_none()
                        && other.in_prefill()
                        && (other.fed > me.fed || (other.fed == me.fed && j < i))
                        && common_prefix(&me.prompt[..limit], &other.prompt) >= me.fed + gain
                })
            })
            .collect()
    }

    /// Gives sequence `id` the KV of positions `fed..common` from sequence
    /// `from` (whose prompt is the same up to `common`); returns the
    /// positions `id` holds after: `common`, or `fed` if that failed (0 if
    /// a failed copy emptied it).
    fn take_prefix(&mut self, id: i32, from: i32, fed: usize, common: usize) -> usize {
        let (Ok(dst), Ok(p0), Ok(p1)) =
            (u32::try_from(id), u32::try_from(fed), u32::try_from(common))
        else {
            return fed;
        };
        let holds = |ctx: &llama_cpp_2::context::LlamaContext<'_>, n: usize| {
            i64::from(ctx.kv_cache_seq_pos_max(id)) == n as i64 - 1
        };
        let ok = if self.unified {
            let _ = self.ctx.clear_kv_cache_seq(Some(dst), Some(p0), None);
            self.ctx
                .kv_cache_seq_cp(from, id, Some(p0), Some(p1))
                .is_ok()
        } else {
            // A stream per slot: copy the donor's state over this one (its
            // first `fed` positions are the same tokens), then cut it.
            match self.ctx.state_seq_get(from, LlamaStateSeqFlags::empty()) {
                Ok(state) => {
                    self.ctx.state_seq_set(&state, id).is_ok()
                        && self
                            .ctx
                            .clear_kv_cache_seq(Some(dst), Some(p1), None)
                            .unwrap_or(false)
                }
                Err(_) => false,
            }
        };
        if ok && holds(&self.ctx, common) {
            return common;
        }
        // Back to what it had: nothing past `fed`, or nothing at all when
        // a failed copy emptied it.
        let _ = self.ctx.clear_kv_cache_seq(Some(dst), Some(p0), None);
        if holds(&self.ctx, fed) {
            return fed;
        }
        let _ = self.ctx.clear_kv_cache_seq(Some(dst), None, None);
        0
    }

    /// Prompt tokens taken from running sequences since the last call.
    pub(in crate::llm) fn take_shared_hits(&mut self) -> u64 {
        std::mem::take(&mut self.shared_hits)
    }
}

/// How far into its prompt `seq` may take another sequence's KV (its last
/// [`shape::MIN_ROWS`] tokens are evaluated: the last for its logits), or
/// `None` when it is not in prefill of its prompt.
fn shareable(seq: &Sequence) -> Option<usize> {
    let limit = seq.prompt.len().saturating_sub(shape::MIN_ROWS);
    (seq.id >= 0 && seq.finish.is_none() && seq.fed < limit).then_some(limit)
}

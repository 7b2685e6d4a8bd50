//! The KV cache as the scheduler sees it: whether a request may join the
//! running batch, and how many cells the next step lacks (then cached
//! prefixes are evicted and the least urgent, newest request is preempted).

use super::sequence::Sequence;

/// The KV cache as the scheduler sees it.
pub(super) struct Pool {
    /// One pool shared by all sequences (admission by prompt, preemption),
    /// rather than a full context reserved per request.
    pub(super) pooled: bool,
    pub(super) cells: usize,
    pub(super) n_batch: usize,
}

impl Pool {
    /// Whether a request that evaluates `feed` tokens first may join the
    /// running ones: every prompt in the batch fully evaluated, plus one
    /// cell per sequence for its next token, fits (vLLM's watermark rule).
    pub(super) fn admits<'a>(
        &self,
        running: impl ExactSizeIterator<Item = &'a Sequence>,
        feed: usize,
    ) -> bool {
        if running.len() == 0 {
            return true;
        }
        let committed: usize = running.map(|seq| seq.held().max(seq.feed_len()) + 1).sum();
        committed + feed < self.cells
    }

    /// Cells missing for the next step: what the running sequences hold,
    /// what the step adds (each generating sequence its token, drafts and a
    /// padding row; the prompt chunks, `n_batch` at most) and the cached
    /// prefixes of free slots, against the pool.
    pub(super) fn shortfall<'a>(
        &self,
        running: impl Iterator<Item = &'a Sequence>,
        cached: usize,
    ) -> usize {
        let mut held = cached;
        let mut decode = 0;
        let mut prefill = 0;
        for seq in running.filter(|seq| !seq.is_finished()) {
            held += seq.held();
            if seq.in_prefill() {
                prefill += seq.feed_len() - seq.fed;
            } else {
                decode += 2 + seq.lookup.map_or(0, |l| l.num_tokens);
            }
        }
        (held + decode + prefill.min(self.n_batch)).saturating_sub(self.cells)
    }
}

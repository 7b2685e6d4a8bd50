//! How a step's batch is shaped so that each row is computed by the same
//! llama.cpp CPU kernels whatever else is in the batch.
//!
//! llama.cpp picks among attention kernels by the shape of a micro-batch,
//! and they round differently: a "tiled" kernel for 64 or more query rows
//! of one sequence, and a "split-KV" kernel for a lone query row of a lone
//! sequence over 512 or more cached cells (we measured logits up to 0.8
//! apart between it and the per-row kernel with 2 threads on SmolLM2 at a
//! 444-token context). Everything else runs the per-row kernel, whose
//! result for a row does not depend on the other rows. With separate KV
//! streams, llama.cpp puts each run of consecutive sequence ids with the
//! same number of rows in one micro-batch. So a step:
//!
//! - orders generating sequences by id and gives every sequence of a run
//!   the same number of rows (its token, its draft tokens, then padding
//!   whose output and KV are dropped), at least two for a lone sequence
//!   with a long context;
//! - evaluates prompts in chunks of 2 to 63 tokens (never leaving one
//!   token for a last chunk alone).
//!
//! Every micro-batch is a pass over all the weights, so a new request goes
//! to the free slot next to the running ones ([`place`]), and a longer
//! cached prompt in a slot further away is copied there.
//!
//! With llamafile's matrix kernels off (`.cargo/config.toml`), the matrix
//! products are per-row too. Greedy text then does not depend on batching,
//! speculation or prefix reuse (tests in `tests/it/llm.rs`).
//!
//! The padding row and the short prompt chunks cost time on a CPU (decode
//! of a lone long-context sequence ~40% slower, prefill ~20%), so they are
//! the `batch_invariant` option (ADR 0006); without it, ordering by id and
//! never leaving a one-token prompt chunk still apply, and invariance holds
//! for contexts under 192 tokens and prompts under 64.

use std::ops::Range;

/// The fewest rows a lone sequence's micro-batch may have when its context
/// is long, and the fewest prompt tokens evaluated in a chunk.
pub(super) const MIN_ROWS: usize = 2;
/// The most query rows of one sequence in a micro-batch: one below
/// llama.cpp's attention tile (`GGML_FA_TILE_Q`, 64).
pub(super) const MAX_ROWS: usize = 63;
/// A lone query row over more cached cells than this may take the split-KV
/// kernel (llama.cpp pads the cells it attends over to 256, and splits at
/// 512); kept below that with margin.
const LONG_CONTEXT: usize = 192;

/// Runs of consecutive ids in sorted `ids`, as index ranges.
pub(super) fn runs(ids: &[i32]) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let mut start = 0;
    for i in 1..=ids.len() {
        if i == ids.len() || ids[i] != ids[i - 1] + 1 {
            out.push(start..i);
            start = i;
        }
    }
    out
}

/// How many of slot `id`'s neighbours (`id - 1` and `id + 1`) hold running
/// sequences. A sequence placed next to running ones joins their
/// micro-batch; one placed apart starts a micro-batch of its own, and every
/// micro-batch reads all the weights again (SmolLM2 on 2 CPU cores: a
/// decode step of one sequence took 15 ms, of four in one micro-batch 36).
pub(super) fn neighbours(id: i32, running: &[i32]) -> usize {
    [id.checked_sub(1), id.checked_add(1)]
        .into_iter()
        .flatten()
        .filter(|n| running.contains(n))
        .count()
}

/// Where a request goes: a free slot, and maybe another whose cached
/// prompt to copy in.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct Placement {
    /// The chosen slot's position in the free list.
    pub(super) at: usize,
    /// Prompt tokens the chosen slot's cached prompt shares with the request's.
    pub(super) common: usize,
    /// A free slot whose cached prompt shares more: (slot, tokens shared).
    pub(super) donor: Option<(i32, usize)>,
}

/// Of the free slots `free`, where a request goes, given the slots of the
/// running sequences and the prompt tokens each slot's cached prompt
/// shares with the request's (`shared`). With a KV stream per slot: next to
/// the most running sequences (see [`neighbours`]), then sharing the
/// longest prefix; a free slot sharing more is the donor whose KV is copied
/// in, which costs a memory copy where a slot apart costs a pass over the
/// weights every step. With one `pooled` KV cache, where a slot is does not
/// matter: the slot sharing the longest prefix. Ties go to the later
/// position in `free`.
pub(super) fn place(
    free: &[i32],
    running: &[i32],
    shared: impl Fn(i32) -> usize,
    pooled: bool,
) -> Placement {
    // Each free slot's shared tokens, computed once.
    let shared: Vec<usize> = free.iter().map(|&id| shared(id)).collect();
    let Some((most, best)) = shared.iter().copied().zip(0..).max() else {
        return Placement::default();
    };
    if pooled {
        return Placement {
            at: best,
            common: most,
            donor: None,
        };
    }
    let (_, common, at) = free
        .iter()
        .zip(&shared)
        .zip(0..)
        .map(|((&id, &common), at)| (neighbours(id, running), common, at))
        .max()
        .expect("free is not empty");
    Placement {
        at,
        common,
        donor: (most > common).then_some((free[best], most)),
    }
}

/// Rows each sequence of a run gets: one more than the longest draft, and,
/// when `invariant`, at least [`MIN_ROWS`] for a lone sequence with a long
/// context when its stream has room. `members` yields (draft tokens, cells
/// after its next token).
pub(super) fn decode_rows(
    members: impl ExactSizeIterator<Item = (usize, usize)>,
    n_ctx: usize,
    invariant: bool,
) -> usize {
    let alone = members.len() == 1;
    let mut rows = 1;
    let mut long = false;
    let mut room = usize::MAX;
    for (draft, cells) in members {
        rows = rows.max(1 + draft);
        long |= cells > LONG_CONTEXT;
        room = room.min(n_ctx.saturating_sub(cells) + 1);
    }
    if invariant && alone && long {
        rows = rows.max(MIN_ROWS.min(room));
    }
    rows.min(MAX_ROWS)
}

/// Prompt tokens to evaluate now, of `remaining`: at most `most` (the batch
/// size; [`MAX_ROWS`] when `invariant`), and never so many that exactly one
/// is left for later.
pub(super) fn prefill_chunk(remaining: usize, most: usize, invariant: bool) -> usize {
    let most = if invariant { most.min(MAX_ROWS) } else { most };
    let mut chunk = remaining.min(most.max(MIN_ROWS));
    if remaining - chunk == 1 && chunk > MIN_ROWS {
        chunk -= 1;
    }
    chunk
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_split_at_gaps() {
        assert_eq!(runs(&[0, 1, 2, 5, 6, 9]), vec![0..3, 3..5, 5..6]);
        assert_eq!(runs(&[3]), vec![0..1]);
        assert!(runs(&[]).is_empty());
    }

    #[test]
    fn neighbours_count_running_slots_on_either_side() {
        assert_eq!(neighbours(4, &[3, 5, 9]), 2);
        assert_eq!(neighbours(6, &[3, 5, 9]), 1);
        assert_eq!(neighbours(7, &[3, 5, 9]), 0);
        assert_eq!(neighbours(0, &[1]), 1);
        assert_eq!(neighbours(0, &[]), 0);
    }

    #[test]
    fn a_request_goes_next_to_the_running_ones_and_copies_a_longer_prefix() {
        // Slot 7 caches 40 shared tokens, slot 3 (next to running 2) 10.
        let shared = |id: i32| match id {
            7 => 40,
            3 => 10,
            _ => 0,
        };
        let free = [0, 3, 5, 7];
        let placed = place(&free, &[1, 2], shared, false);
        assert_eq!(free[placed.at], 3);
        assert_eq!(placed.common, 10);
        assert_eq!(placed.donor, Some((7, 40)));
        // Filling a gap between two runs beats extending one.
        let placed = place(&[0, 3, 5], &[2, 4], |_| 0, false);
        assert_eq!(placed.at, 1);
        assert_eq!(placed.donor, None);
        // Nothing running: the longest prefix, no copy.
        let placed = place(&free, &[], shared, false);
        assert_eq!(
            (free[placed.at], placed.common, placed.donor),
            (7, 40, None)
        );
        // One pool: the longest prefix whatever runs.
        let placed = place(&free, &[1, 2], shared, true);
        assert_eq!(
            (free[placed.at], placed.common, placed.donor),
            (7, 40, None)
        );
        // The donor shares strictly more, else none.
        let placed = place(&[3, 7], &[2], |_| 10, false);
        assert_eq!((placed.at, placed.donor), (0, None));
        assert_eq!(place(&[], &[2], shared, false), Placement::default());
    }

    #[test]
    fn a_run_pads_to_its_longest_draft() {
        assert_eq!(
            decode_rows([(0, 10), (3, 10), (1, 10)].into_iter(), 1024, false),
            4
        );
        assert_eq!(decode_rows([(0, 10), (0, 900)].into_iter(), 1024, true), 1);
    }

    #[test]
    fn a_lone_long_sequence_gets_two_rows_when_its_stream_has_room() {
        assert_eq!(decode_rows([(0, 100)].into_iter(), 1024, true), 1);
        assert_eq!(decode_rows([(0, 300)].into_iter(), 1024, true), 2);
        assert_eq!(decode_rows([(2, 300)].into_iter(), 1024, true), 3);
        // The last cell of the stream: no room for a padding row.
        assert_eq!(decode_rows([(0, 1024)].into_iter(), 1024, true), 1);
        // Not asked for invariance: no padding.
        assert_eq!(decode_rows([(0, 300)].into_iter(), 1024, false), 1);
    }

    #[test]
    fn prompt_chunks_stay_under_the_tile_and_never_leave_one_token() {
        assert_eq!(prefill_chunk(500, 512, true), 63);
        assert_eq!(prefill_chunk(64, 512, true), 62); // not 63, which would leave 1
        assert_eq!(prefill_chunk(63, 512, true), 63);
        assert_eq!(prefill_chunk(2, 512, true), 2);
        assert_eq!(prefill_chunk(1, 512, true), 1);
        assert_eq!(prefill_chunk(100, 16, true), 16);
        assert_eq!(prefill_chunk(500, 512, false), 500);
        assert_eq!(prefill_chunk(513, 512, false), 511);
        let mut left = 300;
        while left > 0 {
            let c = prefill_chunk(left, 512, true);
            assert!((2..=63).contains(&c), "{c}");
            left -= c;
        }
    }
}

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

//! Prompt lookup: draft tokens for speculative decoding taken from the
//! request's own text, no draft model needed.
//!
//! The last few tokens so far (an n-gram) are looked up earlier in the
//! prompt and output; the tokens that followed their latest occurrence are
//! the draft. Answers that copy from their prompt (RAG answers quoting the
//! retrieved passages, code edits, extraction) accept long drafts; a draft
//! that is wrong costs one batch slot per token and changes nothing, since
//! every draft token is checked against the greedy choice.
//!
//! On a CPU, decode is compute-bound: a draft row costs about half a step
//! (SmolLM2 on 2 cores: 15 ms for one row, 36 for four), so a draft pays
//! only when it is likely to be accepted. A one-token match is a guess
//! (22% of first draft tokens accepted on the rag-chat questions' free
//! answers), a three-token match is not (84%); and once several sequences
//! share a step, every sequence of the micro-batch is padded to the longest
//! draft (see `shape`), so one sequence's draft costs rows for all of them
//! (two streams with drafts: TPOT 23.7 ms, against llama-server's 19.5). So
//! by default a draft needs a three-token match, is at most two tokens
//! long, and is made only for a sequence generating alone (vLLM's
//! `prompt_lookup_min` and `disable_by_batch_size` play these parts).

/// How prompt lookup drafts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct PromptLookup {
    /// The most draft tokens per step (0 turns speculation off).
    pub num_tokens: usize,
    /// The longest n-gram looked up; shorter ones (down to `min_ngram`)
    /// are tried when it has no earlier occurrence.
    pub max_ngram: usize,
    /// The shortest n-gram whose match makes a draft.
    pub min_ngram: usize,
    /// Speculate only while at most this many sequences generate in a step:
    /// a draft pads every other sequence of its micro-batch to the same
    /// rows, and a batch already keeps the CPU busy.
    pub max_batch: usize,
}

impl Default for PromptLookup {
    fn default() -> Self {
        Self {
            num_tokens: 2,
            max_ngram: 3,
            min_ngram: 3,
            max_batch: 1,
        }
    }
}

impl PromptLookup {
    /// Up to `most` draft tokens for a sequence whose tokens so far are
    /// `history`, in a step where `generating` sequences decode.
    pub fn draft<'h, T: PartialEq>(
        &self,
        history: &'h [T],
        generating: usize,
        most: usize,
    ) -> &'h [T] {
        if generating > self.max_batch {
            return &[];
        }
        draft(
            history,
            self.min_ngram..=self.max_ngram,
            most.min(self.num_tokens),
        )
    }
}

/// Up to `most` tokens that followed the latest earlier occurrence of the
/// longest suffix n-gram of `history` whose length is in `ngram` (the
/// longest first). Empty when none occurs earlier.
pub fn draft<T: PartialEq>(
    history: &[T],
    ngram: std::ops::RangeInclusive<usize>,
    most: usize,
) -> &[T] {
    if most == 0 {
        return &[];
    }
    let len = history.len();
    let shortest = (*ngram.start()).max(1);
    for n in (shortest..=(*ngram.end()).min(len.saturating_sub(1))).rev() {
        let key = &history[len - n..];
        // Latest occurrence that ends before the suffix itself starts over.
        let found = (0..len - n)
            .rev()
            .find(|&start| &history[start..start + n] == key);
        if let Some(start) = found {
            let from = start + n;
            return &history[from..(from + most).min(len)];
        }
    }
    &[]
}

#[cfg(test)]
mod tests {
    use super::{PromptLookup, draft};

    #[test]
    fn drafts_what_followed_the_latest_match() {
        // "a b c d e ... a b" -> after "a b" came "c d e".
        let h = [1, 2, 3, 4, 5, 9, 1, 2];
        assert_eq!(draft(&h, 1..=3, 3), &[3, 4, 5]);
        assert_eq!(draft(&h, 1..=3, 10), &[3, 4, 5, 9, 1, 2]);
        assert_eq!(draft(&h, 1..=3, 0), &[] as &[i32]);
    }

    #[test]
    fn prefers_the_longest_ngram_then_the_latest_occurrence() {
        // "7 2" occurs at 0 and "5 7 2" at 4: the 3-gram wins over the later
        // 1-gram "2" at 9.
        let h = [7, 2, 8, 0, 5, 7, 2, 6, 3, 2, 5, 7, 2];
        assert_eq!(draft(&h, 1..=3, 2), &[6, 3]);
        // With n = 1 only, the latest earlier "2" (at 9) is followed by 5.
        assert_eq!(draft(&h, 1..=1, 2), &[5, 7]);
    }

    #[test]
    fn no_earlier_occurrence_gives_no_draft() {
        assert!(draft(&[1, 2, 3, 4], 1..=3, 4).is_empty());
        assert!(draft::<u8>(&[], 1..=3, 4).is_empty());
        assert!(draft(&[5], 1..=3, 4).is_empty());
    }

    #[test]
    fn a_match_shorter_than_min_ngram_makes_no_draft() {
        // Only the 1-gram "2" recurs (at 1, followed by 3).
        let h = [1, 2, 3, 4, 2];
        assert_eq!(draft(&h, 1..=3, 2), &[3, 4]);
        assert!(draft(&h, 2..=3, 2).is_empty());
        // "4 5 6" recurs: a 3-gram match drafts what followed it.
        let h = [4, 5, 6, 7, 8, 4, 5, 6];
        assert_eq!(draft(&h, 3..=3, 2), &[7, 8]);
    }

    #[test]
    fn the_default_drafts_two_tokens_after_a_three_token_match_for_a_lone_sequence() {
        let lookup = PromptLookup::default();
        let h = [4, 5, 6, 7, 8, 9, 4, 5, 6];
        assert_eq!(lookup.draft(&h, 1, 16), &[7, 8]);
        assert_eq!(lookup.draft(&h, 1, 1), &[7]);
        // Two sequences generating: a draft would pad the other one too.
        assert!(lookup.draft(&h, 2, 16).is_empty());
        // A 2-gram match ("5 6" only) is too weak.
        assert!(lookup.draft(&[5, 6, 7, 8, 5, 6], 1, 16).is_empty());
    }
}

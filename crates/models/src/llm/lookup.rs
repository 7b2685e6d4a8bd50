//! Prompt lookup: draft tokens for speculative decoding taken from the
//! request's own text, no draft model needed.
//!
//! The last few tokens so far (an n-gram) are looked up earlier in the
//! prompt and output; the tokens that followed their latest occurrence are
//! the draft. Answers that copy from their prompt (RAG answers quoting the
//! retrieved passages, code edits, extraction) accept long drafts; a draft
//! that is wrong costs one batch slot per token and changes nothing, since
//! every draft token is checked against the greedy choice.

/// How prompt lookup drafts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct PromptLookup {
    /// The most draft tokens per step (0 turns speculation off).
    pub num_tokens: usize,
    /// The longest n-gram looked up; shorter ones (down to 1 token) are
    /// tried when it has no earlier occurrence.
    pub max_ngram: usize,
}

impl Default for PromptLookup {
    fn default() -> Self {
        Self {
            num_tokens: 4,
            max_ngram: 3,
        }
    }
}

/// Up to `most` tokens that followed the latest earlier occurrence of the
/// longest suffix n-gram of `history` (`max_ngram` tokens, then fewer).
/// Empty when no suffix n-gram occurs earlier.
pub fn draft<T: PartialEq>(history: &[T], max_ngram: usize, most: usize) -> &[T] {
    if most == 0 {
        return &[];
    }
    let len = history.len();
    for n in (1..=max_ngram.min(len.saturating_sub(1))).rev() {
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
    use super::draft;

    #[test]
    fn drafts_what_followed_the_latest_match() {
        // "a b c d e ... a b" -> after "a b" came "c d e".
        let h = [1, 2, 3, 4, 5, 9, 1, 2];
        assert_eq!(draft(&h, 3, 3), &[3, 4, 5]);
        assert_eq!(draft(&h, 3, 10), &[3, 4, 5, 9, 1, 2]);
        assert_eq!(draft(&h, 3, 0), &[] as &[i32]);
    }

    #[test]
    fn prefers_the_longest_ngram_then_the_latest_occurrence() {
        // "7 2" occurs at 0 and "5 7 2" at 4: the 3-gram wins over the later
        // 1-gram "2" at 9.
        let h = [7, 2, 8, 0, 5, 7, 2, 6, 3, 2, 5, 7, 2];
        assert_eq!(draft(&h, 3, 2), &[6, 3]);
        // With n = 1 only, the latest earlier "2" (at 9) is followed by 5.
        assert_eq!(draft(&h, 1, 2), &[5, 7]);
    }

    #[test]
    fn no_earlier_occurrence_gives_no_draft() {
        assert!(draft(&[1, 2, 3, 4], 3, 4).is_empty());
        assert!(draft::<u8>(&[], 3, 4).is_empty());
        assert!(draft(&[5], 3, 4).is_empty());
    }
}

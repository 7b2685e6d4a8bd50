//! Checks for secrets written in forms the ASCII detectors miss: card
//! numbers typed with full-width or other scripts' digits, and passwords
//! given in a sentence ("my password is X").
//!
//! Why separate from `detectors`: both checks translate before they decide
//! (digits to ASCII, a word to "is it a description?"), and the card one
//! reuses the ASCII card check unchanged, so a Unicode card is exactly as
//! valid as its ASCII twin.

use std::ops::Range;

use super::cards::find_cards;

/// A run of 13+ digits in any of the scripts below (ASCII included, so a
/// card mixing forms is seen whole), separated by single spaces, dashes,
/// dots or ideographic spaces. Explicit ranges, not `\p{Nd}`: the workspace
/// builds `regex` without Unicode general categories.
pub(crate) const UNICODE_CARD_RUN: &str = "[0-9\u{FF10}-\u{FF19}\u{0660}-\u{0669}\u{06F0}-\u{06F9}\u{0966}-\u{096F}](?:[ .\u{3000}\u{FF0D}-]?[0-9\u{FF10}-\u{FF19}\u{0660}-\u{0669}\u{06F0}-\u{06F9}\u{0966}-\u{096F}]){12,}";

/// The ASCII digit a character stands for, or a separator's ASCII form.
fn ascii_form(c: char) -> Option<u8> {
    let digit = |zero: char| u8::try_from(c as u32 - zero as u32).ok().map(|d| b'0' + d);
    match c {
        '0'..='9' | ' ' | '.' | '-' => u8::try_from(c).ok(),
        '\u{FF10}'..='\u{FF19}' => digit('\u{FF10}'),
        '\u{0660}'..='\u{0669}' => digit('\u{0660}'),
        '\u{06F0}'..='\u{06F9}' => digit('\u{06F0}'),
        '\u{0966}'..='\u{096F}' => digit('\u{0966}'),
        '\u{3000}' => Some(b' '),
        '\u{FF0D}' => Some(b'-'),
        _ => None,
    }
}

/// Cards in a run with at least one non-ASCII digit: the run is rewritten
/// in ASCII, [`find_cards`] picks the cards, and their ranges are mapped
/// back. An all-ASCII run was already seen by the `card` detector.
pub(crate) fn find_unicode_cards(run: &str, out: &mut Vec<Range<usize>>) {
    if run.is_ascii() {
        return;
    }
    let mut ascii = String::with_capacity(run.len());
    // Where each ASCII byte's character starts and ends in `run`.
    let mut spans: Vec<Range<usize>> = Vec::with_capacity(run.len());
    for (at, c) in run.char_indices() {
        let Some(b) = ascii_form(c) else { return };
        ascii.push(char::from(b));
        spans.push(at..at + c.len_utf8());
    }
    let mut found = Vec::new();
    find_cards(&ascii, &mut found);
    for r in found {
        if let (Some(first), Some(last)) = (spans.get(r.start), spans.get(r.end.wrapping_sub(1))) {
            out.push(first.start..last.end);
        }
    }
}

/// Words that say what a password is like, not what it is: "the password
/// is wrong", "your password is required".
const DESCRIPTIONS: &[&str] = &[
    "required",
    "invalid",
    "incorrect",
    "correct",
    "expired",
    "missing",
    "changed",
    "stored",
    "hashed",
    "encrypted",
    "protected",
    "working",
    "different",
    "unknown",
    "forgotten",
    "optional",
    "mandatory",
    "secure",
    "always",
    "hidden",
    "visible",
    "generated",
    "updated",
    "needed",
    "case-sensitive",
    "too",
    "not",
    "being",
    "still",
];

/// The secret in "password is X": `X` without trailing punctuation, unless
/// it is a description or a short plain word ("the pin is bent").
pub(crate) fn find_phrased_secret(word: &str, out: &mut Vec<Range<usize>>) {
    let trimmed = word.trim_end_matches(['.', ',', ';', ':', '!', '?', ')', ']', '}']);
    if trimmed.is_empty() {
        return;
    }
    let lower = trimmed.to_ascii_lowercase();
    if DESCRIPTIONS.contains(&lower.as_str()) {
        return;
    }
    let plain = trimmed.chars().all(char::is_alphabetic);
    if plain && trimmed.chars().count() < 6 {
        return;
    }
    out.push(0..trimmed.len());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cards(run: &str) -> Vec<&str> {
        let mut out = Vec::new();
        find_unicode_cards(run, &mut out);
        out.into_iter().map(|r| &run[r]).collect()
    }

    #[test]
    fn unicode_cards_are_checked_as_their_ascii_twin() {
        assert_eq!(
            cards("４１１１ １１１１ １１１１ １１１１"),
            ["４１１１ １１１１ １１１１ １１１１"]
        );
        assert_eq!(cards("٤١١١١١١١١١١١١١١١"), ["٤١١١١١١١١١١١١١١١"]);
        // Fails Luhn, as in ASCII.
        assert!(cards("４１１１１１１１１１１１１１１２").is_empty());
        // All ASCII: the `card` detector's job.
        assert!(cards("4111111111111111").is_empty());
    }

    #[test]
    fn phrased_secrets_skip_descriptions() {
        let find = |w: &str| {
            let mut out = Vec::new();
            find_phrased_secret(w, &mut out);
            out.into_iter()
                .map(|r| w[r].to_string())
                .collect::<Vec<_>>()
        };
        assert_eq!(find("hunter2."), ["hunter2"]);
        assert_eq!(find("sunshine,"), ["sunshine"]);
        assert!(find("wrong,").is_empty());
        assert!(find("required.").is_empty());
        assert!(find("bent").is_empty());
        assert!(find("...").is_empty());
    }
}

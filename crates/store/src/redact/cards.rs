//! Card numbers in a run of digits: which digit groups form a card (group
//! shapes, a known brand, a valid Luhn sum, set off from neighbours).
//! Used by the ASCII card detector and by the one for other digit forms.

use std::ops::Range;

use super::checksum;

/// Most printed card groups are 4 digits; Amex and Diners use 6 and 5, and
/// 19-digit cards end with 3. Runs of shorter or longer groups are other
/// numbers (dates, version lists, ids).
const CARD_GROUP: Range<usize> = 3..7;

/// The longest card starting at each digit group of a run: every group in
/// it 3-6 digits (or one unbroken 13-19 digit group), a known brand, a
/// valid Luhn sum, and, unless it is the whole run, set off by spaces (a
/// dash-joined neighbour makes it part of some longer id).
pub(crate) fn find_cards(run: &str, out: &mut Vec<Range<usize>>) {
    let bytes = run.as_bytes();
    let mut groups: Vec<Range<usize>> = Vec::new();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        if !b.is_ascii_digit() {
            groups.push(start..i);
            start = i + 1;
        }
    }
    groups.push(start..bytes.len());

    let spaced = |at: usize| at == 0 || at >= bytes.len() || bytes[at] == b' ';
    let mut digits = [0u8; 19];
    let mut i = 0;
    while i < groups.len() {
        let mut found = None;
        // At most six groups of three fit in 19 digits.
        for j in (i..groups.len().min(i + 7)).rev() {
            let span = &groups[i..=j];
            let total: usize = span.iter().map(|g| g.len()).sum();
            let shaped = if span.len() == 1 {
                (13..=19).contains(&total)
            } else {
                (13..=19).contains(&total) && span.iter().all(|g| CARD_GROUP.contains(&g.len()))
            };
            let (from, to) = (span[0].start, span[span.len() - 1].end);
            let set_off = (i == 0 || spaced(from - 1)) && (j + 1 == groups.len() || spaced(to));
            if !shaped || !set_off {
                continue;
            }
            let mut n = 0;
            for g in span {
                for &d in &bytes[g.clone()] {
                    digits[n] = d;
                    n += 1;
                }
            }
            let number = &digits[..n];
            if checksum::card_brand(number).is_some() && checksum::luhn(number) {
                found = Some((j, from..to));
                break;
            }
        }
        match found {
            Some((j, range)) => {
                out.push(range);
                i = j + 1;
            }
            None => i += 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cards(run: &str) -> Vec<&str> {
        let mut out = Vec::new();
        find_cards(run, &mut out);
        out.into_iter().map(|r| &run[r]).collect()
    }

    #[test]
    fn cards_are_picked_out_of_digit_runs() {
        assert_eq!(cards("4111 1111 1111 1111"), ["4111 1111 1111 1111"]);
        assert_eq!(cards("4111-1111-1111-1111"), ["4111-1111-1111-1111"]);
        assert_eq!(cards("3782 822463 10005"), ["3782 822463 10005"]);
        // A quantity before and a year after do not hide the card.
        assert_eq!(
            cards("12 4111 1111 1111 1111 2026"),
            ["4111 1111 1111 1111"]
        );
        // Two cards in one run.
        assert_eq!(
            cards("4111111111111111 5555555555554444"),
            ["4111111111111111", "5555555555554444"]
        );
        assert!(cards("4111111111111112").is_empty());
        // Inside a dash-joined id.
        assert!(cards("2026-4111-1111-1111-1111").is_empty());
        assert!(cards("41111111111111110000").is_empty());
        assert!(cards("41 11 11 11 11 11 11 11").is_empty());
    }
}

//! The arithmetic behind the validated detectors: Luhn for payment cards,
//! ISO 7064 mod 97-10 for IBANs, ISO 7064 mod 11-2 for Chinese resident ids,
//! and the issuer and country tables they need.
//!
//! Everything here takes ASCII bytes that a detector's regex has already
//! shaped, so no function allocates and none can fail on a well-formed
//! candidate; anything unexpected simply does not validate.

/// Luhn (mod 10) over ASCII digits, as printed on payment cards.
pub(crate) fn luhn(digits: &[u8]) -> bool {
    let mut sum = 0u32;
    for (i, d) in digits.iter().rev().enumerate() {
        if !d.is_ascii_digit() {
            return false;
        }
        let mut v = u32::from(d - b'0');
        if i % 2 == 1 {
            v *= 2;
            if v > 9 {
                v -= 9;
            }
        }
        sum += v;
    }
    !digits.is_empty() && sum.is_multiple_of(10)
}

/// The card brand whose issuer prefix and length fit these digits.
pub(crate) fn card_brand(digits: &[u8]) -> Option<&'static str> {
    let len = digits.len();
    let prefix = |n: usize| -> u32 {
        digits
            .iter()
            .take(n)
            .fold(0, |acc, d| acc * 10 + u32::from(d.wrapping_sub(b'0')))
    };
    let (p1, p2, p3, p4) = (prefix(1), prefix(2), prefix(3), prefix(4));
    let brand = if p1 == 4 && matches!(len, 13 | 16 | 19) {
        "visa"
    } else if ((51..=55).contains(&p2) || (2221..=2720).contains(&p4)) && len == 16 {
        "mastercard"
    } else if (p2 == 34 || p2 == 37) && len == 15 {
        "amex"
    } else if (p4 == 6011 || p2 == 65 || (644..=649).contains(&p3)) && (16..=19).contains(&len) {
        "discover"
    } else if (3528..=3589).contains(&p4) && (16..=19).contains(&len) {
        "jcb"
    } else if (p2 == 36 || p2 == 38 || (300..=305).contains(&p3)) && (14..=19).contains(&len) {
        "diners"
    } else if p2 == 62 && (16..=19).contains(&len) {
        "unionpay"
    } else {
        return None;
    };
    Some(brand)
}

/// ISO 13616 IBAN lengths by country (the SWIFT registry); a country not
/// listed has no IBAN, so its look-alikes are never masked.
const IBAN_LENGTHS: &[(&[u8; 2], usize)] = &[
    (b"AD", 24),
    (b"AE", 23),
    (b"AL", 28),
    (b"AT", 20),
    (b"AZ", 28),
    (b"BA", 20),
    (b"BE", 16),
    (b"BG", 22),
    (b"BH", 22),
    (b"BI", 27),
    (b"BR", 29),
    (b"BY", 28),
    (b"CH", 21),
    (b"CR", 22),
    (b"CY", 28),
    (b"CZ", 24),
    (b"DE", 22),
    (b"DJ", 27),
    (b"DK", 18),
    (b"DO", 28),
    (b"EE", 20),
    (b"EG", 29),
    (b"ES", 24),
    (b"FI", 18),
    (b"FK", 18),
    (b"FO", 18),
    (b"FR", 27),
    (b"GB", 22),
    (b"GE", 22),
    (b"GI", 23),
    (b"GL", 18),
    (b"GR", 27),
    (b"GT", 28),
    (b"HN", 28),
    (b"HR", 21),
    (b"HU", 28),
    (b"IE", 22),
    (b"IL", 23),
    (b"IQ", 23),
    (b"IS", 26),
    (b"IT", 27),
    (b"JO", 30),
    (b"KW", 30),
    (b"KZ", 20),
    (b"LB", 28),
    (b"LC", 32),
    (b"LI", 21),
    (b"LT", 20),
    (b"LU", 20),
    (b"LV", 21),
    (b"LY", 25),
    (b"MC", 27),
    (b"MD", 24),
    (b"ME", 22),
    (b"MK", 19),
    (b"MN", 20),
    (b"MR", 27),
    (b"MT", 31),
    (b"MU", 30),
    (b"NI", 28),
    (b"NL", 18),
    (b"NO", 15),
    (b"OM", 23),
    (b"PK", 24),
    (b"PL", 28),
    (b"PS", 29),
    (b"PT", 25),
    (b"QA", 29),
    (b"RO", 24),
    (b"RS", 22),
    (b"RU", 33),
    (b"SA", 24),
    (b"SC", 31),
    (b"SD", 18),
    (b"SE", 24),
    (b"SI", 19),
    (b"SK", 24),
    (b"SM", 27),
    (b"SO", 23),
    (b"ST", 25),
    (b"SV", 28),
    (b"TL", 23),
    (b"TN", 24),
    (b"TR", 26),
    (b"UA", 29),
    (b"VA", 22),
    (b"VG", 24),
    (b"XK", 20),
    (b"YE", 30),
];

/// How long an IBAN from this country is, if the country issues them.
pub(crate) fn iban_length(country: &[u8]) -> Option<usize> {
    IBAN_LENGTHS
        .iter()
        .find(|(code, _)| code.as_slice() == country)
        .map(|&(_, len)| len)
}

/// ISO 7064 mod 97-10 over a compact IBAN (`DE89370400440532013000`):
/// the first four characters move to the end, letters count as 10..35, and
/// the number must leave 1.
pub(crate) fn iban_checksum(iban: &[u8]) -> bool {
    if iban.len() < 5 {
        return false;
    }
    let mut rem = 0u32;
    for &c in iban[4..].iter().chain(&iban[..4]) {
        rem = match c {
            b'0'..=b'9' => (rem * 10 + u32::from(c - b'0')) % 97,
            b'A'..=b'Z' => (rem * 100 + u32::from(c - b'A') + 10) % 97,
            _ => return false,
        };
    }
    rem == 1
}

/// ISO 7064 mod 11-2 over an 18-character Chinese resident id: the last
/// character (`0`-`9` or `X` for 10) checks the first 17 digits.
pub(crate) fn mod11_2(id: &[u8]) -> bool {
    const WEIGHTS: [u32; 17] = [7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2];
    const CHECK: &[u8; 11] = b"10X98765432";
    if id.len() != 18 {
        return false;
    }
    let mut sum = 0u32;
    for (d, w) in id.iter().zip(WEIGHTS) {
        if !d.is_ascii_digit() {
            return false;
        }
        sum += u32::from(d - b'0') * w;
    }
    let check = CHECK[(sum % 11) as usize];
    id[17].to_ascii_uppercase() == check
}

/// A US social security number's parts as issued: no area 000, 666 or
/// 900-999, no group 00, no serial 0000.
pub(crate) fn ssn_parts_valid(area: u32, group: u32, serial: u32) -> bool {
    area != 0 && area != 666 && area < 900 && group != 0 && serial != 0
}

/// A UK national insurance number prefix that HMRC issues (the letters the
/// regex allows, less the never-used pairs).
pub(crate) fn nino_prefix_valid(prefix: &[u8]) -> bool {
    !matches!(
        prefix,
        b"BG" | b"GB" | b"KN" | b"NK" | b"NT" | b"TN" | b"ZZ"
    )
}

/// Decodes standard base64 (padding optional); `None` when it is not base64.
pub(crate) fn base64_decode(text: &[u8]) -> Option<Vec<u8>> {
    fn value(c: u8) -> Option<u32> {
        Some(u32::from(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        }))
    }
    let body = text
        .strip_suffix(b"==")
        .or_else(|| text.strip_suffix(b"="))
        .unwrap_or(text);
    if body.len() % 4 == 1 {
        return None;
    }
    let mut out = Vec::with_capacity(body.len() * 3 / 4);
    for chunk in body.chunks(4) {
        let mut acc = 0u32;
        for &c in chunk {
            acc = (acc << 6) | value(c)?;
        }
        acc <<= 6 * (4 - chunk.len() as u32);
        let bytes = acc.to_be_bytes();
        out.extend_from_slice(&bytes[1..chunk.len()]);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn luhn_accepts_test_cards_and_rejects_one_digit_off() {
        for card in [
            "4111111111111111",
            "378282246310005",
            "6011111111111117",
            "79927398713",
        ] {
            assert!(luhn(card.as_bytes()), "{card}");
        }
        for bad in ["4111111111111112", "378282246310006", "79927398710", ""] {
            assert!(!luhn(bad.as_bytes()), "{bad}");
        }
    }

    #[test]
    fn brands_need_prefix_and_length() {
        let cases = [
            ("4111111111111111", Some("visa")),
            ("4222222222222", Some("visa")),
            ("5555555555554444", Some("mastercard")),
            ("2223003122003222", Some("mastercard")),
            ("378282246310005", Some("amex")),
            ("6011111111111117", Some("discover")),
            ("6445644564456445", Some("discover")),
            ("3530111333300000", Some("jcb")),
            ("30569309025904", Some("diners")),
            ("6200000000000005", Some("unionpay")),
            ("1234567812345670", None),
            ("37828224631000", None),
            ("555555555555444", None),
        ];
        for (digits, brand) in cases {
            assert_eq!(card_brand(digits.as_bytes()), brand, "{digits}");
        }
    }

    #[test]
    fn iban_checksum_and_lengths() {
        assert!(iban_checksum(b"DE89370400440532013000"));
        assert!(iban_checksum(b"GB82WEST12345698765432"));
        assert!(!iban_checksum(b"DE89370400440532013001"));
        assert!(!iban_checksum(b"GB00WEST12345698765432"));
        assert_eq!(iban_length(b"DE"), Some(22));
        assert_eq!(iban_length(b"NO"), Some(15));
        assert_eq!(iban_length(b"US"), None);
    }

    #[test]
    fn mod11_2_checks_the_last_character() {
        assert!(mod11_2(b"11010519491231002X"));
        assert!(mod11_2(b"11010519491231002x"));
        assert!(!mod11_2(b"110105194912310021"));
        assert!(!mod11_2(b"1101051949123100"));
    }

    #[test]
    fn ssn_and_nino_rules() {
        assert!(ssn_parts_valid(123, 45, 6789));
        assert!(!ssn_parts_valid(0, 12, 3456));
        assert!(!ssn_parts_valid(666, 12, 3456));
        assert!(!ssn_parts_valid(912, 12, 3456));
        assert!(!ssn_parts_valid(123, 0, 3456));
        assert!(!ssn_parts_valid(123, 45, 0));
        assert!(nino_prefix_valid(b"AB"));
        assert!(!nino_prefix_valid(b"GB"));
    }

    #[test]
    fn base64_round_trips_user_password() {
        assert_eq!(
            base64_decode(b"dXNlcjpwYXNz").as_deref(),
            Some(&b"user:pass"[..])
        );
        assert_eq!(
            base64_decode(b"YWxhZGRpbjpvcGVuc2VzYW1l").as_deref(),
            Some(&b"aladdin:opensesame"[..])
        );
        assert_eq!(base64_decode(b"YQ==").as_deref(), Some(&b"a"[..]));
        assert_eq!(base64_decode(b"YWI").as_deref(), Some(&b"ab"[..]));
        assert_eq!(base64_decode(b"a*bc"), None);
        assert_eq!(base64_decode(b"abcde"), None);
    }
}

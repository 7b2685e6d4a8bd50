//! The built-in detectors: one regex each that finds candidates, and for
//! the ones with a checksum or a structure, a check that keeps only real
//! secrets.
//!
//! Order is priority: where two detectors' matches overlap, the earlier one
//! masks and the later one only sees the text around it. Whole structures
//! (PEM blocks, JWTs) come first, then keys and credentials (connection
//! strings among them, before `email` sees `password@host`), then validated
//! national ids, IBANs and cards, then generic `password=` pairs (in URL
//! queries, JSON, JSON pasted inside text, ODBC strings, prose), and phone
//! numbers last so a spaced card or an id is never half-masked as a phone.
//!
//! Boundaries are ASCII (`(?-u:\b)`): a Unicode `\b` would stop the lazy DFA
//! on the first non-ASCII byte (falling back to a slower engine for every
//! Chinese or accented summary), and would also refuse a number glued to CJK
//! text (`电话13812345678`), which is exactly where it should match.

use std::ops::Range;

use super::cards;
use super::checksum;
use super::forms;

/// What a detector does with a regex match (or with its `secret` group).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Check {
    /// The match is the secret.
    None,
    /// Keep the match only when this holds.
    Valid(fn(&str) -> bool),
    /// The secrets inside a candidate, as byte ranges of it (a candidate may
    /// hold several, or a secret and trailing text).
    Find(fn(&str, &mut Vec<Range<usize>>)),
}

/// One built-in detector.
#[derive(Debug, Clone, Copy)]
pub struct Detector {
    /// Unique name, for `RedactOptions::disabled`.
    pub id: &'static str,
    /// The name in the placeholder (`[REDACTED:card]`); several detectors
    /// share one, and disabling a label disables them all.
    pub label: &'static str,
    /// Finds candidates. When it has a group named `secret`, only that group
    /// is checked and masked (the key in `password=...` stays readable).
    pub pattern: &'static str,
    pub(crate) check: Check,
}

const fn detector(
    id: &'static str,
    label: &'static str,
    pattern: &'static str,
    check: Check,
) -> Detector {
    Detector {
        id,
        label,
        pattern,
        check,
    }
}

/// Every built-in detector, in priority order.
pub const DETECTORS: &[Detector] = &[
    // PEM blocks, whole; an unterminated one (a cut-off paste) up to the end
    // of its base64.
    detector(
        "private_key",
        "private_key",
        r"-----BEGIN[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----(?:[\s\S]*?-----END[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----|[A-Za-z0-9+/=\s\\]*)",
        Check::None,
    ),
    detector(
        "jwt",
        "jwt",
        r"(?-u:\b)eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*",
        Check::None,
    ),
    detector(
        "bearer",
        "bearer",
        r"(?i)(?-u:\b)bearer\s+(?P<secret>[A-Za-z0-9_.~+/%-]{16,}=*)",
        Check::None,
    ),
    detector(
        "basic_auth",
        "basic_auth",
        r"(?i)(?-u:\b)basic\s+(?P<secret>[A-Za-z0-9+/]{6,}={0,2})",
        Check::Valid(is_basic_credential),
    ),
    detector(
        "aws_access_key_id",
        "aws_key",
        r"(?-u:\b)(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}(?-u:\b)",
        Check::None,
    ),
    detector(
        "aws_secret_key",
        "aws_key",
        r#"(?i)(?-u:\b)(?:aws_?)?secret_?access_?key["']?\s*[:=]\s*["']?(?P<secret>[A-Za-z0-9/+]{40})(?:[^A-Za-z0-9/+]|$)"#,
        Check::None,
    ),
    // OpenAI/Anthropic `sk-...`, Stripe `sk_live_`/`pk_test_`/`rk_`/`whsec_`.
    detector(
        "provider_key",
        "api_key",
        r"(?-u:\b)(?:sk|pk|rk|whsec)[-_](?:live[-_]|test[-_]|proj[-_]|ant[-_])?[A-Za-z0-9_-]{16,}",
        Check::None,
    ),
    detector(
        "github_token",
        "api_key",
        r"(?-u:\b)(?:ghp|gho|ghu|ghs|ghr|github_pat|glpat)[-_][A-Za-z0-9_-]{16,}",
        Check::None,
    ),
    detector(
        "slack_token",
        "api_key",
        r"(?-u:\b)(?:xox[abposr]|xapp)-[A-Za-z0-9-]{10,}",
        Check::None,
    ),
    detector(
        "slack_webhook",
        "api_key",
        r"https://hooks\.slack\.com/services/T[A-Za-z0-9]+/B[A-Za-z0-9]+/[A-Za-z0-9]+",
        Check::None,
    ),
    detector(
        "google_api_key",
        "api_key",
        r"(?-u:\b)AIza[0-9A-Za-z_-]{35}",
        Check::None,
    ),
    detector(
        "google_oauth_token",
        "api_key",
        r"(?-u:\b)ya29\.[0-9A-Za-z_-]{20,}",
        Check::None,
    ),
    detector(
        "huggingface_token",
        "api_key",
        r"(?-u:\b)hf_[A-Za-z0-9]{30,}",
        Check::None,
    ),
    // `scheme://user:password@host`: only the password is masked, the
    // user and host stay readable. The password may hold `@` and `:`; the
    // host may not, so the last `@` of the authority ends it.
    detector(
        "connection_url",
        "password",
        r"(?i)(?-u:\b)(?:postgres(?:ql)?|mysql|mariadb|mongodb(?:\+srv)?|rediss?|amqps?|mssql|sqlserver|oracle|cockroachdb|clickhouse|nats|kafka|ldaps?|s?ftp|smtps?|imaps?|https?|wss?)://[^\s:/?#@]*:(?P<secret>[^\s/?#]+)@[^\s/?#@]+",
        Check::None,
    ),
    // Azure storage and Service Bus connection strings.
    detector(
        "azure_account_key",
        "api_key",
        r"(?i)(?-u:\b)(?:AccountKey|SharedAccessKey)\s*=\s*(?P<secret>[A-Za-z0-9+/]{20,}={0,2})",
        Check::None,
    ),
    // 18 characters: region, birth date, sequence, ISO 7064 mod 11-2 check.
    detector(
        "cn_resident_id",
        "national_id",
        r"(?-u:\b)[1-9][0-9]{5}(?:18|19|20)[0-9]{2}(?:0[1-9]|1[0-2])(?:0[1-9]|[12][0-9]|3[01])[0-9]{3}[0-9Xx](?-u:\b)",
        Check::Valid(is_cn_resident_id),
    ),
    detector(
        "us_ssn",
        "national_id",
        r"(?-u:\b)[0-9]{3}-[0-9]{2}-[0-9]{4}(?-u:\b)",
        Check::Valid(is_ssn),
    ),
    detector(
        "uk_nino",
        "national_id",
        r"(?-u:\b)[A-CEGHJ-PR-TW-Z][A-CEGHJ-NPR-TW-Z] ?[0-9]{2} ?[0-9]{2} ?[0-9]{2} ?[A-D](?-u:\b)",
        Check::Valid(is_nino),
    ),
    // Compact or printed in groups of four, in any letter case.
    detector(
        "iban",
        "iban",
        r"(?-u:\b)[A-Za-z]{2}[0-9]{2}(?:[ ]?[A-Za-z0-9]{4}){2,7}(?:[ ]?[A-Za-z0-9]{1,3})?(?-u:\b)",
        Check::Find(find_ibans),
    ),
    // A run of at least 13 digits, single spaces, dashes or dots allowed
    // between them; the check picks the card(s) out of it.
    detector(
        "card",
        "card",
        r"(?-u:\b)[0-9](?:[ .-]?[0-9]){12,}(?-u:\b)",
        Check::Find(cards::find_cards),
    ),
    // The same with full-width, Arabic-Indic, Persian or Devanagari digits
    // (what IMEs and some keyboards type); checked as their ASCII twin.
    detector(
        "card_unicode",
        "card",
        forms::UNICODE_CARD_RUN,
        Check::Find(forms::find_unicode_cards),
    ),
    detector(
        "email",
        "email",
        r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}",
        Check::None,
    ),
    // Secret-named parameters of a URL query: `?api_key=…&sig=…&token=…`.
    // In a URL any value is the secret, however short.
    detector(
        "url_query_secret",
        "secret",
        r"(?i)[?&][A-Za-z0-9_.-]*?(?:token|secret|password|passwd|pwd|api[_-]?key|apikey|access[_-]?key|private[_-]?key|sig|signature|credentials?|auth)=(?P<secret>[^&#\s\x22'<>]+)",
        Check::None,
    ),
    // `"password": "..."`, `"access_token": "..."`, `"X-Api-Key": "..."`.
    detector(
        "secret_json",
        "secret",
        r#"(?i)"[A-Za-z0-9_-]*(?:token|secret|password|passwd|api[_-]?key|apikey|authorization|private[_-]?key|access[_-]?key|credentials?)"\s*:\s*"(?P<secret>(?:[^"\\]|\\.){6,})""#,
        Check::None,
    ),
    // JSON pasted as text inside JSON: `{"question":"{\"password\":\"…\"}"}`,
    // escaped once or more.
    detector(
        "secret_json_escaped",
        "secret",
        r#"(?i)\\+"[A-Za-z0-9_-]*(?:token|secret|password|passwd|pwd|api[_-]?key|apikey|authorization|private[_-]?key|access[_-]?key|credentials?)\\+"\s*:\s*\\+"(?P<secret>[^"\\]{4,})\\+""#,
        Check::None,
    ),
    // ODBC / ADO.NET / JDBC property strings: `…;Password=…;`, `Pwd={…}`.
    // Only where it ends like one (`;`, a quote, the end), so a shell's
    // `PWD=/home/ann and …` stays readable.
    detector(
        "odbc_password",
        "password",
        r#"(?i)(?-u:\b)(?:password|pwd)\s*=\s*(?P<secret>\{[^}]*\}|[^;\s"'{]+)(?:;|["']|$)"#,
        Check::None,
    ),
    // "my password is X", "密码是X": the word after, unless it describes the
    // password (`is wrong`, `is required`).
    detector(
        "password_phrase",
        "password",
        r#"(?i)(?:(?-u:\b)(?:password|passcode|passphrase|passwort|pin)\s+(?:is|was):?\s+|密码(?:是|为|：)\s*)(?P<secret>[^\s"'，。；！？、]+)"#,
        Check::Find(forms::find_phrased_secret),
    ),
    // `password=hunter2`, `API_KEY: abc123...`, `client_secret='...'`.
    detector(
        "secret_kv",
        "secret",
        r#"(?i)(?-u:\b)[A-Za-z0-9_-]*?(?:token|secret|password|passwd|api[_-]?key|apikey|authorization|private[_-]?key|access[_-]?key|credentials?)(?-u:\b)["']?\s*[:=]\s*["']?(?P<secret>[^\s"',;&]{6,})"#,
        Check::Valid(is_not_plain_word),
    ),
    // +44 20 7946 0958, +1 (415) 555-0100, +8613812345678.
    detector(
        "phone_intl",
        "phone",
        r"\+[1-9][0-9]{0,2}[ .-]?(?:\([0-9]{1,4}\)[ .-]?)?[0-9]{1,4}(?:[ .-]?[0-9]{1,4}){1,5}(?-u:\b)",
        Check::Valid(is_intl_phone),
    ),
    // North American: (415) 555-0100, 415-555-0100, 415.555.0100.
    detector(
        "phone_nanp",
        "phone",
        r"(?:\([2-9][0-9]{2}\) ?|(?-u:\b)[2-9][0-9]{2}[ .-])[2-9][0-9]{2}[ .-][0-9]{4}(?-u:\b)",
        Check::None,
    ),
    // National numbers with a trunk 0: 020 7946 0958, 07700 900123,
    // 030-1234 5678, (02) 9876 5432.
    detector(
        "phone_national",
        "phone",
        r"(?:\(0[1-9][0-9]{0,3}\) ?|(?-u:\b)0[1-9][0-9]{0,3}[ .-])[0-9]{3,4}[ .-]?[0-9]{3,4}(?-u:\b)",
        Check::None,
    ),
    // Mainland China mobile numbers.
    detector(
        "phone_cn",
        "phone",
        r"(?-u:\b)1[3-9][0-9]{9}(?-u:\b)",
        Check::None,
    ),
];

/// `Basic` is an ordinary word, so the credential must decode to `user:password`.
fn is_basic_credential(secret: &str) -> bool {
    checksum::base64_decode(secret.as_bytes())
        .and_then(|raw| String::from_utf8(raw).ok())
        .is_some_and(|cred| cred.contains(':') && !cred.chars().any(char::is_control))
}

fn is_cn_resident_id(id: &str) -> bool {
    checksum::mod11_2(id.as_bytes())
}

fn is_ssn(ssn: &str) -> bool {
    let part = |r: Range<usize>| ssn.get(r).and_then(|p| p.parse::<u32>().ok());
    match (part(0..3), part(4..6), part(7..11)) {
        (Some(area), Some(group), Some(serial)) => checksum::ssn_parts_valid(area, group, serial),
        _ => false,
    }
}

fn is_nino(nino: &str) -> bool {
    nino.get(..2)
        .is_some_and(|prefix| checksum::nino_prefix_valid(prefix.as_bytes()))
}

/// In `key: value` prose a bare word is more often text (`token: because`)
/// than a password; real secrets nearly always mix in digits or symbols, or
/// are long.
fn is_not_plain_word(value: &str) -> bool {
    value.len() >= 16 || !value.bytes().all(|b| b.is_ascii_alphabetic())
}

/// E.164 allows at most 15 digits; fewer than 8 is a price or a version.
fn is_intl_phone(phone: &str) -> bool {
    let digits = phone.bytes().filter(u8::is_ascii_digit).count();
    (8..=15).contains(&digits)
}

/// The IBAN at the start of a candidate: the country gives the length, the
/// IBAN must end where a group ends (a following uppercase word is not part
/// of it), and mod 97 must leave 1.
fn find_ibans(candidate: &str, out: &mut Vec<Range<usize>>) {
    let bytes = candidate.as_bytes();
    let country = match bytes.get(..2) {
        Some(&[a, b]) => [a.to_ascii_uppercase(), b.to_ascii_uppercase()],
        _ => return,
    };
    let Some(len) = checksum::iban_length(&country) else {
        return;
    };
    let mut compact = [0u8; 34];
    let mut n = 0;
    let mut end = 0;
    for (i, &b) in bytes.iter().enumerate() {
        if b == b' ' {
            continue;
        }
        compact[n] = b.to_ascii_uppercase();
        n += 1;
        end = i + 1;
        if n == len {
            if bytes.get(end).is_some_and(|&next| next != b' ') {
                return; // glued to more characters: some other code
            }
            break;
        }
    }
    if n == len && checksum::iban_checksum(&compact[..n]) {
        out.push(0..end);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ibans_end_with_their_country_length() {
        let find = |c: &str| {
            let mut out = Vec::new();
            find_ibans(c, &mut out);
            out.into_iter()
                .map(|r| c[r].to_string())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            find("GB82 WEST 1234 5698 7654 32"),
            ["GB82 WEST 1234 5698 7654 32"]
        );
        assert_eq!(
            find("GB82 WEST 1234 5698 7654 32 THE"),
            ["GB82 WEST 1234 5698 7654 32"]
        );
        assert!(find("GB82 WEST 1234 5698 7654 32THE").is_empty());
        assert!(find("GB83 WEST 1234 5698 7654 32").is_empty());
        assert!(find("US82 WEST 1234 5698 7654 32").is_empty());
    }

    #[test]
    fn ids_are_unique_and_labels_are_short_names() {
        let mut ids: Vec<_> = DETECTORS.iter().map(|d| d.id).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), DETECTORS.len());
        for d in DETECTORS {
            assert!(
                d.label.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'),
                "{}",
                d.label
            );
        }
    }
}

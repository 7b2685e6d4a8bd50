//! Engine versions as `--engine vllm@0.5` gives them.

use crate::error::PlannerError;

/// An engine version, `major.minor[.patch]` (a leading `v` allowed). A
/// pre-, post- or development-release suffix and a local label, as Python
/// packages write them (`0.4.4.post3`, `0.10.1rc1`, `0.11.0rc2.dev12`,
/// `0.5.3+cu121`), are read as the release they belong to: the profiles
/// change at releases, not between their builds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version(u32, u32, u32);

/// The suffix tags of a Python package version (PEP 440), longest first so
/// that `alpha` is not read as `a` followed by `lpha`.
const SUFFIX_TAGS: [&str; 9] = [
    "preview", "alpha", "beta", "post", "dev", "pre", "rc", "a", "b",
];

impl Version {
    pub const fn new(major: u32, minor: u32) -> Self {
        Self(major, minor, 0)
    }

    /// Parses `v`, naming the whole engine text `given` in the error.
    pub(super) fn parse(v: &str, given: &str) -> Result<Self, PlannerError> {
        let bad = || {
            PlannerError::invalid(
                "engine version",
                format!(
                    "`{given}`: the version must be numbers like `0.5`, `0.5.3` or \
                     `0.4.4.post3` after `@` (hint: `--engine vllm@0.5`)"
                ),
            )
        };
        let v = v.strip_prefix('v').unwrap_or(v);
        let v = match v.split_once('+') {
            Some((release, local)) if !local.is_empty() => release,
            Some(_) => return Err(bad()),
            None => v,
        };
        let (numbers, suffix) = split_release(v);
        let parts: Vec<&str> = numbers.split('.').collect();
        if parts.len() > 3 || !valid_suffix(suffix) {
            return Err(bad());
        }
        let mut n = [0u32; 3];
        for (slot, p) in n.iter_mut().zip(&parts) {
            *slot = p.parse().map_err(|_| bad())?;
        }
        Ok(Self(n[0], n[1], n[2]))
    }
}

/// Splits `0.4.4.post3` into the release `0.4.4` and the suffix `.post3`:
/// the release ends at the first character that is neither a digit nor a
/// dot followed by a digit.
fn split_release(v: &str) -> (&str, &str) {
    let bytes = v.as_bytes();
    let mut end = 0;
    while end < bytes.len() {
        let c = bytes[end];
        let dot_then_digit = c == b'.' && bytes.get(end + 1).is_some_and(u8::is_ascii_digit);
        if c.is_ascii_digit() || dot_then_digit {
            end += 1;
        } else {
            break;
        }
    }
    v.split_at(end)
}

/// Whether `s` is a run of PEP 440 suffixes (`.post3`, `rc1`, `.dev12`; a
/// `.`, `-` or `_` may stand before each tag), or empty.
fn valid_suffix(mut s: &str) -> bool {
    while !s.is_empty() {
        s = s.strip_prefix(['.', '-', '_']).unwrap_or(s);
        let Some(tag) = SUFFIX_TAGS.iter().find(|t| s.starts_with(*t)) else {
            return false;
        };
        s = s[tag.len()..].trim_start_matches(|c: char| c.is_ascii_digit());
    }
    true
}

/// A llama.cpp build number as its releases name them, `b6327` (or `6327`),
/// naming the whole engine text `given` in the error.
pub(super) fn parse_build(v: &str, given: &str) -> Result<u32, PlannerError> {
    v.strip_prefix('b').unwrap_or(v).parse().map_err(|_| {
        PlannerError::invalid(
            "engine version",
            format!(
                "`{given}`: a llama.cpp version is its build number, like `b6327` \
                 (hint: `--engine llama.cpp@b2800` for a build of May 2024)"
            ),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_python_package_version_is_read_as_its_release() {
        let v = |s: &str| Version::parse(s, s).ok();
        assert_eq!(v("0.4.4.post3"), Some(Version(0, 4, 4)));
        assert_eq!(v("v0.6.3.post1"), Some(Version(0, 6, 3)));
        assert_eq!(v("0.10.1rc1"), Some(Version(0, 10, 1)));
        assert_eq!(v("0.11.0rc2.dev12"), Some(Version(0, 11, 0)));
        assert_eq!(v("0.5.3+cu121"), Some(Version(0, 5, 3)));
        assert_eq!(v("0.9"), Some(Version(0, 9, 0)));
        assert_eq!(v("1.0.0a1"), Some(Version(1, 0, 0)));
    }

    #[test]
    fn what_is_not_a_version_is_refused() {
        for bad in [
            "",
            "abc",
            "0.5.x",
            "1.2.3.4",
            "0..5",
            "0.5.",
            "0.4.4.postx3",
            "0.5+",
            "post1",
            ".5",
        ] {
            assert!(Version::parse(bad, bad).is_err(), "{bad}");
        }
    }
}

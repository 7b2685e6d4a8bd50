//! Times in query strings: `2026-11-30`, `2026-11-30T12:00:00Z`, Unix
//! seconds, or an age like `90m`, `24h`, `7d` (the forms `glassbox trace
//! list --since` and the server's `/v1/traces?since=` accept).

/// A length of time like `90m`, `24h`, `7d`, `30s`, `2w` in microseconds,
/// or why `s` is not one (the age forms of [`parse_time`]).
pub fn parse_duration(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let bad = || {
        format!(
            "`{s}` is not a length of time (expected a number and a unit: 30s, 90m, 24h, 7d, 2w)"
        )
    };
    // The unit is the last character; only ASCII units are known, so the
    // number before it ends on a character boundary.
    let (number, scale) = match t.chars().last() {
        Some('s') => (&t[..t.len() - 1], 1_000_000u64),
        Some('m') => (&t[..t.len() - 1], 60_000_000),
        Some('h') => (&t[..t.len() - 1], 3_600_000_000),
        Some('d') => (&t[..t.len() - 1], 86_400_000_000),
        Some('w') => (&t[..t.len() - 1], 604_800_000_000),
        _ => return Err(bad()),
    };
    match number.parse::<u64>() {
        Ok(0) => Err(format!(
            "`{s}` is no time at all: give a length above 0, like 30s or 24h"
        )),
        Ok(n) => Ok(n.saturating_mul(scale)),
        Err(_) => Err(bad()),
    }
}

/// Microseconds since the epoch (UTC), or why `s` is not a time.
pub fn parse_time(s: &str, now_us: u64) -> Result<i64, String> {
    let now = i64::try_from(now_us).unwrap_or(i64::MAX);
    let s = s.trim();
    let units = [
        ('s', 1_000_000i64),
        ('m', 60_000_000),
        ('h', 3_600_000_000),
        ('d', 86_400_000_000),
        ('w', 604_800_000_000),
    ];
    if let Some(last) = s.chars().last()
        && let Some((_, scale)) = units.iter().find(|(c, _)| *c == last)
        && let Ok(n) = s[..s.len() - 1].parse::<i64>()
    {
        if n < 0 {
            return Err(format!(
                "`{s}` is an age, counted back from now, and cannot be negative: use {} (or a date for a time ahead)",
                &s[1..]
            ));
        }
        return Ok(now.saturating_sub(n.saturating_mul(*scale)));
    }
    if let Ok(secs) = s.parse::<i64>() {
        return Ok(secs.saturating_mul(1_000_000));
    }
    let bad = || {
        format!(
            "`{s}` is not a time (expected 2026-11-30, 2026-11-30T12:00:00Z, Unix seconds or an age like 24h)"
        )
    };
    let (date, clock) = match s.split_once(['T', ' ']) {
        Some((d, c)) => (d, Some(c.trim_end_matches('Z'))),
        None => (s, None),
    };
    let parts: Vec<&str> = date.split('-').collect();
    let [y, m, d] = parts.as_slice() else {
        return Err(bad());
    };
    let y: i64 = y.parse().map_err(|_| bad())?;
    let m: u32 = m.parse().map_err(|_| bad())?;
    let d: u32 = d.parse().map_err(|_| bad())?;
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        return Err(bad());
    }
    let mut us = days_from_civil(y, m, d) * 86_400_000_000;
    if let Some(c) = clock {
        let mut scale = 3_600_000_000i64;
        for part in c.split(':').take(3) {
            let v: f64 = part.parse().map_err(|_| bad())?;
            if !v.is_finite() || v < 0.0 {
                return Err(bad());
            }
            us += (v * scale as f64) as i64;
            scale /= 60;
        }
    }
    Ok(us)
}

/// Days since 1970-01-01 → (year, month, day), proleptic Gregorian.
pub fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// (year, month, day) → days since 1970-01-01, proleptic Gregorian.
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = i64::from(m);
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_lengths_of_time() {
        assert_eq!(parse_duration("90m"), Ok(5_400_000_000));
        assert_eq!(parse_duration("24h"), Ok(86_400_000_000));
        assert_eq!(parse_duration("30s"), Ok(30_000_000));
        // A unit that is not ASCII (`µ`) is refused, not sliced mid-character.
        for bad in ["", "h", "-1h", "1y", "soon", "5µ", "µ", "5µs"] {
            let e = parse_duration(bad).unwrap_err();
            assert!(e.contains("not a length of time"), "{bad}: {e}");
        }
        let zero = parse_duration("0h").unwrap_err();
        assert!(zero.contains("above 0"), "{zero}");
    }

    #[test]
    fn parses_the_documented_forms() {
        assert_eq!(parse_time("1970-01-02", 0), Ok(86_400_000_000));
        assert_eq!(parse_time("1970-01-01T00:01:00Z", 0), Ok(60_000_000));
        assert_eq!(parse_time("10", 0), Ok(10_000_000));
        assert_eq!(parse_time("1h", 3_600_000_000), Ok(0));
        assert!(parse_time("yesterday", 0).is_err());
        assert!(parse_time("2026-13-01", 0).is_err());
        // An age is counted back from now: a negative one would reach into
        // the future and match nothing, so it is refused with the fix.
        let e = parse_time("-5h", 3_600_000_000).unwrap_err();
        assert!(
            e.contains("cannot be negative") && e.contains("use 5h"),
            "{e}"
        );
    }
}

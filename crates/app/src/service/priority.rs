//! Which priority band a request runs in: the band it asks for, capped by
//! its key's `max_priority`.
//!
//! A request asks by the `X-Glassbox-Priority` header (any API; it wins),
//! the runs API's `priority` query parameter, or in a chat or embeddings
//! body: `priority` as a band name or as vLLM's integer (below 0
//! interactive, 0 online, above 0 offline), or OpenAI's `service_tier`
//! (`flex`: offline, `priority`: interactive). Asking for nothing is
//! `online`.

use glassbox_trace::Priority;
use serde_json::Value;

use super::error::ServiceError;
use super::limiter::Caller;

/// The header a request names its band in.
pub const HEADER: &str = "x-glassbox-priority";

/// The band a request asked for, if any: `header` (the text of
/// [`HEADER`]), else `field` (a query parameter or a body's `priority`),
/// else `service_tier`. A value that is no band is a `bad_priority`
/// refusal naming where it came from.
pub fn asked(
    header: Option<&str>,
    field: Option<&Value>,
    service_tier: Option<&str>,
) -> Result<Option<Priority>, ServiceError> {
    let bad = |what: &str, reason: String| ServiceError::BadPriority {
        what: what.to_string(),
        reason,
    };
    if let Some(text) = header {
        return text
            .parse()
            .map(Some)
            .map_err(|e| bad("header `X-Glassbox-Priority`", e));
    }
    match field {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) => return s.parse().map(Some).map_err(|e| bad("`priority`", e)),
        Some(Value::Number(n)) => {
            return n
                .as_i64()
                .map(Priority::from_rank)
                .map(Some)
                .ok_or_else(|| {
                    bad(
                        "`priority`",
                        format!("`{n}` is not an integer (vLLM's priority: lower runs earlier)"),
                    )
                });
        }
        Some(other) => {
            return Err(bad(
                "`priority`",
                format!("expected a band name or an integer, got `{other}`"),
            ));
        }
    }
    Ok(match service_tier {
        Some("flex") => Some(Priority::Offline),
        Some("priority") => Some(Priority::Interactive),
        _ => None,
    })
}

/// The band a request runs in, and the band it asked for when its key's
/// `max_priority` lowered it.
pub fn band(asked: Option<Priority>, caller: Option<&Caller>) -> (Priority, Option<Priority>) {
    let wanted = asked.unwrap_or_default();
    match caller.and_then(|c| c.max_priority) {
        Some(cap) if wanted < cap => (cap, asked),
        _ => (wanted, None),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_header_wins_then_the_field_then_the_service_tier() {
        let mut h = None;
        assert_eq!(asked(h, None, None).unwrap(), None);
        assert_eq!(
            asked(h, None, Some("flex")).unwrap(),
            Some(Priority::Offline)
        );
        assert_eq!(asked(h, None, Some("auto")).unwrap(), None);
        assert_eq!(
            asked(h, Some(&json!(-3)), Some("flex")).unwrap(),
            Some(Priority::Interactive)
        );
        assert_eq!(
            asked(h, Some(&json!("batch")), None).unwrap(),
            Some(Priority::Offline)
        );
        h = Some("online");
        assert_eq!(
            asked(h, Some(&json!("batch")), None).unwrap(),
            Some(Priority::Online)
        );
        h = Some("soon");
        let e = asked(h, None, None).unwrap_err();
        assert_eq!(e.code(), "bad_priority");
        let message = e.to_string();
        assert!(
            message.contains("X-Glassbox-Priority") && message.contains("soon"),
            "{message}"
        );
        let e = asked(None, Some(&json!(1.5)), None).unwrap_err();
        assert!(e.to_string().contains("`priority`"), "{e}");
    }

    #[test]
    fn a_key_caps_the_band_it_may_use() {
        let capped = Caller {
            name: "nightly".into(),
            limit: None,
            max_priority: Some(Priority::Offline),
            max_run_time: None,
        };
        assert_eq!(band(None, None), (Priority::Online, None));
        assert_eq!(
            band(Some(Priority::Interactive), None),
            (Priority::Interactive, None)
        );
        assert_eq!(band(None, Some(&capped)), (Priority::Offline, None));
        assert_eq!(
            band(Some(Priority::Online), Some(&capped)),
            (Priority::Offline, Some(Priority::Online))
        );
        assert_eq!(
            band(Some(Priority::Offline), Some(&capped)),
            (Priority::Offline, None)
        );
    }
}

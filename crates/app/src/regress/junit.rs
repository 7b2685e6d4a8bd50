//! JUnit XML, the report format CI systems (GitHub Actions, GitLab, Jenkins)
//! read: one `<testsuite>` per run of `glassbox test`, one `<testcase>` per
//! case or replayed request, a `<failure>` listing every miss, `<skipped>`
//! for a request that could not be replayed. Written by hand: five escapes
//! are all the XML it needs, not worth a crate on two cores.

use std::fmt::Write as _;

use super::suite::Suite;

fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // XML 1.0 allows no other control characters, even escaped.
            c if c.is_control() && !matches!(c, '\n' | '\t' | '\r') => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}

/// The XML document for `suites`.
pub fn render(suites: &[Suite]) -> String {
    let total = |f: fn(&Suite) -> usize| suites.iter().map(f).sum::<usize>();
    let time: f64 = suites
        .iter()
        .flat_map(|s| &s.results)
        .map(|r| r.seconds)
        .sum();
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        out,
        "<testsuites name=\"glassbox test\" tests=\"{}\" failures=\"{}\" errors=\"0\" skipped=\"{}\" time=\"{time:.3}\">",
        total(|s| s.results.len()),
        total(Suite::failed),
        total(Suite::skipped),
    );
    for s in suites {
        let time: f64 = s.results.iter().map(|r| r.seconds).sum();
        let _ = writeln!(
            out,
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"0\" skipped=\"{}\" time=\"{time:.3}\">",
            escape(&s.name),
            s.results.len(),
            s.failed(),
            s.skipped(),
        );
        for r in &s.results {
            let _ = write!(
                out,
                "    <testcase name=\"{}\" classname=\"{}\" file=\"{}\" time=\"{:.3}\"",
                escape(&r.name),
                escape(&s.name),
                escape(&r.location),
                r.seconds
            );
            if r.passed() {
                out.push_str("/>\n");
                continue;
            }
            out.push_str(">\n");
            if let Some(why) = &r.skipped {
                let _ = writeln!(out, "      <skipped message=\"{}\"/>", escape(why));
            }
            if let Some(first) = r.failures.first() {
                let _ = writeln!(
                    out,
                    "      <failure message=\"{}\" type=\"expectation\">{}\nrequest {}</failure>",
                    escape(first),
                    escape(&r.failures.join("\n")),
                    escape(&r.request_id),
                );
            }
            out.push_str("    </testcase>\n");
        }
        out.push_str("  </testsuite>\n");
    }
    out.push_str("</testsuites>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::regress::suite::CaseResult;

    fn result(name: &str, failures: &[&str], skipped: Option<&str>) -> CaseResult {
        CaseResult {
            name: name.into(),
            location: "cases.yaml:3".into(),
            seconds: 0.25,
            failures: failures.iter().map(|f| f.to_string()).collect(),
            skipped: skipped.map(str::to_string),
            request_id: "r1".into(),
            path: "route → a".into(),
            cost: "0.1".into(),
        }
    }

    #[test]
    fn counts_failures_and_skips_and_escapes_text() {
        let xml = render(&[Suite {
            name: "moderation@1.0.0".into(),
            results: vec![
                result("ok <1>", &[], None),
                result(
                    "bad",
                    &["path: expected a & b", "labels.route: \"x\""],
                    None,
                ),
                result("old", &[], Some("input cut")),
            ],
        }]);
        assert!(xml.starts_with("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites"));
        assert!(
            xml.contains("tests=\"3\" failures=\"1\" errors=\"0\" skipped=\"1\" time=\"0.750\""),
            "{xml}"
        );
        assert!(xml.contains("<testcase name=\"ok &lt;1&gt;\" classname=\"moderation@1.0.0\" file=\"cases.yaml:3\" time=\"0.250\"/>"), "{xml}");
        assert!(xml.contains("<failure message=\"path: expected a &amp; b\" type=\"expectation\">path: expected a &amp; b\nlabels.route: &quot;x&quot;\nrequest r1</failure>"), "{xml}");
        assert!(xml.contains("<skipped message=\"input cut\"/>"), "{xml}");
        assert_eq!(xml.matches("<testcase ").count(), 3);
        assert_eq!(xml.matches("</testcase>").count(), 2);
        assert!(xml.trim_end().ends_with("</testsuites>"));
    }
}

//! `glassbox versions`: the versions a running `glassbox serve` holds of one
//! topology, and the traffic between them: `list`, `split`, `promote`,
//! `rollback`. Changes apply to the next request, with no restart.
//!
//! A thin client of the server's API (`/v1/topologies/{id}/versions`,
//! `/split`, `/versions/{v}/promote`, `/rollback`): the server owns the
//! state, so every operator and the dashboard see the same split.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::process::ExitCode;
use std::time::Duration;

use serde_json::{Value, json};

use super::common::OutputFormat;
use super::store::format_time;
use crate::exit::{self, Coded};
use crate::out;
use crate::out::table::{Align, Table};

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Exit codes: 0 ok, 1 the server failed, 2 usage, 69 the server cannot be \
                  reached, 78 the server refused the change (unknown version, a split that \
                  does not add up to 100, nothing to roll back to, a key without the scope).\n\n\
                  Requests pick their version by key: the `X-Glassbox-Key` header, the OpenAI \
                  `user` field or `?key=` on a run. One key stays on one version while the \
                  split stands."
)]
pub struct Args {
    #[command(subcommand)]
    pub command: VersionsCommand,
    /// Base URL of the server.
    #[arg(
        long,
        visible_alias = "server",
        global = true,
        default_value = "http://127.0.0.1:8080"
    )]
    pub url: String,
    /// API key, sent as `Authorization: Bearer KEY` (changes need the
    /// `admin` scope, `list` needs `read`).
    #[arg(long, env = "GLASSBOX_API_KEY", hide_env_values = true, global = true)]
    pub api_key: Option<String>,
    #[arg(long, value_enum, default_value_t, global = true)]
    pub format: OutputFormat,
}

#[derive(Debug, clap::Subcommand)]
pub enum VersionsCommand {
    /// The loaded versions of a topology, the promoted one and the split.
    List {
        /// Topology id.
        topology: String,
    },
    /// Splits traffic between versions: `VERSION=PERCENT ...`, adding up to 100.
    Split {
        /// Topology id.
        topology: String,
        /// e.g. `1.0.0=90 1.1.0=10`.
        #[arg(required = true, value_name = "VERSION=PERCENT")]
        shares: Vec<String>,
    },
    /// Sends all traffic to a version (the split is cleared).
    Promote {
        /// Topology id.
        topology: String,
        /// The loaded version to promote.
        #[arg(value_name = "VERSION")]
        target: String,
    },
    /// Returns all traffic to the version promoted before the current one.
    Rollback {
        /// Topology id.
        topology: String,
    },
}

/// `1.0.0=90` → ("1.0.0", 90).
pub fn parse_share(s: &str) -> Result<(String, u32), String> {
    let (v, p) = s
        .rsplit_once('=')
        .ok_or_else(|| format!("`{s}` is not VERSION=PERCENT (e.g. `1.1.0=10`)"))?;
    let p = p.trim_end_matches('%');
    let percent = p
        .parse::<u32>()
        .map_err(|_| format!("`{s}`: `{p}` is not a whole percentage (0 to 100)"))?;
    if v.is_empty() {
        return Err(format!("`{s}` names no version (e.g. `1.1.0=10`)"));
    }
    Ok((v.to_string(), percent))
}

fn usage(message: String) -> anyhow::Error {
    anyhow::Error::new(Coded {
        code: exit::USAGE,
        message,
    })
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let (method, path, body) = match &args.command {
        VersionsCommand::List { topology } => {
            ("GET", format!("/v1/topologies/{topology}/versions"), None)
        }
        VersionsCommand::Split { topology, shares } => {
            let mut weights = BTreeMap::new();
            for s in shares {
                let (v, p) = parse_share(s).map_err(usage)?;
                if weights.insert(v.clone(), p).is_some() {
                    return Err(usage(format!("version `{v}` is given twice")));
                }
            }
            let body = json!({ "weights": weights });
            (
                "PUT",
                format!("/v1/topologies/{topology}/split"),
                Some(body),
            )
        }
        VersionsCommand::Promote { topology, target } => (
            "POST",
            format!("/v1/topologies/{topology}/versions/{target}/promote"),
            Some(json!({})),
        ),
        VersionsCommand::Rollback { topology } => (
            "POST",
            format!("/v1/topologies/{topology}/rollback"),
            Some(json!({})),
        ),
    };
    let answer = call(&args, method, &path, body)?;
    match args.format {
        OutputFormat::Json => out::print_json(&answer)?,
        OutputFormat::Table => out::print_text(&table(&answer))?,
    }
    Ok(ExitCode::SUCCESS)
}

/// One API call; the server's error (message and hint) becomes ours.
fn call(args: &Args, method: &str, path: &str, body: Option<Value>) -> anyhow::Result<Value> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(30)))
        .http_status_as_error(false)
        .build()
        .into();
    let base = args.url.trim_end_matches('/');
    let url = format!("{base}{path}");
    let auth = args.api_key.as_ref().map(|k| format!("Bearer {k}"));
    let sent = match (method, body) {
        ("GET", _) | (_, None) => {
            let mut req = agent.get(&url);
            if let Some(a) = &auth {
                req = req.header("authorization", a);
            }
            req.call()
        }
        (m, Some(body)) => {
            let mut req = if m == "PUT" {
                agent.put(&url)
            } else {
                agent.post(&url)
            };
            req = req.header("content-type", "application/json");
            if let Some(a) = &auth {
                req = req.header("authorization", a);
            }
            req.send(body.to_string().as_bytes())
        }
    };
    let mut response = sent.map_err(|e| {
        anyhow::Error::new(Coded {
            code: exit::UNAVAILABLE,
            message: format!(
                "cannot reach the server at `{base}`: {e} (is `glassbox serve` running? set --url)"
            ),
        })
    })?;
    let status = response.status().as_u16();
    let text = response.body_mut().read_to_string().unwrap_or_default();
    let value: Value = serde_json::from_str(&text).unwrap_or(Value::String(text));
    if status < 300 {
        return Ok(value);
    }
    let err = &value["error"];
    let mut message = format!(
        "{method} {path}: {} ({})",
        err["message"].as_str().unwrap_or("the server refused"),
        err["code"].as_str().unwrap_or("error")
    );
    if let Some(hint) = err["hint"].as_str() {
        let _ = write!(message, "\n  hint: {hint}");
    }
    let code = if (400..500).contains(&status) {
        exit::INVALID
    } else {
        exit::FAILED
    };
    Err(anyhow::Error::new(Coded { code, message }))
}

/// The versions as a table: `*` marks the promoted one.
pub fn table(v: &Value) -> String {
    let mut out = String::new();
    let split: Vec<String> = v["split"]
        .as_array()
        .map(|s| {
            s.iter()
                .map(|x| format!("{} {}%", x["version"].as_str().unwrap_or("?"), x["percent"]))
                .collect()
        })
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "{}  promoted {}  split {}  rollback to {}",
        v["id"].as_str().unwrap_or("?"),
        v["promoted"].as_str().unwrap_or("?"),
        if split.is_empty() {
            "none (all traffic on the promoted version)".to_string()
        } else {
            split.join(" / ")
        },
        v["rollback_to"].as_str().unwrap_or("-"),
    );
    let rows = v["versions"]
        .as_array()
        .map(|vs| {
            vs.iter()
                .map(|x| {
                    let star = if x["promoted"].as_bool() == Some(true) {
                        "*"
                    } else {
                        ""
                    };
                    vec![
                        format!("{}{star}", x["version"].as_str().unwrap_or("?")),
                        format!("{}%", x["percent"]),
                        x["file"].as_str().unwrap_or("").to_string(),
                        format_time(x["loaded_at_us"].as_i64().unwrap_or(0)),
                    ]
                })
                .collect()
        })
        .unwrap_or_default();
    let t = Table::new(&["version", "traffic", "file", "loaded"])
        .indent("  ")
        .align(&[Align::Left, Align::Right, Align::Left, Align::Left])
        .rows(rows);
    out.push_str(&t.render());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_parse_and_refuse_with_a_reason() {
        assert_eq!(parse_share("1.1.0=10"), Ok(("1.1.0".into(), 10)));
        assert_eq!(parse_share("v2=25%"), Ok(("v2".into(), 25)));
        assert!(
            parse_share("1.1.0")
                .unwrap_err()
                .contains("VERSION=PERCENT")
        );
        assert!(
            parse_share("1.1.0=ten")
                .unwrap_err()
                .contains("whole percentage")
        );
        assert!(parse_share("=5").unwrap_err().contains("names no version"));
    }

    #[test]
    fn the_table_marks_the_promoted_version_and_the_split() {
        let v = json!({
            "id": "echo", "promoted": "1.0.0", "rollback_to": null,
            "split": [{"version": "1.1.0", "percent": 10}, {"version": "1.0.0", "percent": 90}],
            "versions": [
                {"version": "1.0.0", "percent": 90, "promoted": true, "file": "a.yaml", "loaded_at_us": 0},
                {"version": "1.1.0", "percent": 10, "promoted": false, "file": "b.yaml", "loaded_at_us": 0}
            ]
        });
        let t = table(&v);
        assert!(
            t.starts_with("echo  promoted 1.0.0  split 1.1.0 10% / 1.0.0 90%"),
            "{t}"
        );
        assert!(t.contains("1.0.0*"), "{t}");
        assert!(t.contains("b.yaml"), "{t}");
    }
}

//! A worker that registers a server already running elsewhere (vLLM,
//! SGLang, llama.cpp's `llama-server`, another Glassbox): its models from
//! `GET /v1/models`, its load from `GET /metrics` about every second
//! (`glassbox_cluster::attach`). Requests go through the project's one
//! outbound policy (`glassbox_nodes::outbound`), allowed to that one host.

use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use glassbox_cluster::attach::{Engine, LoadReader};
use glassbox_cluster::{Load, WorkerRecord};
use glassbox_nodes::outbound::{Client, ClientOptions, Request};

use super::args::Args;
use super::member::{Common, usage};
use crate::exit::{self, Coded};

/// Bodies read from the attached server (model lists, metrics) are capped.
const MAX_BODY: u64 = 16 << 20;

pub(super) fn run(args: Args, common: Common, url: &str) -> anyhow::Result<ExitCode> {
    let base = url.trim_end_matches('/').trim_end_matches("/v1").to_owned();
    let host = url_host(&base).ok_or_else(|| {
        usage(format!(
            "`--attach {url}` is not an http(s) base URL (for example `http://10.0.0.7:8000`)"
        ))
    })?;
    let engine = match &args.engine {
        Some(name) => Some(Engine::from_name(name).ok_or_else(|| {
            usage(format!(
                "`--engine {name}` is not one of vllm, sglang, llama.cpp, glassbox"
            ))
        })?),
        None => None,
    };
    let client = Client::new(
        ClientOptions {
            allow_hosts: vec![host],
            restrict_hosts: true,
            max_redirects: 0,
            timeout: Duration::from_secs(5),
        },
        None,
    );
    let models = fetch_models(&client, &base)?;
    let origin = Instant::now();
    let mut reader = LoadReader::new(engine);
    let metrics = get(&client, &format!("{base}/metrics"))?;
    let first = reader
        .read(&metrics, origin.elapsed())
        .map_err(|e| unavailable(format!("`{base}/metrics`: {e}")))?;
    let engine = reader.engine().map_or("unknown", Engine::name);
    let record = WorkerRecord {
        id: common.id.clone(),
        address: args.advertise.clone().unwrap_or_else(|| base.clone()),
        engine: engine.to_owned(),
        // The attached server's machine is not this one: no hardware is
        // claimed for it beyond what its operator labels.
        hardware: glassbox_cluster::Hardware::default(),
        models: models.clone(),
        node_kinds: if args.node_kinds.is_empty() {
            vec!["llm_inference".to_owned()]
        } else {
            args.node_kinds.clone()
        },
        labels: common.labels.clone(),
        started_at: common.started_at,
    };
    let last = Arc::new(Mutex::new(first));
    let scrape_client = client.clone();
    let scrape_url = format!("{base}/metrics");
    let shared = last.clone();
    let mut failing = false;
    // Called on the registration thread about every second; a failed
    // scrape keeps the last load, whose `at` then ages, which placement
    // reads as stale.
    let load = move || match get(&scrape_client, &scrape_url)
        .map_err(|e| e.to_string())
        .and_then(|text| {
            reader
                .read(&text, origin.elapsed())
                .map_err(|e| e.to_string())
        }) {
        Ok(load) => {
            if failing {
                crate::out::status(&format!("glassbox worker: `{scrape_url}` answers again"));
                failing = false;
            }
            if let Ok(mut l) = shared.lock() {
                *l = load.clone();
            }
            load
        }
        Err(e) => {
            if !failing {
                crate::out::status(&format!(
                    "glassbox worker: reading `{scrape_url}` failed: {e}"
                ));
                failing = true;
            }
            shared
                .lock()
                .map_or_else(|_| Load::default(), |l| l.clone())
        }
    };
    let registration = common.register(record, load)?;
    crate::out::status(&format!(
        "glassbox worker: `{}` attached {engine} server {base} serving {}",
        common.id,
        models.join(", ")
    ));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(glassbox_server::shutdown_signal());
    registration.shutdown();
    Ok(ExitCode::SUCCESS)
}

fn url_host(url: &str) -> Option<String> {
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))?;
    let authority = rest.split('/').next()?;
    let authority = authority.rsplit_once('@').map_or(authority, |(_, a)| a);
    let host = if let Some(v6) = authority.strip_prefix('[') {
        v6.split(']').next()?
    } else {
        authority.split(':').next()?
    };
    (!host.is_empty()).then(|| host.to_ascii_lowercase())
}

fn unavailable(message: String) -> anyhow::Error {
    anyhow::Error::new(Coded {
        code: exit::UNAVAILABLE,
        message,
    })
}

/// `GET url`'s body, or an error naming the URL and status.
fn get(client: &Client, url: &str) -> anyhow::Result<String> {
    let answer = client
        .send(Request {
            method: "GET",
            url,
            headers: &[],
            body: None,
        })
        .map_err(|e| unavailable(format!("`{url}`: {e}")))?;
    let status = answer.response.status().as_u16();
    let body = answer
        .response
        .into_body()
        .with_config()
        .limit(MAX_BODY)
        .read_to_string()
        .map_err(|e| unavailable(format!("`{url}`: reading the answer: {e}")))?;
    if !(200..300).contains(&status) {
        let hint = if url.ends_with("/metrics") {
            " (llama-server serves metrics only with `--metrics`)"
        } else {
            ""
        };
        return Err(unavailable(format!("`{url}` answered HTTP {status}{hint}")));
    }
    Ok(body)
}

/// The ids of `GET /v1/models`.
fn fetch_models(client: &Client, base: &str) -> anyhow::Result<Vec<String>> {
    let url = format!("{base}/v1/models");
    let body = get(client, &url)?;
    let ids = model_ids(&body).map_err(|e| unavailable(format!("`{url}`: {e}")))?;
    if ids.is_empty() {
        return Err(unavailable(format!("`{url}` lists no model")));
    }
    Ok(ids)
}

fn model_ids(body: &str) -> Result<Vec<String>, String> {
    let v: serde_json::Value = serde_json::from_str(body).map_err(|e| format!("not JSON: {e}"))?;
    let data = v
        .get("data")
        .and_then(|d| d.as_array())
        .ok_or("no `data` list (is this an OpenAI-compatible server?)")?;
    Ok(data
        .iter()
        .filter_map(|m| m.get("id").and_then(|i| i.as_str()).map(str::to_owned))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_and_model_lists() {
        assert_eq!(
            url_host("http://10.0.0.7:8000").as_deref(),
            Some("10.0.0.7")
        );
        assert_eq!(url_host("http://u:p@Gpu-1/x").as_deref(), Some("gpu-1"));
        assert_eq!(url_host("http://[::1]:8000").as_deref(), Some("::1"));
        assert_eq!(url_host("ftp://x"), None);
        let body = r#"{"object":"list","data":[{"id":"meta-llama/Llama-3.1-8B-Instruct","object":"model"},{"id":"other"}]}"#;
        assert_eq!(
            model_ids(body).unwrap(),
            vec!["meta-llama/Llama-3.1-8B-Instruct", "other"]
        );
        assert!(model_ids("{}").unwrap_err().contains("`data`"));
        assert!(model_ids("<html>").unwrap_err().contains("not JSON"));
    }
}

//! A small client for OpenAI-compatible servers (vLLM, SGLang, llama.cpp
//! server, TGI, Ollama): `/chat/completions` and `/embeddings`. Blocking
//! (`ureq`), run on the engine's blocking pool.

use std::time::Duration;

use glassbox_engine::NodeError;
use serde_json::{Value, json};

/// Where the server is and how to authenticate.
#[derive(Debug, Clone)]
pub struct Endpoint {
    pub base_url: String,
    pub model: String,
    /// The *name* of the environment variable holding the API key.
    pub api_key_env: Option<String>,
    pub timeout: Duration,
}

impl Endpoint {
    pub fn from_config(config: &Value, timeout: Duration) -> Option<Endpoint> {
        Some(Endpoint {
            base_url: config
                .get("base_url")?
                .as_str()?
                .trim_end_matches('/')
                .to_string(),
            model: config.get("model")?.as_str()?.to_string(),
            api_key_env: config
                .get("api_key_env")
                .and_then(Value::as_str)
                .map(str::to_string),
            timeout,
        })
    }

    fn post(&self, path: &str, body: &Value) -> Result<Value, NodeError> {
        let url = format!("{}{path}", self.base_url);
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(self.timeout))
            .http_status_as_error(false)
            .build()
            .into();
        let mut req = agent.post(&url).header("content-type", "application/json");
        if let Some(var) = &self.api_key_env {
            let key = std::env::var(var).map_err(|_| {
                NodeError::BadInput(format!(
                    "environment variable `{var}` (api_key_env) is not set"
                ))
            })?;
            req = req.header("authorization", &format!("Bearer {key}"));
        }
        let mut resp = req
            .send(body.to_string().as_bytes())
            .map_err(|e| NodeError::Unavailable(format!("{url}: {e}")))?;
        let status = resp.status().as_u16();
        let text = resp
            .body_mut()
            .read_to_string()
            .map_err(|e| NodeError::Unavailable(format!("{url}: reading the answer: {e}")))?;
        if status >= 500 || status == 429 {
            return Err(NodeError::Unavailable(format!(
                "{url} answered {status}: {}",
                snippet(&text)
            )));
        }
        if status >= 400 {
            return Err(NodeError::BadInput(format!(
                "{url} answered {status}: {}",
                snippet(&text)
            )));
        }
        serde_json::from_str(&text).map_err(|e| {
            NodeError::Unavailable(format!(
                "{url} answered invalid JSON ({e}): {}",
                snippet(&text)
            ))
        })
    }

    /// A chat completion: text, prompt tokens, completion tokens, served model.
    pub fn chat(
        &self,
        messages: Value,
        params: &Value,
    ) -> Result<(String, u64, u64, String), NodeError> {
        let mut body = json!({ "model": self.model, "messages": messages, "stream": false });
        if let (Some(b), Some(p)) = (body.as_object_mut(), params.as_object()) {
            for (k, v) in p {
                b.insert(k.clone(), v.clone());
            }
        }
        let v = self.post("/chat/completions", &body)?;
        let text = v
            .pointer("/choices/0/message/content")
            .and_then(Value::as_str)
            .ok_or_else(|| {
                NodeError::Unavailable(format!(
                    "no `choices[0].message.content` in {}",
                    snippet(&v.to_string())
                ))
            })?
            .to_string();
        let usage = |k: &str| {
            v.pointer(&format!("/usage/{k}"))
                .and_then(Value::as_u64)
                .unwrap_or(0)
        };
        let model = v
            .get("model")
            .and_then(Value::as_str)
            .unwrap_or(&self.model)
            .to_string();
        Ok((
            text,
            usage("prompt_tokens"),
            usage("completion_tokens"),
            model,
        ))
    }

    /// Embeddings of `texts`, and the prompt tokens reported.
    pub fn embed(&self, texts: &[String]) -> Result<(Vec<Vec<f32>>, u64), NodeError> {
        let v = self.post(
            "/embeddings",
            &json!({ "model": self.model, "input": texts }),
        )?;
        let data = v
            .get("data")
            .and_then(Value::as_array)
            .ok_or_else(|| NodeError::Unavailable("no `data` in the embeddings answer".into()))?;
        let vectors = data
            .iter()
            .map(|d| {
                d.get("embedding")
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .filter_map(Value::as_f64)
                            .map(|x| x as f32)
                            .collect()
                    })
                    .ok_or_else(|| NodeError::Unavailable("an embedding is missing".into()))
            })
            .collect::<Result<Vec<Vec<f32>>, _>>()?;
        let tokens = v
            .pointer("/usage/prompt_tokens")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        Ok((vectors, tokens))
    }
}

fn snippet(text: &str) -> String {
    text.chars().take(200).collect()
}

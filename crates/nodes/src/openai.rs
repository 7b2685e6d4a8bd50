//! A small client for OpenAI-compatible servers (vLLM, SGLang, llama.cpp
//! server, TGI, Ollama): `/chat/completions` and `/embeddings`. Blocking
//! (`ureq`), run on the engine's blocking pool.
//!
//! Connections go through [`crate::outbound`]: the `base_url` host must pass
//! the deny list (a local server needs `allow_hosts: ["127.0.0.1"]`),
//! redirects are not followed, and an error answer's body goes to the
//! span's admin-only detail, never into the caller's error.

use std::time::Duration;

use glassbox_engine::trace::TokenUsage;
use glassbox_engine::{BuildError, NodeError, TokenStream};
use serde_json::{Value, json};

use crate::check::Backend;
use crate::outbound::{
    Client, ClientOptions, Request, ServerAllow, WorkerTimeouts, display_url, upstream_error,
};

/// What a chat completion answered: the text, the tokens by price class
/// (OpenAI's `prompt_tokens_details.cached_tokens`, `.audio_tokens`,
/// `completion_tokens_details.reasoning_tokens`, `.audio_tokens` split out
/// of the totals, as ingested calls are: `glassbox_engine::trace::tokens`), and the
/// model that answered.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatAnswer {
    pub text: String,
    pub tokens: TokenUsage,
    pub model: String,
}

impl ChatAnswer {
    /// Every prompt token.
    pub fn input(&self) -> u64 {
        self.tokens.prompt_total()
    }

    /// Every generated token.
    pub fn output(&self) -> u64 {
        self.tokens.completion_total()
    }
}

/// What a streamed chat hands its caller as it reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Streamed<'a> {
    /// A piece of the answer's text.
    Text(&'a str),
    /// A server-sent comment: a Glassbox worker sends one at least every
    /// second while the call is queued or prefilling (`: queued …`), so
    /// silence means a dead or hung call, not a long queue.
    Progress(&'a str),
}

/// A chat completion's answer: text or tool calls, usage and model.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatReply {
    pub text: String,
    /// OpenAI `tool_calls` as the server sent them.
    pub tool_calls: Option<Vec<Value>>,
    pub finish_reason: String,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub model: String,
}

/// Where the server is and how to authenticate.
#[derive(Debug, Clone)]
pub struct Endpoint {
    pub base_url: String,
    /// `base_url` without userinfo, for messages.
    shown_url: String,
    pub model: String,
    /// The *name* of the environment variable holding the API key.
    pub api_key_env: Option<String>,
    pub timeout: Duration,
    client: Client,
    /// Headers sent with every call besides the key (e.g. a cluster call's
    /// start deadline).
    headers: Vec<(String, String)>,
}

impl Endpoint {
    /// The endpoint of a `backend: openai` node at build, or the build error
    /// naming what is missing.
    pub fn for_node(
        config: &Backend,
        timeout: Duration,
        server: Option<&ServerAllow>,
    ) -> Result<Endpoint, BuildError> {
        Self::from_config(config, timeout, server)
            .ok_or_else(|| BuildError::config("`backend: openai` needs `base_url` and `model`"))?
    }

    /// The endpoint of a `backend: openai` node; `None` when `base_url` or
    /// `model` is missing. The host of `base_url` is checked against the
    /// outbound policy here and again on every connection.
    pub fn from_config(
        config: &Backend,
        timeout: Duration,
        server: Option<&ServerAllow>,
    ) -> Option<Result<Endpoint, BuildError>> {
        let base_url = config
            .base_url
            .as_deref()?
            .trim_end_matches('/')
            .to_string();
        let model = config.model.clone()?;
        let shown_url = display_url(&base_url);
        let Some(host) = crate::outbound::url_host(&base_url) else {
            return Some(Err(BuildError::config(format!(
                "`base_url` `{shown_url}` is not an http(s) URL"
            ))));
        };
        let client = Client::new(
            ClientOptions {
                allow_hosts: config.allow_hosts.clone(),
                restrict_hosts: false,
                max_redirects: 0,
                timeout,
            },
            server,
        );
        if let Err(e) = client.policy().check_static(host) {
            return Some(Err(BuildError::config(format!("`base_url`: {e}"))));
        }
        // The key is read only if the operator allows it, and sent only to
        // a host it is bound to (issue 33: `api_key_env: GLASSBOX_API_KEY`
        // sent the server's admin key to the node's `base_url`).
        if let Some(var) = &config.api_key_env {
            let access = server.map(|s| s.secrets.clone()).unwrap_or_default();
            let field = "config.api_key_env";
            if let Err(e) = access
                .check_env(field, var)
                .and_then(|()| access.check_host(field, var, host))
            {
                return Some(Err(BuildError::config(format!("{e} (hint: {})", e.hint()))));
            }
        }
        Some(Ok(Endpoint {
            base_url,
            shown_url,
            model,
            api_key_env: config.api_key_env.clone(),
            timeout,
            client,
            headers: Vec::new(),
        }))
    }

    /// The endpoint of a cluster worker: `address` is the base URL of its
    /// OpenAI-compatible API (`http://10.0.0.7:8090`, from its pool
    /// record), reached with the worker's own client
    /// ([`Client::for_worker`]). When [`WORKER_KEY_ENV`] is set, its value
    /// goes with every call as the bearer key (workers that listen beyond
    /// loopback require one).
    ///
    /// [`WORKER_KEY_ENV`]: glassbox_cluster::etcd::trust::WORKER_KEY_ENV
    pub fn for_worker(
        address: &str,
        model: &str,
        client: Client,
        timeouts: WorkerTimeouts,
    ) -> Endpoint {
        let base_url = format!("{}/v1", address.trim_end_matches('/'));
        Endpoint {
            shown_url: display_url(&base_url),
            base_url,
            model: model.to_string(),
            api_key_env: std::env::var_os(glassbox_cluster::etcd::trust::WORKER_KEY_ENV)
                .map(|_| glassbox_cluster::etcd::trust::WORKER_KEY_ENV.to_string()),
            timeout: timeouts.total,
            client,
            headers: Vec::new(),
        }
    }

    /// Sends `name: value` with every call too.
    pub fn with_header(mut self, name: &str, value: String) -> Endpoint {
        self.headers.push((name.to_string(), value));
        self
    }

    /// The client its calls go through (and its policy).
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Sends `body` and returns the response once its status says success.
    fn send(
        &self,
        path: &str,
        body: &Value,
    ) -> Result<ureq::http::Response<ureq::Body>, NodeError> {
        let url = format!("{}{path}", self.base_url);
        let mut headers = self.headers.clone();
        if let Some(var) = &self.api_key_env {
            let key = std::env::var(var).map_err(|_| {
                NodeError::BadInput(format!(
                    "environment variable `{var}` (api_key_env) is not set"
                ))
            })?;
            headers.push(("authorization".to_string(), format!("Bearer {key}")));
        }
        let body = body.to_string();
        let answer = self
            .client
            .send(Request {
                method: "POST",
                url: &url,
                headers: &headers,
                body: Some(body.as_bytes()),
            })
            .map_err(|e| e.into_node_error())?;
        let mut resp = answer.response;
        let status = resp.status().as_u16();
        if status < 300 {
            return Ok(resp);
        }
        let text = resp
            .body_mut()
            .with_config()
            .limit(64 * 1024)
            .read_to_string()
            .unwrap_or_default();
        Err(match upstream_error(&answer.host, status, &text) {
            NodeError::Upstream {
                message, detail, ..
            } if status < 500 && status != 429 => NodeError::Upstream {
                message,
                detail,
                retryable: false,
            },
            other => other,
        })
    }

    fn post(&self, path: &str, body: &Value) -> Result<Value, NodeError> {
        let text = self
            .send(path, body)?
            .body_mut()
            .read_to_string()
            .map_err(|e| {
                NodeError::Unavailable(format!("{}{path}: reading the answer: {e}", self.shown_url))
            })?;
        serde_json::from_str(&text).map_err(|e| NodeError::Upstream {
            message: format!("{}{path} answered invalid JSON", self.shown_url),
            detail: format!("{e}: {}", snippet(&text)),
            retryable: true,
        })
    }

    /// A chat completion: text, prompt tokens, completion tokens, model.
    /// With `stream`, asks the server for server-sent events and forwards
    /// each content delta as it arrives; usage then comes from the final
    /// chunk (`stream_options.include_usage`).
    pub fn chat(
        &self,
        messages: Value,
        params: &Value,
        stream: Option<&TokenStream>,
    ) -> Result<ChatAnswer, NodeError> {
        let mut body =
            json!({ "model": self.model, "messages": messages, "stream": stream.is_some() });
        if stream.is_some() {
            body["stream_options"] = json!({ "include_usage": true });
        }
        if let (Some(b), Some(p)) = (body.as_object_mut(), params.as_object()) {
            for (k, v) in p {
                b.insert(k.clone(), v.clone());
            }
        }
        if let Some(stream) = stream {
            return self.read_stream(&body, &mut |streamed| {
                if let Streamed::Text(piece) = streamed {
                    stream.send(piece);
                }
                true
            });
        }
        let v = self.post("/chat/completions", &body)?;
        let text = v
            .pointer("/choices/0/message/content")
            .and_then(Value::as_str)
            .ok_or_else(|| NodeError::Upstream {
                message: format!(
                    "{}/chat/completions answered without `choices[0].message.content`",
                    self.shown_url
                ),
                detail: snippet(&v.to_string()),
                retryable: true,
            })?
            .to_string();
        let model = v
            .get("model")
            .and_then(Value::as_str)
            .unwrap_or(&self.model)
            .to_string();
        Ok(ChatAnswer {
            text,
            tokens: token_usage(&v),
            model,
        })
    }

    /// A chat completion that may answer with tool calls (the request's
    /// `tools`, `tool_choice` and `response_format` are in `params`), not
    /// streamed: a tool call is read whole.
    pub fn chat_reply(&self, messages: Value, params: &Value) -> Result<ChatReply, NodeError> {
        let mut body = json!({ "model": self.model, "messages": messages, "stream": false });
        if let (Some(b), Some(p)) = (body.as_object_mut(), params.as_object()) {
            for (k, v) in p {
                b.insert(k.clone(), v.clone());
            }
        }
        let v = self.post("/chat/completions", &body)?;
        let message = v
            .pointer("/choices/0/message")
            .ok_or_else(|| NodeError::Upstream {
                message: format!(
                    "{}/chat/completions answered without `choices[0].message`",
                    self.shown_url
                ),
                detail: snippet(&v.to_string()),
                retryable: true,
            })?;
        let tool_calls = message
            .get("tool_calls")
            .and_then(Value::as_array)
            .filter(|c| !c.is_empty())
            .cloned();
        Ok(ChatReply {
            text: message
                .get("content")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            finish_reason: v
                .pointer("/choices/0/finish_reason")
                .and_then(Value::as_str)
                .unwrap_or(if tool_calls.is_some() {
                    "tool_calls"
                } else {
                    "stop"
                })
                .to_string(),
            tool_calls,
            prompt_tokens: usage(&v, "prompt_tokens"),
            completion_tokens: usage(&v, "completion_tokens"),
            model: v
                .get("model")
                .and_then(Value::as_str)
                .unwrap_or(&self.model)
                .to_string(),
        })
    }

    /// A chat completion read as server-sent events: each content piece
    /// and each progress comment goes to `on_piece` as it arrives. When
    /// `on_piece` answers false the call is abandoned and its connection
    /// closed, so the server stops generating (or drops it from its
    /// queue); the answer is then [`abandoned`]'s error.
    pub fn chat_streamed(
        &self,
        messages: Value,
        params: &Value,
        on_piece: &mut dyn FnMut(Streamed<'_>) -> bool,
    ) -> Result<ChatAnswer, NodeError> {
        let mut body = json!({ "model": self.model, "messages": messages, "stream": true,
            "stream_options": { "include_usage": true } });
        if let (Some(b), Some(p)) = (body.as_object_mut(), params.as_object()) {
            for (k, v) in p {
                b.insert(k.clone(), v.clone());
            }
        }
        self.read_stream(&body, on_piece)
    }

    fn read_stream(
        &self,
        body: &Value,
        on_piece: &mut dyn FnMut(Streamed<'_>) -> bool,
    ) -> Result<ChatAnswer, NodeError> {
        use std::io::BufRead;
        let url = format!("{}/chat/completions", self.shown_url);
        let mut resp = self.send("/chat/completions", body)?;
        let reader = std::io::BufReader::new(resp.body_mut().as_reader());
        let (mut text, mut tokens, mut model) =
            (String::new(), TokenUsage::default(), self.model.clone());
        let mut done = false;
        for line in reader.lines() {
            let line = line
                .map_err(|e| NodeError::Unavailable(format!("{url}: reading the stream: {e}")))?;
            if let Some(comment) = line.strip_prefix(':') {
                if !on_piece(Streamed::Progress(comment.trim())) {
                    return Err(abandoned(&url));
                }
                continue;
            }
            let Some(data) = line.strip_prefix("data:").map(str::trim) else {
                continue;
            };
            if data == "[DONE]" {
                done = true;
                break;
            }
            let v: Value = serde_json::from_str(data).map_err(|e| NodeError::Upstream {
                message: format!("{url} streamed invalid JSON"),
                detail: format!("{e}: {}", snippet(data)),
                retryable: true,
            })?;
            if let Some(m) = v.get("model").and_then(Value::as_str) {
                model = m.to_string();
            }
            if let Some(piece) = v
                .pointer("/choices/0/delta/content")
                .and_then(Value::as_str)
                && !piece.is_empty()
            {
                text.push_str(piece);
                if !on_piece(Streamed::Text(piece)) {
                    return Err(abandoned(&url));
                }
            }
            if v.get("usage").is_some_and(Value::is_object) {
                tokens = token_usage(&v);
            }
        }
        if !done {
            return Err(NodeError::Unavailable(format!(
                "{url}: the stream ended without `data: [DONE]`"
            )));
        }
        Ok(ChatAnswer {
            text,
            tokens,
            model,
        })
    }

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

/// The error of a call its caller abandoned mid-stream (the request
/// was cancelled or timed out): not retried.
pub fn abandoned(url: &str) -> NodeError {
    NodeError::Failed {
        message: format!("{url}: abandoned, nobody waits for the answer any more"),
        retryable: false,
        source: None,
    }
}

fn usage(v: &Value, key: &str) -> u64 {
    v.pointer(&format!("/usage/{key}"))
        .and_then(Value::as_u64)
        .unwrap_or(0)
}

/// The `usage` of an answer by price class; a usage whose details exceed
/// its totals is taken as plain prompt and completion tokens.
fn token_usage(v: &Value) -> TokenUsage {
    let plain = || TokenUsage {
        input: usage(v, "prompt_tokens"),
        output: usage(v, "completion_tokens"),
        ..TokenUsage::default()
    };
    v.get("usage")
        .and_then(|u| TokenUsage::from_openai(u).ok())
        .unwrap_or_else(plain)
}

fn snippet(text: &str) -> String {
    text.chars().take(200).collect()
}

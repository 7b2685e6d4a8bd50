//! Liveness probes: every [`probe_interval`], each worker of the pool gets
//! a real request, since a server can answer `/health` while its engine
//! hangs. A worker that runs `llm_inference` gets a one-token chat
//! completion for the first model it lists; an embedding-only worker a
//! one-word embedding; any other worker `GET /health`. A probe that fails
//! or takes longer than [`probe_timeout`] marks the worker unhealthy
//! (placement leaves it out) until a later probe passes, and counts on its
//! circuit breaker.
//!
//! Probes run on one plain thread per dispatcher (each round's probes in
//! parallel, on scoped threads, so one hung worker delays nobody else's
//! probe); the thread ends once the dispatcher is dropped.
//!
//! [`probe_interval`]: super::DispatchOptions::probe_interval
//! [`probe_timeout`]: super::DispatchOptions::probe_timeout

use std::sync::Arc;
use std::time::Duration;

use glassbox_cluster::Member;
use serde_json::json;

use super::Dispatcher;
use crate::openai::Endpoint;
use crate::outbound::{Request, WorkerTimeouts};

impl Dispatcher {
    /// Starts probing the pool's workers in the background.
    pub fn start_probes(&self) -> std::io::Result<()> {
        let weak = Arc::downgrade(&self.inner);
        let interval = self
            .inner
            .options
            .probe_interval
            .max(Duration::from_millis(50));
        std::thread::Builder::new()
            .name("glassbox-probes".into())
            .spawn(move || {
                loop {
                    std::thread::sleep(interval);
                    let Some(inner) = weak.upgrade() else { break };
                    Dispatcher { inner }.probe_all();
                }
            })
            .map(|_| ())
    }

    /// Probes every worker once, in parallel, and records the results.
    pub fn probe_all(&self) {
        let members = self.pool().snapshot();
        std::thread::scope(|s| {
            for m in &members {
                s.spawn(move || {
                    let result = self.probe(m);
                    self.probed(&m.record.id, result);
                });
            }
        });
    }

    /// One probe of one worker.
    fn probe(&self, m: &Member) -> Result<(), String> {
        let client = self.probe_client(m);
        let r = &m.record;
        let timeouts = WorkerTimeouts {
            silence: self.inner.options.probe_timeout,
            total: self.inner.options.probe_timeout,
        };
        let runs = |kind: &str| r.node_kinds.iter().any(|k| k == kind);
        let mask = |e: glassbox_engine::NodeError| {
            glassbox_topology::secret::mask_text(&e.to_string()).into_owned()
        };
        match r.models.first() {
            Some(model) if runs("llm_inference") => {
                let endpoint = Endpoint::for_worker(&r.address, model, client, timeouts);
                let messages = json!([{ "role": "user", "content": "ping" }]);
                let params = json!({ "max_tokens": 1, "temperature": 0 });
                endpoint
                    .chat(messages, &params, None)
                    .map(|_| ())
                    .map_err(mask)
            }
            Some(model) if runs("embedding") => {
                let endpoint = Endpoint::for_worker(&r.address, model, client, timeouts);
                endpoint
                    .embed(&["ping".to_string()])
                    .map(|_| ())
                    .map_err(mask)
            }
            _ => {
                let url = format!("{}/health", r.address.trim_end_matches('/'));
                let answer = client
                    .send(Request {
                        method: "GET",
                        url: &url,
                        headers: &[],
                        body: None,
                    })
                    .map_err(|e| e.to_string())?;
                let status = answer.response.status().as_u16();
                if status < 300 {
                    Ok(())
                } else {
                    Err(format!("GET /health answered HTTP {status}"))
                }
            }
        }
    }
}

//! # glassbox-ingest
//!
//! Traces from pipelines Glassbox does not run: an OTLP trace receiver's
//! logic, protocol-free. OTLP/HTTP bodies (protobuf or JSON) are decoded
//! ([`decode`]), their spans gathered into whole traces ([`assemble`]),
//! each span read for what it was ([`classify`]: OpenInference and GenAI
//! semantic conventions) and each trace built into a Glassbox request of a
//! *discovered topology* ([`build`]), with a receipt from the price table
//! and an explanation from the recorded attributes. The server's
//! `POST /v1/traces` only translates HTTP to [`Receiver`] and hands the
//! records to the trace writer, so ingested requests are stored, listed,
//! reported, diffed and alerted on like native ones.
//!
//! [`discover`] turns stored requests of one discovered topology back into
//! its graph (the nodes and edges seen, with how often), for `glassbox graph`.
//!
//! Why this shape:
//! - The OTLP messages are a dozen `prost` structs written by hand
//!   ([`proto`]), which also read OTLP/JSON through serde: no `protoc`, no
//!   build script, no second copy of the types for JSON.
//! - Pricing and token classes live in `glassbox-trace` ([`glassbox_trace::price`],
//!   [`glassbox_trace::tokens`]), shared with Glassbox's own `openai` backend,
//!   so an ingested call and a native one are billed by the same code.

pub mod assemble;
pub mod attrs;
pub mod build;
pub mod classify;
pub mod discover;
pub mod held;
pub mod proto;

use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use glassbox_trace::PriceTable;
use prost::Message;
use serde::{Deserialize, Serialize};

pub use assemble::{Accepted, Assembler, Limits};
pub use build::{Built, Origin, Received, UNVERSIONED};
pub use proto::ExportTraceServiceRequest;

/// `[ingest]` in the server's configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IngestSettings {
    /// Seconds spans wait for their trace's root span before they are
    /// stored as a partial trace.
    #[serde(default = "default_hold_secs")]
    pub hold_secs: u64,
    /// Spans held (waiting for their root) in all.
    #[serde(default = "default_max_pending")]
    pub max_pending_spans: usize,
    /// Largest `POST /v1/traces` body, in bytes (exports carry prompts
    /// and answers as attributes, so this is above the server's general
    /// `body_limit_bytes`).
    #[serde(default = "default_max_body")]
    pub max_body_bytes: usize,
    /// Model prices, per million tokens.
    #[serde(default)]
    pub prices: PriceTable,
    /// Where spans held for their root are logged before they are
    /// acknowledged ([`held`]). Unset: beside a SQLite store
    /// (`traces.db.ingest-held/`), else `glassbox/ingest-held/` in the
    /// user's data directory; the server fills it in at start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_dir: Option<PathBuf>,
}

fn default_max_body() -> usize {
    16 << 20
}

fn default_hold_secs() -> u64 {
    30
}

fn default_max_pending() -> usize {
    100_000
}

impl Default for IngestSettings {
    fn default() -> Self {
        IngestSettings {
            hold_secs: default_hold_secs(),
            max_pending_spans: default_max_pending(),
            max_body_bytes: default_max_body(),
            prices: PriceTable::default(),
            held_dir: None,
        }
    }
}

/// A body that is not an OTLP trace export.
#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    #[error(
        "content type `{given}` is not an OTLP/HTTP encoding (hint: send `application/x-protobuf` or `application/json`)"
    )]
    MediaType { given: String },
    #[error("the body is not an OTLP `ExportTraceServiceRequest` in {encoding}: {message}")]
    Decode {
        encoding: &'static str,
        message: String,
    },
    /// Spans that must wait for their root could not be logged, so the
    /// export is refused rather than acknowledged and perhaps lost.
    #[error("spans waiting for their root span could not be logged in `{dir}`: {source}")]
    HeldLog {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl IngestError {
    /// The held-span log is open in another process (two servers, or a
    /// server and a `glassbox worker`, on one store).
    pub fn log_in_use(&self) -> bool {
        matches!(self, IngestError::HeldLog { source, .. } if source.kind() == std::io::ErrorKind::ResourceBusy)
    }

    /// Stable machine code.
    pub fn code(&self) -> &'static str {
        match self {
            IngestError::MediaType { .. } => "unsupported_media_type",
            IngestError::Decode { .. } => "bad_otlp",
            IngestError::HeldLog { .. } => "held_log_failed",
        }
    }
}

/// OTLP/HTTP body encodings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Protobuf,
    Json,
}

impl Encoding {
    /// From a `Content-Type` header value (parameters ignored).
    pub fn from_content_type(ct: &str) -> Result<Encoding, IngestError> {
        let base = ct
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        match base.as_str() {
            "application/x-protobuf" | "application/protobuf" => Ok(Encoding::Protobuf),
            "application/json" => Ok(Encoding::Json),
            _ => Err(IngestError::MediaType {
                given: ct.to_string(),
            }),
        }
    }

    pub fn content_type(self) -> &'static str {
        match self {
            Encoding::Protobuf => "application/x-protobuf",
            Encoding::Json => "application/json",
        }
    }
}

/// Decodes an OTLP/HTTP trace export body.
pub fn decode(encoding: Encoding, body: &[u8]) -> Result<ExportTraceServiceRequest, IngestError> {
    match encoding {
        Encoding::Protobuf => {
            ExportTraceServiceRequest::decode(body).map_err(|e| IngestError::Decode {
                encoding: "protobuf",
                message: e.to_string(),
            })
        }
        // The OTLP JSON mapping is an object; serde would also read a struct
        // from an array (`[]` as an empty export), which no exporter sends.
        Encoding::Json if body.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') => {
            Err(IngestError::Decode {
                encoding: "JSON",
                message: "expected a JSON object (`{\"resourceSpans\": [...]}`)".to_string(),
            })
        }
        Encoding::Json => serde_json::from_slice(body).map_err(|e| IngestError::Decode {
            encoding: "JSON",
            message: e.to_string(),
        }),
    }
}

/// What one export turned into.
#[derive(Debug, Default)]
pub struct Export {
    /// Requests to store, each with its spans.
    pub built: Vec<Built>,
    /// Spans held for a root still to come.
    pub held: usize,
    pub rejected: usize,
    pub reasons: Vec<String>,
}

impl Export {
    /// The OTLP answer body: empty on full success, else `partial_success`
    /// with the spans refused and why.
    pub fn response(&self, encoding: Encoding) -> Vec<u8> {
        let partial = (self.rejected > 0).then(|| proto::ExportTracePartialSuccess {
            rejected_spans: i64::try_from(self.rejected).unwrap_or(i64::MAX),
            error_message: self.reasons.join("; "),
        });
        let resp = proto::ExportTraceServiceResponse {
            partial_success: partial,
        };
        match encoding {
            Encoding::Protobuf => resp.encode_to_vec(),
            Encoding::Json => serde_json::to_vec(&resp).unwrap_or_else(|_| b"{}".to_vec()),
        }
    }

    /// Spans in the built requests.
    pub fn spans(&self) -> usize {
        self.built.iter().map(|b| b.spans.len()).sum()
    }
}

/// The assembler and the log of what it holds, behind one lock: a span is
/// logged before it is held, and retired only after its trace committed.
struct Held {
    assembler: Assembler,
    log: Option<(PathBuf, held::HeldLog)>,
}

/// The receiver: the assembler and the prices, shared by every export.
pub struct Receiver {
    held: Mutex<Held>,
    prices: PriceTable,
}

impl std::fmt::Debug for Receiver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Receiver").finish_non_exhaustive()
    }
}

fn limits(settings: &IngestSettings) -> Limits {
    Limits {
        hold_us: settings.hold_secs.saturating_mul(1_000_000),
        max_pending_spans: settings.max_pending_spans,
        ..Limits::default()
    }
}

impl Receiver {
    /// A receiver without a held-span log: spans waiting for their root
    /// live only in memory (tests, tools).
    pub fn new(settings: &IngestSettings) -> Receiver {
        Receiver {
            held: Mutex::new(Held {
                assembler: Assembler::new(limits(settings)),
                log: None,
            }),
            prices: settings.prices.clone(),
        }
    }

    /// A receiver whose held spans are logged in `dir` ([`held`]). What an
    /// earlier process left there is held again, except traces `stored`
    /// says are already in the store; traces the replay completes (or
    /// pushes out) come back built, to be stored and then passed to
    /// [`Receiver::committed`].
    pub fn with_log(
        settings: &IngestSettings,
        dir: &Path,
        stored: &mut dyn FnMut(u128) -> bool,
    ) -> Result<(Receiver, Vec<Built>), IngestError> {
        let failed = |source| IngestError::HeldLog {
            dir: dir.to_path_buf(),
            source,
        };
        let (mut log, replayed) = held::HeldLog::open(dir).map_err(failed)?;
        let mut assembler = Assembler::new(limits(settings));
        let mut acc = Accepted::default();
        let mut gone: Vec<u128> = Vec::new();
        for (received_us, req) in replayed {
            let mut groups = assemble::split(req, &mut acc);
            groups.retain(|(id, _, _)| {
                let keep = !gone.contains(id) && !stored(*id);
                if !keep && !gone.contains(id) {
                    gone.push(*id);
                }
                keep
            });
            assembler.accept(groups, received_us, &mut acc);
        }
        log.committed(&gone).map_err(failed)?;
        let receiver = Receiver {
            held: Mutex::new(Held {
                assembler,
                log: Some((dir.to_path_buf(), log)),
            }),
            prices: settings.prices.clone(),
        };
        let built = receiver.build_all(acc.ready);
        Ok((receiver, built))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes one decoded export at `now_us`: the traces it completes are
    /// built (outside the lock), the rest logged and held. Fails only
    /// when spans to hold could not be logged (nothing is then held).
    pub fn accept(
        &self,
        req: ExportTraceServiceRequest,
        now_us: u64,
    ) -> Result<Export, IngestError> {
        let mut acc = Accepted::default();
        let groups = assemble::split(req, &mut acc);
        {
            let mut held = self.lock();
            let Held { assembler, log } = &mut *held;
            if let Some((dir, log)) = log {
                let to_hold: Vec<&build::Received> = groups
                    .iter()
                    .filter(|(id, _, root)| !root && !assembler.is_stored(*id))
                    .flat_map(|(_, spans, _)| spans)
                    .collect();
                log.append(now_us, &to_hold)
                    .map_err(|source| IngestError::HeldLog {
                        dir: dir.clone(),
                        source,
                    })?;
            }
            assembler.accept(groups, now_us, &mut acc);
        }
        Ok(Export {
            built: self.build_all(acc.ready),
            held: acc.held,
            rejected: acc.rejected,
            reasons: acc.reasons,
        })
    }

    /// Traces now committed to the store: their held spans leave the log.
    pub fn committed(&self, ids: &[u128]) -> Result<(), IngestError> {
        let mut held = self.lock();
        match &mut held.log {
            Some((dir, log)) => log.committed(ids).map_err(|source| IngestError::HeldLog {
                dir: dir.clone(),
                source,
            }),
            None => Ok(()),
        }
    }

    /// Segments of the held-span log on disk (0 without a log).
    pub fn log_segments(&self) -> usize {
        self.lock().log.as_ref().map_or(0, |(_, l)| l.segments())
    }

    /// Traces that waited too long for their root, built as they are.
    pub fn expire(&self, now_us: u64) -> Vec<Built> {
        let groups = self.lock().assembler.expire(now_us);
        self.build_all(groups)
    }

    /// Everything held, built as it is (at shutdown).
    pub fn drain(&self) -> Vec<Built> {
        let groups = self.lock().assembler.drain();
        self.build_all(groups)
    }

    /// Spans waiting for their root.
    pub fn pending_spans(&self) -> usize {
        self.lock().assembler.pending_spans()
    }

    fn build_all(&self, groups: Vec<assemble::Group>) -> Vec<Built> {
        groups
            .into_iter()
            .filter(|(_, spans)| !spans.is_empty())
            .map(|(id, spans)| build::build(id, spans, &self.prices))
            .collect()
    }
}

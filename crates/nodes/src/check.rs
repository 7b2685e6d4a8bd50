//! Small helpers shared by the kinds' config checks.

use glassbox_topology::{Code, Cx, Diagnostic, Expr, Obj, Spanned, Value};

/// Reads `config` as a map (an absent config reads as empty).
pub fn config<'v>(config: Option<&'v Value>, cx: &mut Cx<'_>) -> Option<Obj<'v>> {
    match config {
        Some(v) => Obj::expect(v, cx, "`config`"),
        None => None,
    }
}

/// Reports a required config field that is absent from a present `config`.
pub fn require(obj: Option<&Obj<'_>>, cx: &mut Cx<'_>, name: &str, hint: &str) -> bool {
    match obj {
        Some(o) if o.get(name).is_some() => true,
        Some(o) => {
            o.missing(cx, name, hint);
            false
        }
        // A node without `config` is a sketch (like the seed's rag-chat-v3):
        // it validates, and building it for a run reports what is missing.
        None => false,
    }
}

/// Compiles a CEL expression field, reporting a parse error at its position.
pub fn expr(text: &Spanned<String>, cx: &mut Cx<'_>, path: &str) -> Option<Expr> {
    match Expr::compile(&text.value) {
        Ok(e) => Some(e),
        Err(err) => {
            cx.report(
                Diagnostic::error(
                    Code::BadConfig,
                    text.span,
                    format!("expression `{}` does not parse: {}", text.value, err.message),
                )
                .at(path.to_string())
                .hint("write a CEL expression over `input` and `outputs`, e.g. `input.question.contains(\"price\")`"),
            );
            None
        }
    }
}

/// Reports that `value` is not one of `allowed`.
pub fn one_of(text: &Spanned<String>, allowed: &[&str], cx: &mut Cx<'_>, field: &str) -> bool {
    if allowed.contains(&text.value.as_str()) {
        return true;
    }
    let mut hint = format!("allowed: {}", allowed.join(", "));
    if let Some(m) =
        glassbox_topology::diagnostic::did_you_mean(&text.value, allowed.iter().copied())
    {
        hint = format!("{m} ({hint})");
    }
    cx.report(
        Diagnostic::error(
            Code::BadConfig,
            text.span,
            format!("`{field}` is `{}`, which is not allowed", text.value),
        )
        .at(cx.path_of(field))
        .hint(hint),
    );
    false
}

/// Which engine a model kind runs on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum BackendKind {
    /// In-process (llama.cpp, ONNX Runtime).
    #[default]
    Local,
    /// An OpenAI-compatible server.
    OpenAi,
}

const BACKENDS: &[(&str, BackendKind)] = &[
    ("local", BackendKind::Local),
    ("openai", BackendKind::OpenAi),
];

/// The `backend` field shared by model kinds, and its companions.
#[derive(Debug, Clone, Default)]
pub struct Backend {
    pub kind: BackendKind,
    /// The local model file or directory, or the served model's name.
    pub model: Option<String>,
    pub base_url: Option<String>,
    /// The *name* of the environment variable holding the API key.
    pub api_key_env: Option<String>,
    pub allow_hosts: Vec<String>,
}

/// Checks the `backend` field shared by model kinds and its companions
/// (`model` and `allow_hosts` are read by the kind, in its field order).
pub fn backend(obj: &Obj<'_>, cx: &mut Cx<'_>) -> Backend {
    let mut out = Backend::default();
    let backend = obj.str(cx, "backend");
    if let Some(b) = &backend {
        let names: Vec<&str> = BACKENDS.iter().map(|(name, _)| *name).collect();
        one_of(b, &names, cx, "backend");
        if let Some((_, kind)) = BACKENDS.iter().find(|(name, _)| *name == b.value) {
            out.kind = *kind;
        }
    }
    let is_openai = backend.as_ref().is_some_and(|b| b.value == "openai");
    if is_openai {
        require(
            Some(obj),
            cx,
            "base_url",
            "set the OpenAI-compatible server's URL, e.g. `http://localhost:8000/v1`",
        );
        require(
            Some(obj),
            cx,
            "model",
            "name the served model, e.g. `model: Qwen/Qwen2.5-7B-Instruct`",
        );
    }
    if let Some(url) = obj.str(cx, "base_url") {
        if !(url.value.starts_with("http://") || url.value.starts_with("https://")) {
            cx.report(
                Diagnostic::error(
                    Code::BadConfig,
                    url.span,
                    format!("`base_url` `{}` is not an http(s) URL", url.value),
                )
                .at(cx.path_of("base_url"))
                .hint("write e.g. `http://localhost:8000/v1`"),
            );
        }
        out.base_url = Some(url.value);
    }
    if let Some(env) = obj.str(cx, "api_key_env") {
        if env.value.is_empty()
            || !env
                .value
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            cx.report(
                Diagnostic::error(
                    Code::BadConfig,
                    env.span,
                    "`api_key_env` must be an environment variable name",
                )
                .at(cx.path_of("api_key_env"))
                .hint("name the variable holding the key, e.g. `OPENAI_API_KEY`, never the key itself"),
            );
        }
        out.api_key_env = Some(env.value);
    }
    out
}

/// The values of a list of strings, if present.
pub fn strings(list: Option<Vec<Spanned<String>>>) -> Vec<String> {
    list.into_iter().flatten().map(|s| s.value).collect()
}

/// A kind's typed config from YAML text, for unit tests.
#[cfg(test)]
pub fn typed<R, K: glassbox_engine::TypedKind<R>>(kind: &K, yaml: &str) -> K::Config {
    let source = glassbox_topology::Source::new("config.yaml", yaml);
    let value = glassbox_topology::parse::parse(&source).unwrap_or_else(|d| panic!("{d:?}"));
    let mut diagnostics = Vec::new();
    kind.check(Some(&value), &mut Cx::new(&mut diagnostics))
}

/// The longest regular expression a topology may give (guard rules, JSON
/// Schema `pattern`s).
pub const MAX_REGEX_CHARS: usize = 4096;

/// Compiles a topology author's regular expression within bounds: the
/// `regex` crate matches in time linear in pattern and input (no
/// backtracking), and these caps bound the pattern and the compiled
/// program (1 MiB, lazy DFA cache 2 MiB), so a pattern such as
/// `(a{1000}){1000}` is refused at load instead of costing memory and CPU on
/// every request (issue 33).
pub fn regex(pattern: &str) -> Result<regex::Regex, String> {
    let chars = pattern.chars().count();
    if chars > MAX_REGEX_CHARS {
        return Err(format!(
            "the pattern has {chars} characters, more than {MAX_REGEX_CHARS}"
        ));
    }
    regex::RegexBuilder::new(pattern)
        .size_limit(1 << 20)
        .dfa_size_limit(2 << 20)
        .nest_limit(64)
        .build()
        .map_err(|e| e.to_string())
}

/// OpenAI's repetition penalties, `frequency_penalty` and
/// `presence_penalty` (-2..=2, 0 off), as `llm_inference` and `agent` read
/// them.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Penalties {
    pub frequency: f32,
    pub presence: f32,
}

impl Penalties {
    pub fn read(obj: &Obj<'_>, cx: &mut Cx<'_>) -> Penalties {
        let mut one = |name: &str| {
            obj.number(cx, name, -2.0, 2.0)
                .map_or(0.0, |n| n.value as f32)
        };
        Penalties {
            frequency: one("frequency_penalty"),
            presence: one("presence_penalty"),
        }
    }

    /// Adds them, when set, to an OpenAI-compatible request's parameters.
    pub fn add_to(&self, params: &mut serde_json::Value) {
        if *self != Penalties::default() {
            params["frequency_penalty"] = serde_json::json!(self.frequency);
            params["presence_penalty"] = serde_json::json!(self.presence);
        }
    }
}

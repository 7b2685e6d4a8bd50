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

/// Checks the `backend` field shared by model kinds and its companions.
pub fn backend(obj: &Obj<'_>, cx: &mut Cx<'_>) {
    let backend = obj.str(cx, "backend");
    if let Some(b) = &backend {
        one_of(b, &["local", "openai"], cx, "backend");
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
    if let Some(url) = obj.str(cx, "base_url")
        && !(url.value.starts_with("http://") || url.value.starts_with("https://"))
    {
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
    if let Some(env) = obj.str(cx, "api_key_env")
        && (env.value.is_empty()
            || !env
                .value
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_'))
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
}

/// The strings of the array `key` in a node's raw config (none if absent or
/// not an array; non-string items are skipped: `check` has reported them).
pub fn string_list(config: &serde_json::Value, key: &str) -> Vec<String> {
    config
        .get(key)
        .and_then(serde_json::Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(serde_json::Value::as_str)
        .map(str::to_string)
        .collect()
}

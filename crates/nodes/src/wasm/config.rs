//! The `wasm` config, read once and purely: which component (path and
//! content hash), its settings, its limits and what it is granted. Reading
//! the component itself (its hash, its schema for the settings) is I/O and
//! happens in [`super::inspect`] and at build time.

use std::collections::BTreeMap;

use glassbox_topology::{Code, Cx, Diagnostic, Obj, Value};

use crate::check;

pub const FIELDS: &[&str] = &["component", "sha256", "settings", "limits", "grant"];
const LIMIT_FIELDS: &[&str] = &["fuel", "memory_mb"];
const GRANT_FIELDS: &[&str] = &["env", "clock", "dirs", "network"];
const DIR_FIELDS: &[&str] = &["path", "guest"];

/// Instructions one call may run unless configured (about a second of
/// work on a current core): a loop that never ends fails in bounded time
/// even without a timeout.
pub const DEFAULT_FUEL: u64 = 2_000_000_000;
/// Linear memory one call may grow to unless configured, in MiB.
pub const DEFAULT_MEMORY_MB: u64 = 128;
const MAX_MEMORY_MB: u64 = 4096;

/// A directory the component may read, as the guest sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dir {
    /// On the host (relative to the topology file).
    pub path: String,
    /// In the guest (e.g. `/data`).
    pub guest: String,
}

/// What the topology grants the component. Nothing by default.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Grant {
    /// Environment variables the guest sees, with their values (which may
    /// be secret references, `${env:NAME}`, resolved at build time).
    pub env: BTreeMap<String, String>,
    /// The real wall and monotonic clocks (else both read zero).
    pub clock: bool,
    /// Read-only directories.
    pub dirs: Vec<Dir>,
}

/// A checked `wasm` config.
#[derive(Debug, Clone, Default)]
pub struct WasmConfig {
    /// Path of the component file (relative to the topology file).
    pub component: Option<String>,
    /// Its SHA-256, lowercase hex.
    pub sha256: Option<String>,
    /// Passed to the component on every call, as JSON.
    pub settings: serde_json::Value,
    pub fuel: u64,
    pub memory_mb: u64,
    pub grant: Grant,
}

pub fn check(config: Option<&Value>, cx: &mut Cx<'_>) -> WasmConfig {
    let mut out = WasmConfig {
        settings: serde_json::Value::Object(Default::default()),
        fuel: DEFAULT_FUEL,
        memory_mb: DEFAULT_MEMORY_MB,
        ..WasmConfig::default()
    };
    let obj = check::config(config, cx);
    check::require(
        obj.as_ref(),
        cx,
        "component",
        "give the path of the component file, e.g. `component: steps/cleaner.wasm`",
    );
    check::require(
        obj.as_ref(),
        cx,
        "sha256",
        "give the component's SHA-256, e.g. from `sha256sum steps/cleaner.wasm`",
    );
    let Some(obj) = obj else { return out };
    obj.deny_unknown(cx, FIELDS);
    out.component = obj.str(cx, "component").map(|c| c.value);
    if let Some(hash) = obj.str(cx, "sha256") {
        let ok = hash.value.len() == 64 && hash.value.bytes().all(|b| b.is_ascii_hexdigit());
        if ok {
            out.sha256 = Some(hash.value.to_ascii_lowercase());
        } else {
            cx.report(
                Diagnostic::error(
                    Code::InvalidValue,
                    hash.span,
                    format!(
                        "`sha256` is `{}`, which is not 64 hexadecimal digits",
                        hash.value
                    ),
                )
                .at(cx.path_of("sha256"))
                .hint("write the component's SHA-256 as `sha256sum` prints it"),
            );
        }
    }
    if let Some(settings) = obj.get("settings") {
        out.settings = settings.to_json();
    }
    if let Some(limits) = obj.obj(cx, "limits") {
        let mut lcx = cx.field("limits");
        limits.deny_unknown(&mut lcx, LIMIT_FIELDS);
        if let Some(fuel) = limits.uint(&mut lcx, "fuel", 1, u64::MAX) {
            out.fuel = fuel.value;
        }
        if let Some(mb) = limits.uint(&mut lcx, "memory_mb", 1, MAX_MEMORY_MB) {
            out.memory_mb = mb.value;
        }
    }
    if let Some(grant) = obj.obj(cx, "grant") {
        out.grant = check_grant(&grant, &mut cx.field("grant"));
    }
    out
}

fn check_grant(grant: &Obj<'_>, cx: &mut Cx<'_>) -> Grant {
    let mut out = Grant::default();
    grant.deny_unknown(cx, GRANT_FIELDS);
    if let Some(net) = grant.bool(cx, "network")
        && net.value
    {
        cx.report(
            Diagnostic::error(
                Code::InvalidValue,
                net.span,
                "a custom step cannot be granted the network",
            )
            .at(cx.path_of("network"))
            .hint("call services from an `http` node (it applies the outbound policy) and pass its output to the step"),
        );
    }
    out.clock = grant.bool(cx, "clock").is_some_and(|c| c.value);
    if let Some(env) = grant.obj(cx, "env") {
        let mut ecx = cx.field("env");
        for (key, _) in env.map.iter() {
            if let Some(value) = env.str(&mut ecx, &key.name) {
                out.env.insert(key.name.clone(), value.value);
            }
        }
    }
    if let Some(dirs) = grant.seq(cx, "dirs") {
        for (i, dir) in dirs.iter().enumerate() {
            let mut dcx = cx.field(&format!("dirs[{i}]"));
            let Some(d) = Obj::expect(dir, &mut dcx, "a directory") else {
                continue;
            };
            d.deny_unknown(&mut dcx, DIR_FIELDS);
            let path = d.req_str(
                &mut dcx,
                "path",
                "give the host directory to lend, read-only",
            );
            let guest = d.req_str(
                &mut dcx,
                "guest",
                "give the path the step sees it at, e.g. `/data`",
            );
            if let (Some(path), Some(guest)) = (path, guest) {
                out.dirs.push(Dir {
                    path: path.value,
                    guest: guest.value,
                });
            }
        }
    }
    out
}

/// Parses a schema a step declared (JSON text), checking that it keeps to
/// the supported subset.
pub(super) fn schema_of(text: Option<&str>) -> Result<Option<serde_json::Value>, String> {
    let Some(text) = text else { return Ok(None) };
    let schema: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("it is not JSON: {e}"))?;
    crate::schema_subset::check_schema(&schema, "schema")?;
    Ok(Some(schema))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checked(yaml: &str) -> (WasmConfig, Vec<String>) {
        let source = glassbox_topology::Source::new("t.yaml", yaml);
        let value = glassbox_topology::parse::parse(&source).unwrap();
        let mut diags = Vec::new();
        let config = check(Some(&value), &mut Cx::new(&mut diags));
        let messages = diags.iter().map(|d| d.message.clone()).collect();
        (config, messages)
    }

    const HASH: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn nothing_is_granted_unless_written() {
        let (c, problems) = checked(&format!("{{component: a.wasm, sha256: {HASH}}}"));
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(c.grant, Grant::default());
        assert_eq!((c.fuel, c.memory_mb), (DEFAULT_FUEL, DEFAULT_MEMORY_MB));
        assert_eq!(c.settings, serde_json::json!({}));
    }

    #[test]
    fn grants_limits_and_settings_are_read() {
        let (c, problems) = checked(&format!(
            "{{component: a.wasm, sha256: {}, settings: {{words: [x]}}, limits: {{fuel: 5, memory_mb: 16}}, grant: {{clock: true, env: {{LANG: C}}, dirs: [{{path: data, guest: /data}}]}}}}",
            HASH.to_uppercase()
        ));
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(c.sha256.as_deref(), Some(HASH));
        assert_eq!((c.fuel, c.memory_mb), (5, 16));
        assert!(c.grant.clock);
        assert_eq!(c.grant.env.get("LANG").map(String::as_str), Some("C"));
        assert_eq!(c.grant.dirs[0].guest, "/data");
        assert_eq!(c.settings, serde_json::json!({"words": ["x"]}));
    }

    #[test]
    fn bad_hashes_network_and_missing_fields_are_each_reported() {
        let (_, problems) =
            checked("{sha256: abc, grant: {network: true}, limits: {memory_mb: 0}}");
        assert_eq!(problems.len(), 4, "{problems:?}");
        assert!(
            problems.iter().any(|p| p.contains("`component`")),
            "{problems:?}"
        );
        assert!(
            problems.iter().any(|p| p.contains("64 hexadecimal")),
            "{problems:?}"
        );
        assert!(
            problems.iter().any(|p| p.contains("network")),
            "{problems:?}"
        );
        assert!(
            problems.iter().any(|p| p.contains("memory_mb")),
            "{problems:?}"
        );
    }
}

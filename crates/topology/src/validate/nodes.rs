//! Node checks: ids, kinds and their configs (with secret references),
//! resource tags and prices, fallbacks.

use std::collections::{HashMap, HashSet};

use crate::decode::Cx;
use crate::diagnostic::{Code, Diagnostic, did_you_mean};
use crate::kind::Labels;
use crate::model::{NodeId, Prices, Resource, ResourceKind};
use crate::spec::PriceSpec;

use super::{Checker, node_path, valid_ident};

impl Checker<'_> {
    /// Unique, well-formed node ids. Returns id → position in `spec.nodes`.
    pub(super) fn check_ids(&mut self) -> HashMap<String, NodeId> {
        let mut index: HashMap<String, NodeId> = HashMap::new();
        for (i, node) in self.spec.nodes.iter().enumerate() {
            let id = &node.id;
            if id.value.is_empty() {
                continue;
            }
            if !valid_ident(&id.value) {
                self.push(
                    Diagnostic::error(
                        Code::InvalidValue,
                        id.span,
                        format!("node id `{}` is not an identifier", id.value),
                    )
                    .at(node_path(node, "id"))
                    .hint("start with a letter or `_`, then letters, digits, `_` or `-`, so conditions can say `outputs.<id>`"),
                );
            }
            if let Some(&first) = index.get(&id.value) {
                let first_span = self.spec.nodes[first.0].id.span;
                self.push(
                    Diagnostic::error(
                        Code::DuplicateId,
                        id.span,
                        format!("node id `{}` is used twice", id.value),
                    )
                    .at(node_path(node, "id"))
                    .related(first_span, "first used here")
                    .hint("node ids must be unique; rename one of them"),
                );
            } else {
                index.insert(id.value.clone(), NodeId(i));
            }
        }
        index
    }

    /// Known kinds and their configs. Returns the labels each node can emit
    /// and keeps each typed config for
    /// [`Node::typed_config`](crate::model::Node::typed_config).
    pub(super) fn check_kinds(&mut self) -> Vec<Labels> {
        let mut out = Vec::with_capacity(self.spec.nodes.len());
        for node in &self.spec.nodes {
            self.typed.push(None);
            let kind = &node.kind;
            let Some(schema) = self.kinds.get(&kind.value) else {
                if !kind.value.is_empty() {
                    let known: Vec<&str> = self.kinds.names().collect();
                    let mut hint = format!("known kinds: {}", known.join(", "));
                    if let Some(m) = did_you_mean(&kind.value, known.iter().copied()) {
                        hint = format!("{m} ({hint})");
                    }
                    self.push(
                        Diagnostic::error(
                            Code::UnknownKind,
                            kind.span,
                            format!("unknown node type `{}`", kind.value),
                        )
                        .at(node_path(node, "type"))
                        .hint(hint),
                    );
                }
                out.push(Labels::Dynamic);
                continue;
            };
            // A `config` that is not a map was already reported by the decoder.
            if node.config_value.as_ref().is_some_and(|v| {
                v.as_map().is_none() && !matches!(v.kind, crate::value::Kind::Null)
            }) {
                out.push(Labels::Dynamic);
                continue;
            }
            let before = self.diags.len();
            let mut cx = Cx::new(self.diags);
            let mut cx = cx.field(&node_path(node, "config"));
            let checked = schema.check(node.config_value.as_ref(), &mut cx);
            if let Some(v) = node.config_value.as_ref() {
                let place = Place {
                    keys: Vec::new(),
                    declared: schema.secret_fields(),
                };
                check_references(v, &node_path(node, "config"), &place, self.diags);
            }
            // A kind that forgot to give a span gets the node's `config` (or the node).
            let fallback_span = node
                .config_value
                .as_ref()
                .map_or(node.kind.span, |v| v.span);
            for d in &mut self.diags[before..] {
                if d.span.is_none() {
                    d.span = Some(fallback_span);
                }
            }
            // Typed as written, secret references standing as text: the
            // pipeline builder resolves them on a copy and has the kind type
            // that copy again before it builds.
            if let Some(slot) = self.typed.last_mut() {
                *slot = checked.config;
            }
            out.push(checked.labels);
        }
        out
    }

    pub(super) fn check_resources(&mut self) -> Option<Vec<Resource>> {
        let pricing = self.spec.pricing.clone().unwrap_or_default();
        let mut out = Vec::new();
        let mut ok = true;
        for node in &self.spec.nodes {
            let Some(res) = &node.resource else {
                out.push(Resource {
                    kind: ResourceKind::Cpu,
                    model: None,
                    prices: merge_prices(
                        &PriceSpec::default(),
                        None,
                        pricing.cost_per_cpu_ms.as_ref().map(|d| d.value),
                    ),
                });
                continue;
            };
            let kind = match res.kind.value.as_str() {
                "cpu" => ResourceKind::Cpu,
                "gpu" => ResourceKind::Gpu,
                other => {
                    let hint = did_you_mean(other, ["cpu", "gpu"]).map_or_else(
                        || "resource `type` is `cpu` or `gpu`".to_string(),
                        |m| format!("{m} (resource `type` is `cpu` or `gpu`)"),
                    );
                    self.push(
                        Diagnostic::error(
                            Code::BadResource,
                            res.kind.span,
                            format!("unknown resource type `{other}`"),
                        )
                        .at(node_path(node, "resource.type"))
                        .hint(hint),
                    );
                    ok = false;
                    continue;
                }
            };
            if kind == ResourceKind::Gpu
                && res.model.as_ref().is_none_or(|m| m.value.trim().is_empty())
            {
                self.push(
                    Diagnostic::error(
                        Code::BadResource,
                        res.kind.span,
                        format!("node `{}` runs on a gpu but names no model", node.id.value),
                    )
                    .at(node_path(node, "resource.model"))
                    .hint("add `model: <name>` to the resource tag; GPU costs and reports are per model"),
                );
                ok = false;
                continue;
            }
            let model_prices = res
                .model
                .as_ref()
                .and_then(|m| pricing.models.get(&m.value));
            out.push(Resource {
                kind,
                model: res.model.as_ref().map(|m| m.value.clone()),
                prices: merge_prices(
                    &res.prices,
                    model_prices,
                    pricing.cost_per_cpu_ms.as_ref().map(|d| d.value),
                ),
            });
        }
        ok.then_some(out)
    }

    /// Fallback targets exist, are not the node itself, have no edges, and
    /// do not chain back into a cycle.
    pub(super) fn check_fallbacks(
        &mut self,
        index: &HashMap<String, NodeId>,
    ) -> Vec<Option<NodeId>> {
        let nodes = &self.spec.nodes;
        let mut targets = vec![None; nodes.len()];
        for (i, node) in nodes.iter().enumerate() {
            let Some(fb) = &node.fallback else { continue };
            match index.get(&fb.value) {
                None => {
                    let hint = did_you_mean(&fb.value, index.keys().map(String::as_str))
                        .unwrap_or_else(|| {
                            "the fallback must be the id of another node in this topology".into()
                        });
                    self.push(
                        Diagnostic::error(
                            Code::UnknownFallback,
                            fb.span,
                            format!("fallback `{}` is not a node", fb.value),
                        )
                        .at(node_path(node, "fallback"))
                        .hint(hint),
                    );
                }
                Some(&t) if t.0 == i => {
                    self.push(
                        Diagnostic::error(
                            Code::FallbackCycle,
                            fb.span,
                            format!("node `{}` is its own fallback", fb.value),
                        )
                        .at(node_path(node, "fallback"))
                        .hint("a fallback must be a different node (e.g. a smaller model)"),
                    );
                }
                Some(&t) => targets[i] = Some(t),
            }
        }
        // Fallback chains: each node has at most one fallback, so walk each chain.
        let mut reported = HashSet::new();
        for start in 0..nodes.len() {
            let mut seen = vec![start];
            let mut cur = start;
            while let Some(next) = targets[cur] {
                if next.0 == start {
                    let mut ring: Vec<usize> = seen.clone();
                    ring.sort_unstable();
                    if reported.insert(ring) {
                        let names: Vec<&str> = seen
                            .iter()
                            .chain([&start])
                            .map(|&k| nodes[k].id.value.as_str())
                            .collect();
                        let span = nodes[start]
                            .fallback
                            .as_ref()
                            .map_or(nodes[start].span, |f| f.span);
                        self.push(
                            Diagnostic::error(
                                Code::FallbackCycle,
                                span,
                                format!("fallbacks form a cycle: {}", names.join(" → ")),
                            )
                            .at(node_path(&nodes[start], "fallback"))
                            .hint("end the chain with a node that has no fallback"),
                        );
                    }
                    break;
                }
                if seen.contains(&next.0) || seen.len() > nodes.len() {
                    break;
                }
                seen.push(next.0);
                cur = next.0;
            }
        }
        targets
    }
}

/// Resource-tag prices win over the model's row in the price table; a
/// per-1k-tokens price applies to input and output unless split prices exist.
pub(super) fn merge_prices(
    tag: &PriceSpec,
    model: Option<&PriceSpec>,
    cpu_default: Option<rust_decimal::Decimal>,
) -> Prices {
    let pick =
        |f: fn(&PriceSpec) -> Option<rust_decimal::Decimal>| f(tag).or_else(|| model.and_then(f));
    let both = pick(|p| p.cost_per_1k_tokens.as_ref().map(|d| d.value));
    Prices {
        cost_per_call: pick(|p| p.cost_per_call.as_ref().map(|d| d.value)),
        cost_per_1k_input_tokens: pick(|p| p.cost_per_1k_input_tokens.as_ref().map(|d| d.value))
            .or(both),
        cost_per_1k_output_tokens: pick(|p| p.cost_per_1k_output_tokens.as_ref().map(|d| d.value))
            .or(both),
        cost_per_cpu_ms: pick(|p| p.cost_per_cpu_ms.as_ref().map(|d| d.value)).or(cpu_default),
        cost_per_1k_cached_input_tokens: pick(|p| {
            p.cost_per_1k_cached_input_tokens.as_ref().map(|d| d.value)
        }),
        cost_per_1k_cache_creation_tokens: pick(|p| {
            p.cost_per_1k_cache_creation_tokens
                .as_ref()
                .map(|d| d.value)
        }),
        cost_per_1k_reasoning_tokens: pick(|p| {
            p.cost_per_1k_reasoning_tokens.as_ref().map(|d| d.value)
        }),
        cost_per_1k_audio_input_tokens: pick(|p| {
            p.cost_per_1k_audio_input_tokens.as_ref().map(|d| d.value)
        }),
        cost_per_1k_audio_output_tokens: pick(|p| {
            p.cost_per_1k_audio_output_tokens.as_ref().map(|d| d.value)
        }),
    }
}

/// Where in a config a value sits, for [`check_references`].
pub(super) struct Place<'a> {
    /// Keys from the config's root (list indices left out).
    keys: Vec<&'a str>,
    /// The fields the node's kind declares secret.
    declared: &'static [&'static str],
}

/// Reports every malformed secret reference (`${env:NAME}`, `${file:/path}`)
/// in a node's config, and every reference outside a field meant for
/// secrets (issue 33: one in a template printed the server's admin key);
/// resolving them happens when the node is built.
pub(super) fn check_references<'a>(
    value: &'a crate::value::Value,
    path: &str,
    place: &Place<'a>,
    diags: &mut Vec<Diagnostic>,
) {
    use crate::secret_access::{AccessError, in_userinfo_only, secret_field};
    use crate::value::Kind;
    match &value.kind {
        Kind::Str(s) if crate::secret::has_reference(s) => {
            if !secret_field(&place.keys, place.declared) && !in_userinfo_only(s) {
                let e = AccessError::Misplaced {
                    field: path.to_string(),
                };
                diags.push(
                    Diagnostic::error(Code::BadConfig, value.span, e.to_string())
                        .at(path.to_string())
                        .hint(e.hint()),
                );
            } else if let Err(problem) = crate::secret::references(s) {
                diags.push(
                    Diagnostic::error(Code::BadConfig, value.span, problem)
                        .at(path.to_string())
                        .hint("reference a secret as `${env:NAME}` or `${file:/absolute/path}`"),
                );
            }
        }
        Kind::Seq(items) => {
            for (i, v) in items.iter().enumerate() {
                check_references(v, &format!("{path}[{i}]"), place, diags);
            }
        }
        Kind::Map(map) => {
            for (k, v) in &map.entries {
                let mut keys = place.keys.clone();
                keys.push(&k.name);
                let inner = Place {
                    keys,
                    declared: place.declared,
                };
                check_references(v, &format!("{path}.{}", k.name), &inner, diags);
            }
        }
        _ => {}
    }
}

//! The published JSON Schema of the topology format.
//!
//! Generated from the [`crate::spec`] types, so it cannot describe fields the
//! decoder does not read; the copy committed at `docs/topology.schema.json`
//! is checked against this output by a test.

use crate::spec::TopologySpec;

/// Where the schema is published (relative to the repository root).
pub const PUBLISHED_PATH: &str = "docs/topology.schema.json";

/// The JSON Schema (draft 2020-12) for topology files.
pub fn schema() -> serde_json::Value {
    let mut schema = schemars::schema_for!(TopologySpec);
    schema.insert(
        "$id".into(),
        "https://glassbox.dev/schema/topology.json".into(),
    );
    schema.to_value()
}

/// The schema as pretty JSON with a trailing newline, as committed.
pub fn schema_text() -> String {
    let mut text = serde_json::to_string_pretty(&schema()).unwrap_or_default();
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec;

    fn props<'a>(schema: &'a serde_json::Value, def: Option<&str>) -> Vec<&'a str> {
        let node = match def {
            None => schema,
            Some(d) => &schema["$defs"][d],
        };
        let mut keys: Vec<&str> = node["properties"]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        keys.sort_unstable();
        keys
    }

    fn sorted(fields: &[&'static str]) -> Vec<&'static str> {
        let mut v = fields.to_vec();
        v.sort_unstable();
        v
    }

    /// The decoder's field lists and the schema come from different code;
    /// this keeps them describing the same format.
    #[test]
    fn decoder_fields_match_schema() {
        let s = schema();
        assert_eq!(props(&s, None), sorted(spec::TOPOLOGY_FIELDS));
        assert_eq!(props(&s, Some("NodeSpec")), sorted(spec::NODE_FIELDS));
        assert_eq!(
            props(&s, Some("EdgeSpec")),
            sorted(crate::edge_spec::EDGE_FIELDS)
        );
        assert_eq!(
            props(&s, Some("LoopSpec")),
            sorted(crate::edge_spec::LOOP_FIELDS)
        );
        assert_eq!(
            props(&s, Some("DefaultsSpec")),
            sorted(spec::DEFAULTS_FIELDS)
        );
        assert_eq!(props(&s, Some("PricingSpec")), sorted(spec::PRICING_FIELDS));
        assert_eq!(props(&s, Some("PriceSpec")), sorted(spec::PRICE_FIELDS));
        assert_eq!(
            props(&s, Some("ResourceSpec")),
            sorted(spec::RESOURCE_FIELDS)
        );
        assert_eq!(props(&s, Some("CacheSpec")), sorted(spec::CACHE_FIELDS));
        assert_eq!(
            props(&s, Some("SimilaritySpec")),
            sorted(spec::SIMILARITY_FIELDS)
        );
    }

    #[test]
    fn required_fields_are_declared() {
        let s = schema();
        let req: Vec<&str> = s["required"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|v| v.as_str())
            .collect();
        assert!(req.contains(&"topology_id") && req.contains(&"version") && req.contains(&"nodes"));
        assert_eq!(s["additionalProperties"], false);
    }
}

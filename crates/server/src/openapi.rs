//! The OpenAPI document, generated from the handlers' annotations and
//! committed at `docs/openapi.json` (a test fails when they drift;
//! regenerate with `cargo run -p glassbox-cli -- serve --openapi > docs/openapi.json`).

use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

use crate::api::{
    alerts, cluster, compare, discovered, gpus, openai, otlp, reports, runs, system, topologies,
    traces, versions,
};
use crate::error::{ErrorBody, ErrorDetail};

/// Where the document is committed, relative to the workspace root.
pub const PUBLISHED_PATH: &str = "docs/openapi.json";

struct Security;

impl Modify for Security {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        let components = doc.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "api_key",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "An API key (`Authorization: Bearer KEY`) with the scope named on each operation: run, read or admin (admin implies both).",
                    ))
                    .build(),
            ),
        );
    }
}

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Glassbox",
        description = "Run AI request pipelines (topologies) and see every request's path, cost and reasoning. Errors are `{\"error\": {\"code\", \"message\", \"hint\"}}`.",
        license(name = "Apache-2.0"),
    ),
    paths(
        runs::create_run,
        topologies::list_topologies,
        topologies::get_topology,
        discovered::list_discovered,
        discovered::discovered_graph,
        versions::list_versions,
        versions::set_split,
        versions::promote,
        versions::rollback,
        traces::list_traces,
        traces::get_trace,
        traces::diff_traces,
        otlp::export,
        reports::get_summary,
        reports::get_report,
        compare::compare_versions,
        alerts::list_alerts,
        gpus::list_gpus,
        cluster::list_workers,
        openai::chat::chat_completions,
        openai::embeddings::embeddings,
        openai::models::models,
        system::healthz,
        system::readyz,
        system::metrics,
        system::reload,
    ),
    components(schemas(ErrorBody, ErrorDetail)),
    modifiers(&Security),
    tags(
        (name = "runs", description = "Run requests through topologies"),
        (name = "topologies", description = "Served topologies, their graphs and versions (split, promote, rollback)"),
        (name = "traces", description = "Stored requests, and the OTLP receiver for traces of pipelines Glassbox does not run"),
        (name = "reports", description = "Cost and latency reports"),
        (name = "openai", description = "OpenAI-compatible endpoints (topologies as models)"),
        (name = "system", description = "Health, readiness, metrics, admin"),
    )
)]
pub struct ApiDoc;

/// The document as pretty JSON with a trailing newline (the committed form).
pub fn json() -> String {
    let doc = ApiDoc::openapi();
    let mut text = doc
        .to_pretty_json()
        .unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"));
    text.push('\n');
    text
}

//! `GET /v1/cluster/workers`: the worker pool as this coordinator sees it
//! (`glassbox serve --cluster`), read-only: each worker's record, its
//! latest load and how old that load is. Without `--cluster` the answer is
//! 404 `cluster_disabled`.

use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};

use crate::error::{ApiError, ErrorBody};
use crate::state::AppState;

/// The workers in the pool, by id.
#[utoipa::path(
    get,
    path = "/v1/cluster/workers",
    tag = "system",
    responses(
        (status = 200, description = "`{workers: [{id, address, engine, hardware: {gpus, cpu_model, cpu_cores, memory_bytes}, models, node_kinds, labels, started_at, load: {running, waiting, kv_usage, tokens_per_second, at} | null, load_age_s}]}`; `load_age_s` is how many seconds ago the load was measured (null before the first)", body = Object),
        (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody),
        (status = 404, description = "`cluster_disabled`: the server was not started with `--cluster`", body = ErrorBody),
    ),
    security(("api_key" = ["read"]))
)]
pub async fn list_workers(State(state): State<AppState>) -> Result<Json<Value>, ApiError> {
    let Some(pool) = &state.pool else {
        return Err(ApiError::not_found(
            "cluster_disabled",
            "this server is not part of a cluster",
        )
        .hint("start it with `glassbox serve --cluster ETCD_URLS` (docs/cluster.md)"));
    };
    Ok(Json(workers_json(
        pool,
        glassbox_cluster::member::now_secs(),
    )))
}

/// The pool as JSON, each load's age counted from `now` (Unix seconds).
pub fn workers_json(pool: &glassbox_cluster::Pool, now: u64) -> Value {
    let workers: Vec<Value> = pool
        .snapshot()
        .into_iter()
        .map(|m| {
            let mut v = serde_json::to_value(&m.record).unwrap_or(Value::Null);
            let age = m.load.as_ref().map(|l| now.saturating_sub(l.at));
            v["load"] = serde_json::to_value(&m.load).unwrap_or(Value::Null);
            v["load_age_s"] = json!(age);
            v
        })
        .collect();
    json!({ "workers": workers })
}

#[cfg(test)]
mod tests {
    use super::*;
    use glassbox_cluster::{Hardware, Load, Pool, WorkerRecord};

    #[test]
    fn workers_carry_record_load_and_its_age() {
        let pool = Pool::new();
        for id in ["b", "a"] {
            pool.upsert_record(WorkerRecord {
                id: id.into(),
                address: format!("http://{id}:8090"),
                engine: "glassbox".into(),
                hardware: Hardware::default(),
                models: vec!["smollm2".into()],
                node_kinds: vec!["llm_inference".into()],
                labels: Default::default(),
                started_at: 5,
            });
        }
        pool.set_load(
            "a",
            Load {
                running: 2,
                at: 95,
                ..Load::default()
            },
        );
        let v = workers_json(&pool, 100);
        assert_eq!(v["workers"][0]["id"], "a");
        assert_eq!(v["workers"][0]["address"], "http://a:8090");
        assert_eq!(v["workers"][0]["load"]["running"], 2);
        assert_eq!(v["workers"][0]["load_age_s"], 5);
        assert_eq!(v["workers"][1]["id"], "b");
        assert!(v["workers"][1]["load"].is_null());
        assert!(v["workers"][1]["load_age_s"].is_null());
    }
}

-- Glassbox trace store, schema version 1 (SQLite).
-- Times are microseconds since the Unix epoch (UTC); money is kept exact as
-- decimal text (`cost`) and approximately as REAL (`cost_f`) for reports.
-- Rowid tables (rows are large: JSON and summaries), unique keys as indexes.
-- Spans copy their request's topology, version, model key and start time so
-- per-node reports need no join.
CREATE TABLE requests (
    request_id     TEXT NOT NULL UNIQUE,
    topology_id    TEXT NOT NULL,
    version        TEXT NOT NULL,
    started_at_us  INTEGER NOT NULL,
    ended_at_us    INTEGER NOT NULL,
    duration_us    INTEGER NOT NULL,
    status         TEXT NOT NULL,
    degraded       INTEGER NOT NULL,
    error_code     TEXT,
    error          TEXT,
    path_key       TEXT NOT NULL,
    path           TEXT NOT NULL,
    labels         TEXT NOT NULL,
    models         TEXT NOT NULL,
    model_key      TEXT NOT NULL,
    input_summary  TEXT NOT NULL,
    output_summary TEXT NOT NULL,
    input_chars    INTEGER NOT NULL,
    cost           TEXT NOT NULL,
    cost_f         REAL NOT NULL,
    currency       TEXT NOT NULL,
    top_node       TEXT,
    timeouts       INTEGER NOT NULL,
    receipt        TEXT NOT NULL,
    explanation    TEXT NOT NULL,
    worker         TEXT NOT NULL,
    span_count     INTEGER NOT NULL
);
CREATE INDEX requests_topology_time ON requests (topology_id, started_at_us);
CREATE INDEX requests_time ON requests (started_at_us);

CREATE TABLE spans (
    request_id     TEXT NOT NULL,
    seq            INTEGER NOT NULL,
    topology_id    TEXT NOT NULL,
    version        TEXT NOT NULL,
    model_key      TEXT NOT NULL,
    req_started_at_us INTEGER NOT NULL,
    node           TEXT NOT NULL,
    kind           TEXT NOT NULL,
    attempt        INTEGER NOT NULL,
    role           TEXT NOT NULL,
    role_ref       TEXT,
    started_at_us  INTEGER NOT NULL,
    start_us       INTEGER NOT NULL,
    end_us         INTEGER NOT NULL,
    duration_us    INTEGER NOT NULL,
    status         TEXT NOT NULL,
    error          TEXT,
    tags           TEXT NOT NULL,
    wall_us        INTEGER NOT NULL,
    cpu_us         INTEGER,
    input_tokens   INTEGER,
    output_tokens  INTEGER,
    cost           TEXT NOT NULL,
    cost_f         REAL NOT NULL,
    worker         TEXT NOT NULL,
    input_summary  TEXT NOT NULL,
    output_summary TEXT NOT NULL,
    UNIQUE (request_id, seq)
);
CREATE INDEX spans_topology_time ON spans (topology_id, req_started_at_us);

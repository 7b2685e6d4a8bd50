-- Glassbox trace store, schema version 1 (PostgreSQL).
-- Times are microseconds since the Unix epoch (UTC); money is kept exact as
-- decimal text (`cost`) and approximately as DOUBLE PRECISION (`cost_f`) for reports.
-- Spans copy their request's topology, version, model key and start time so
-- per-node reports need no join.
CREATE TABLE requests (
    request_id     TEXT PRIMARY KEY NOT NULL,
    topology_id    TEXT NOT NULL,
    version        TEXT NOT NULL,
    started_at_us  BIGINT NOT NULL,
    ended_at_us    BIGINT NOT NULL,
    duration_us    BIGINT NOT NULL,
    status         TEXT NOT NULL,
    degraded       BOOLEAN NOT NULL,
    error_code     TEXT,
    error          TEXT,
    path_key       TEXT NOT NULL,
    path           TEXT NOT NULL,
    labels         TEXT NOT NULL,
    models         TEXT NOT NULL,
    model_key      TEXT NOT NULL,
    input_summary  TEXT NOT NULL,
    output_summary TEXT NOT NULL,
    input_chars    BIGINT NOT NULL,
    cost           TEXT NOT NULL,
    cost_f         DOUBLE PRECISION NOT NULL,
    currency       TEXT NOT NULL,
    top_node       TEXT,
    timeouts       BIGINT NOT NULL,
    receipt        TEXT NOT NULL,
    explanation    TEXT NOT NULL,
    worker         TEXT NOT NULL,
    span_count     BIGINT NOT NULL
);
CREATE INDEX requests_topology_time ON requests (topology_id, started_at_us);
CREATE INDEX requests_time ON requests (started_at_us);

CREATE TABLE spans (
    request_id     TEXT NOT NULL,
    seq            BIGINT NOT NULL,
    topology_id    TEXT NOT NULL,
    version        TEXT NOT NULL,
    model_key      TEXT NOT NULL,
    req_started_at_us BIGINT NOT NULL,
    node           TEXT NOT NULL,
    kind           TEXT NOT NULL,
    attempt        BIGINT NOT NULL,
    role           TEXT NOT NULL,
    role_ref       TEXT,
    started_at_us  BIGINT NOT NULL,
    start_us       BIGINT NOT NULL,
    end_us         BIGINT NOT NULL,
    duration_us    BIGINT NOT NULL,
    status         TEXT NOT NULL,
    error          TEXT,
    tags           TEXT NOT NULL,
    wall_us        BIGINT NOT NULL,
    cpu_us         BIGINT,
    input_tokens   BIGINT,
    output_tokens  BIGINT,
    cost           TEXT NOT NULL,
    cost_f         DOUBLE PRECISION NOT NULL,
    worker         TEXT NOT NULL,
    input_summary  TEXT NOT NULL,
    output_summary TEXT NOT NULL,
    PRIMARY KEY (request_id, seq)
);
CREATE INDEX spans_topology_time ON spans (topology_id, req_started_at_us);

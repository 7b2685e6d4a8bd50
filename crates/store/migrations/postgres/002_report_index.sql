-- Schema version 2: a covering index for reports. Request rows are wide
-- (path, receipt and explanation JSON); reports read 12 narrow columns, so
-- scanning this index instead of the table reads ~20x fewer pages.
CREATE INDEX requests_report ON requests (
    topology_id, started_at_us, version, model_key, duration_us, status, degraded,
    timeouts, cost_f, path_key, top_node, input_chars
);

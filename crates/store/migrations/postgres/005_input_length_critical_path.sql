-- Schema version 5: the real input length, and the critical path.
--
-- 1. `requests.input_len` holds the characters of the request's whole input
--    (`input_chars` held those of its summary, cut to 200 characters, so
--    every request fell into the first input-length bucket); `input_tokens`
--    its tokens when a node counted them. NULL on rows written before.
-- 2. `spans.critical_us`: on the attempt that ended a node's time on the
--    request's critical path, the time that node added to the latency; NULL
--    on other attempts and on rows written before. `spans.req_input_len`
--    copies the request's input length, so per-node latency by input length
--    needs no join (as `model_key` and `req_started_at_us` do).
-- 3. The covering report index gains `input_len`, so reports still read only
--    the index.
ALTER TABLE requests ADD COLUMN input_len BIGINT;
ALTER TABLE requests ADD COLUMN input_tokens BIGINT;
ALTER TABLE spans ADD COLUMN critical_us BIGINT;
ALTER TABLE spans ADD COLUMN req_input_len BIGINT;
DROP INDEX requests_report;
CREATE INDEX requests_report ON requests (
    topology_id, started_at_us, version, model_key, duration_us, status, degraded,
    timeouts, cost_f, path_key, top_node, input_chars, input_len
);

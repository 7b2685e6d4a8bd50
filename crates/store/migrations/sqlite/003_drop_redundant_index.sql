-- Schema version 3: `requests_topology_time` is a prefix of `requests_report`
-- (migration 2), which serves the same lookups; one B-tree fewer per write.
DROP INDEX requests_topology_time;

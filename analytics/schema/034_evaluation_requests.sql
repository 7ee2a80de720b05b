-- Evaluation events arrive one line per request (api/features/evaluation/recorder.ts): the
-- request's fields once, then `results`, one string per flag evaluated. The table stores nothing
-- (Null); its view writes each flag as an evaluation_events row with the request's fields, which
-- feeds the minute rollup as before, so every reader keeps reading evaluation_events. ClickHouse
-- parses a request's fields once instead of once per flag, and a flag's fields as one string: for
-- five flags per request it spends about a quarter of the CPU per row of one line per flag
-- (docs/data-plane.md, Evaluation events). Its strings are plain: parsing straight into
-- LowCardinality costs more than the view's conversion of whole columns.
--
-- A flag's string is its fields joined by the unit separator (\x1f): flag_key, reason, variant,
-- value, error_code, rule_id, rollout_side. Inside a field, \x1e is written \x1e0 and \x1f \x1e1,
-- which the view reverses (value is JSON text, whose control characters are escaped already).
CREATE TABLE IF NOT EXISTS evaluation_requests
(
    timestamp DateTime64(3),
    project_id String,
    service_id String,
    environment String,
    latency_ms Float32,
    evaluations UInt32,
    targeting_key_hash String,
    source String,
    results Array(String)
)
ENGINE = Null;

CREATE MATERIALIZED VIEW IF NOT EXISTS evaluation_requests_mv TO evaluation_events AS
SELECT
    timestamp,
    project_id,
    service_id,
    environment,
    replaceAll(replaceAll(fields[1], '\x1e1', '\x1f'), '\x1e0', '\x1e') AS flag_key,
    replaceAll(replaceAll(fields[2], '\x1e1', '\x1f'), '\x1e0', '\x1e') AS reason,
    replaceAll(replaceAll(fields[3], '\x1e1', '\x1f'), '\x1e0', '\x1e') AS variant,
    fields[4] AS value,
    latency_ms,
    evaluations,
    replaceAll(replaceAll(fields[5], '\x1e1', '\x1f'), '\x1e0', '\x1e') AS error_code,
    replaceAll(replaceAll(fields[6], '\x1e1', '\x1f'), '\x1e0', '\x1e') AS rule_id,
    replaceAll(replaceAll(fields[7], '\x1e1', '\x1f'), '\x1e0', '\x1e') AS rollout_side,
    targeting_key_hash,
    source
FROM (SELECT *, splitByChar('\x1f', result) AS fields FROM evaluation_requests ARRAY JOIN results AS result);

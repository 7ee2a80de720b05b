-- Evaluation events arrive one line per request (api/features/evaluation/recorder.ts): the
-- request's fields once, then one tuple per flag evaluated. The table stores nothing (Null); its
-- view writes each tuple as an evaluation_events row with the request's fields, which feeds the
-- minute rollup as before, so every reader keeps reading evaluation_events. ClickHouse parses a
-- request's fields once instead of once per flag: for five flags per request it spends about half
-- the CPU per row of one line per flag (docs/data-plane.md#evaluation-events). Its strings are
-- plain: parsing straight into LowCardinality costs more than the view's conversion of the
-- whole column when it writes evaluation_events.
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
    results Array(Tuple(
        flag_key String,
        reason String,
        variant String,
        value String,
        error_code String,
        rule_id String,
        rollout_side String))
)
ENGINE = Null;

CREATE MATERIALIZED VIEW IF NOT EXISTS evaluation_requests_mv TO evaluation_events AS
SELECT
    timestamp,
    project_id,
    service_id,
    environment,
    result.flag_key AS flag_key,
    result.reason AS reason,
    result.variant AS variant,
    result.value AS value,
    latency_ms,
    evaluations,
    result.error_code AS error_code,
    result.rule_id AS rule_id,
    result.rollout_side AS rollout_side,
    targeting_key_hash,
    source
FROM evaluation_requests
ARRAY JOIN results AS result;

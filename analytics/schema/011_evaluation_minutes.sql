-- Per-minute rollup of evaluation_events kept by a materialized view, so flag metrics over
-- millions of events read thousands of rows. One row per (flag, minute, reason, variant,
-- error, value); `value` is cut to 128 characters to bound the cardinality of object flags.
-- Counters are SimpleAggregateFunction(sum) and latency a t-digest state: read them with
-- sum(evaluations), sum(latency_sum) and quantilesTDigestMerge(0.5, 0.95, 0.99)(latency_quantiles)
-- grouped as needed (rows of one key are merged in the background, so never read without GROUP BY).
CREATE TABLE IF NOT EXISTS evaluation_minutes
(
    minute DateTime,
    project_id LowCardinality(String),
    service_id LowCardinality(String),
    environment LowCardinality(String),
    flag_key LowCardinality(String),
    reason LowCardinality(String),
    variant String,
    error_code LowCardinality(String),
    value String,
    evaluations SimpleAggregateFunction(sum, UInt64),
    latency_sum SimpleAggregateFunction(sum, Float64),
    latency_quantiles AggregateFunction(quantilesTDigest(0.5, 0.95, 0.99), Float32)
)
ENGINE = AggregatingMergeTree
PARTITION BY toYYYYMM(minute)
ORDER BY (project_id, service_id, environment, flag_key, minute, reason, variant, error_code, value)
TTL minute + INTERVAL 400 DAY;

CREATE MATERIALIZED VIEW IF NOT EXISTS evaluation_minutes_mv TO evaluation_minutes AS
SELECT
    toStartOfMinute(timestamp) AS minute,
    project_id,
    service_id,
    environment,
    flag_key,
    reason,
    variant,
    error_code,
    left(value, 128) AS value,
    count() AS evaluations,
    sum(toFloat64(latency_ms)) AS latency_sum,
    quantilesTDigestState(0.5, 0.95, 0.99)(latency_ms) AS latency_quantiles
FROM evaluation_events
GROUP BY minute, project_id, service_id, environment, flag_key, reason, variant, error_code, value;

-- Outcome events (docs/api-reference.md#outcome-events): what SDKs report through POST
-- /api/analytics/track, and SDK telemetry errors (event 'error', origin 'sdk-telemetry').
-- Release-safety gates, flag variants and funnels count these. `flags` maps flag key -> the value
-- the client saw (JSON text); events without it are attributed through evaluation_events at query
-- time.
-- `value` is NULL when the client sent none (a conversion without revenue).
-- `targeting_key_hash` is hashTargetingKey(targetingKey), the same form evaluation_events keeps,
-- so the two join on it. `event_id` is the writer's per-event dedup key.
CREATE TABLE IF NOT EXISTS outcome_events
(
    timestamp DateTime64(3),
    project_id LowCardinality(String),
    service_id LowCardinality(String),
    environment LowCardinality(String),
    event LowCardinality(String),
    targeting_key_hash String,
    value Nullable(Float64),
    flags Map(String, String),
    origin LowCardinality(String),
    event_id String
)
ENGINE = MergeTree
PARTITION BY toYYYYMM(timestamp)
ORDER BY (project_id, service_id, environment, event, timestamp)
TTL toDateTime(timestamp) + INTERVAL 90 DAY
SETTINGS non_replicated_deduplication_window = 1000;

-- Per-minute counts per event name; read with sum() and quantilesTDigestMerge grouped as needed.
CREATE TABLE IF NOT EXISTS outcome_minutes
(
    minute DateTime,
    project_id LowCardinality(String),
    service_id LowCardinality(String),
    environment LowCardinality(String),
    event LowCardinality(String),
    events SimpleAggregateFunction(sum, UInt64),
    valued SimpleAggregateFunction(sum, UInt64),
    value_sum SimpleAggregateFunction(sum, Float64),
    value_quantiles AggregateFunction(quantilesTDigest(0.5, 0.95, 0.99), Float64)
)
ENGINE = AggregatingMergeTree
PARTITION BY toYYYYMM(minute)
ORDER BY (project_id, service_id, environment, event, minute)
TTL minute + INTERVAL 400 DAY
SETTINGS non_replicated_deduplication_window = 1000;

CREATE MATERIALIZED VIEW IF NOT EXISTS outcome_minutes_mv TO outcome_minutes AS
SELECT
    toStartOfMinute(timestamp) AS minute,
    project_id,
    service_id,
    environment,
    event,
    count() AS events,
    countIf(value IS NOT NULL) AS valued,
    sum(ifNull(value, 0)) AS value_sum,
    quantilesTDigestStateIf(0.5, 0.95, 0.99)(assumeNotNull(value), value IS NOT NULL) AS value_quantiles
FROM outcome_events
GROUP BY minute, project_id, service_id, environment, event;

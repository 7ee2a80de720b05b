-- Web vitals and client errors from both sources: SDK telemetry reports (origin 'sdk') and
-- browser events of type webvital / error (origin 'browser', copied by the views in
-- 023_browser_events.sql). `active_flags` maps flag key -> value (JSON text) the page had.
-- `name` is one of lcp, cls, inp, ttfb, fcp (lower case); `rating` good, needs-improvement,
-- poor or '' when not given.
CREATE TABLE IF NOT EXISTS web_vitals
(
    timestamp DateTime64(3),
    project_id LowCardinality(String),
    service_id LowCardinality(String),
    environment LowCardinality(String),
    origin LowCardinality(String),
    name LowCardinality(String),
    value Float64,
    rating LowCardinality(String),
    active_flags Map(String, String),
    session_id String,
    url String,
    event_id String
)
ENGINE = MergeTree
PARTITION BY toYYYYMM(timestamp)
ORDER BY (project_id, service_id, name, timestamp)
TTL toDateTime(timestamp) + INTERVAL 90 DAY
SETTINGS non_replicated_deduplication_window = 1000;

CREATE TABLE IF NOT EXISTS web_vital_minutes
(
    minute DateTime,
    project_id LowCardinality(String),
    service_id LowCardinality(String),
    environment LowCardinality(String),
    origin LowCardinality(String),
    name LowCardinality(String),
    samples SimpleAggregateFunction(sum, UInt64),
    good SimpleAggregateFunction(sum, UInt64),
    needs_improvement SimpleAggregateFunction(sum, UInt64),
    poor SimpleAggregateFunction(sum, UInt64),
    value_quantiles AggregateFunction(quantilesTDigest(0.5, 0.75, 0.95), Float64)
)
ENGINE = AggregatingMergeTree
PARTITION BY toYYYYMM(minute)
ORDER BY (project_id, service_id, name, minute, environment, origin)
TTL minute + INTERVAL 400 DAY
SETTINGS non_replicated_deduplication_window = 1000;

CREATE MATERIALIZED VIEW IF NOT EXISTS web_vital_minutes_mv TO web_vital_minutes AS
SELECT
    toStartOfMinute(timestamp) AS minute,
    project_id,
    service_id,
    environment,
    origin,
    name,
    count() AS samples,
    countIf(rating = 'good') AS good,
    countIf(rating = 'needs-improvement') AS needs_improvement,
    countIf(rating = 'poor') AS poor,
    quantilesTDigestState(0.5, 0.75, 0.95)(value) AS value_quantiles
FROM web_vitals
GROUP BY minute, project_id, service_id, environment, origin, name;

-- `fingerprint` groups repeats of one error: the first 16 bytes of SHA-256 of the message, hex.
CREATE TABLE IF NOT EXISTS client_errors
(
    timestamp DateTime64(3),
    project_id LowCardinality(String),
    service_id LowCardinality(String),
    environment LowCardinality(String),
    origin LowCardinality(String),
    fingerprint String,
    message String,
    stack String,
    active_flags Map(String, String),
    session_id String,
    url String,
    event_id String
)
ENGINE = MergeTree
PARTITION BY toYYYYMM(timestamp)
ORDER BY (project_id, service_id, fingerprint, timestamp)
TTL toDateTime(timestamp) + INTERVAL 90 DAY
SETTINGS non_replicated_deduplication_window = 1000;

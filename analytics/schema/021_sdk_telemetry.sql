-- SDK telemetry (docs/analytics-ingestion.md, POST /api/analytics/sdk-telemetry): one row per
-- summary an SDK reports (its own evaluations of a flag variant since its last report, cache hits
-- and misses), and one row per report's diagnostics. Web vitals and errors of the same report go to
-- web_vitals and client_errors (origin 'sdk').
CREATE TABLE IF NOT EXISTS sdk_telemetry
(
    timestamp DateTime64(3),
    project_id LowCardinality(String),
    service_id LowCardinality(String),
    environment LowCardinality(String),
    flag_key LowCardinality(String),
    variant String,
    evaluations UInt64,
    cache_hits UInt64,
    cache_misses UInt64,
    avg_latency_ms Float64,
    event_id String
)
ENGINE = MergeTree
PARTITION BY toYYYYMM(timestamp)
ORDER BY (project_id, service_id, environment, flag_key, timestamp)
TTL toDateTime(timestamp) + INTERVAL 90 DAY
SETTINGS non_replicated_deduplication_window = 1000;

CREATE TABLE IF NOT EXISTS sdk_diagnostics
(
    timestamp DateTime64(3),
    project_id LowCardinality(String),
    service_id LowCardinality(String),
    environment LowCardinality(String),
    total_evaluations UInt64,
    cache_hits UInt64,
    cache_hit_ratio Float64,
    tracked_flags UInt32,
    event_id String
)
ENGINE = MergeTree
PARTITION BY toYYYYMM(timestamp)
ORDER BY (project_id, service_id, environment, timestamp)
TTL toDateTime(timestamp) + INTERVAL 90 DAY
SETTINGS non_replicated_deduplication_window = 1000;

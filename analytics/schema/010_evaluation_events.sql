-- One row per flag evaluation, written in batches by the data plane's evaluation recorder
-- (api/features/evaluation/recorder.ts). Tenant columns lead the sort key so every query of a
-- project, service or flag reads a narrow range; monthly partitions make retention cheap.
-- `targeting_key_hash` is the first 16 bytes of SHA-256(targetingKey) in hex: stable for
-- cohort comparisons and unique counts, never the key itself ('' when the context had none).
-- `value` is the evaluated value as JSON text; `latency_ms` is the server time from the
-- request's arrival to this result; `source` is the protocol (rest, ofrep, connect, grpc-web).
CREATE TABLE IF NOT EXISTS evaluation_events
(
    timestamp DateTime64(3),
    project_id LowCardinality(String),
    service_id LowCardinality(String),
    environment LowCardinality(String),
    flag_key LowCardinality(String),
    reason LowCardinality(String),
    variant String,
    value String,
    latency_ms Float32,
    error_code LowCardinality(String),
    targeting_key_hash String,
    source LowCardinality(String)
)
ENGINE = MergeTree
PARTITION BY toYYYYMM(timestamp)
ORDER BY (project_id, service_id, environment, flag_key, timestamp)
TTL toDateTime(timestamp) + INTERVAL 90 DAY;

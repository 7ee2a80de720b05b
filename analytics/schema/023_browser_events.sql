-- Browser analytics (docs/api-reference.md#browser-analytics, docs/analytics-ingestion.md): events
-- posted to {ingest_url}/e. `service_id` is the event's siteId. country, browser, os and device are
-- derived by the server (User-Agent parser; country only from a trusted proxy's header, ''
-- otherwise). `visitor_hash` is hashTargetingKey(visitorId) ('' without one); `flags` maps flag key
-- -> value (JSON text) the page had; `data` is the event's data object as JSON text.
-- `name`/`value`: the web vital or custom event's name and number. `event_id` is the writer's
-- per-event dedup key.
CREATE TABLE IF NOT EXISTS browser_events
(
    timestamp DateTime64(3),
    received_at DateTime64(3),
    project_id LowCardinality(String),
    service_id LowCardinality(String),
    type LowCardinality(String),
    url String,
    referrer String,
    session_id String,
    visitor_hash String,
    name LowCardinality(String),
    value Nullable(Float64),
    flags Map(String, String),
    data String,
    country LowCardinality(String),
    browser LowCardinality(String),
    os LowCardinality(String),
    device LowCardinality(String),
    event_id String
)
ENGINE = MergeTree
PARTITION BY toYYYYMM(timestamp)
ORDER BY (project_id, service_id, timestamp)
TTL toDateTime(timestamp) + INTERVAL 90 DAY
SETTINGS non_replicated_deduplication_window = 1000;

-- Per-minute counts per event type with unique visitor and session states: read with sum(events),
-- uniqMerge(visitors), uniqMerge(sessions) grouped as needed.
CREATE TABLE IF NOT EXISTS browser_minutes
(
    minute DateTime,
    project_id LowCardinality(String),
    service_id LowCardinality(String),
    type LowCardinality(String),
    events SimpleAggregateFunction(sum, UInt64),
    visitors AggregateFunction(uniq, String),
    sessions AggregateFunction(uniq, String)
)
ENGINE = AggregatingMergeTree
PARTITION BY toYYYYMM(minute)
ORDER BY (project_id, service_id, minute, type)
TTL minute + INTERVAL 400 DAY
SETTINGS non_replicated_deduplication_window = 1000;

CREATE MATERIALIZED VIEW IF NOT EXISTS browser_minutes_mv TO browser_minutes AS
SELECT
    toStartOfMinute(timestamp) AS minute,
    project_id,
    service_id,
    type,
    count() AS events,
    uniqState(if(visitor_hash = '', session_id, visitor_hash)) AS visitors,
    uniqState(session_id) AS sessions
FROM browser_events
GROUP BY minute, project_id, service_id, type;

-- Web vitals and errors of the browser join the SDK's in one table each (022).
CREATE MATERIALIZED VIEW IF NOT EXISTS browser_web_vitals_mv TO web_vitals AS
SELECT
    timestamp, project_id, service_id, '' AS environment, 'browser' AS origin,
    lower(name) AS name, ifNull(value, 0) AS value,
    JSONExtractString(data, 'rating') AS rating,
    flags AS active_flags, session_id, url, event_id
FROM browser_events
WHERE type = 'webvital' AND value IS NOT NULL;

CREATE MATERIALIZED VIEW IF NOT EXISTS browser_client_errors_mv TO client_errors AS
SELECT
    timestamp, project_id, service_id, '' AS environment, 'browser' AS origin,
    lower(left(hex(SHA256(JSONExtractString(data, 'message'))), 32)) AS fingerprint,
    JSONExtractString(data, 'message') AS message,
    JSONExtractString(data, 'stack') AS stack,
    flags AS active_flags, session_id, url, event_id
FROM browser_events
WHERE type = 'error';

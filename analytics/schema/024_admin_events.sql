-- Product analytics of the console itself (/ingest/admin-events, docs/analytics-ingestion.md):
-- screen_viewed, flag_viewed, activation and the like. `project_id` is properties.projectId when
-- present, for the admin funnel; `properties` is the JSON text; `user_hash` is
-- hashTargetingKey(userId).
CREATE TABLE IF NOT EXISTS admin_events
(
    occurred_at DateTime64(3),
    received_at DateTime64(3),
    site_id LowCardinality(String),
    source LowCardinality(String),
    session_id String,
    install_id String,
    user_hash String,
    event LowCardinality(String),
    project_id String,
    app_version LowCardinality(String),
    build_number LowCardinality(String),
    app_variant LowCardinality(String),
    platform LowCardinality(String),
    api_origin LowCardinality(String),
    properties String,
    event_id String
)
ENGINE = MergeTree
PARTITION BY toYYYYMM(occurred_at)
ORDER BY (site_id, event, occurred_at)
TTL toDateTime(occurred_at) + INTERVAL 400 DAY
SETTINGS non_replicated_deduplication_window = 1000;

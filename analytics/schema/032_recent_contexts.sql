-- Recent evaluation contexts (docs/simulate.md): the latest attributes of each
-- targeting key evaluated in a service and environment, so a simulation replays more than one
-- instance's context ring. Written through the batched writer by api/features/simulate/recorder.ts,
-- at most once per key per minute per instance; `attributes` is the context without its
-- targetingKey, after the deny-list (CONTEXT_ATTRIBUTE_DENYLIST) and the size cap
-- (CONTEXT_ATTRIBUTE_MAX_BYTES), as JSON object text. The targeting key itself is kept as sent:
-- rollout and variant buckets hash it, so a replay without it would bucket nobody.
-- ReplacingMergeTree keeps the row with the latest seen_at per key once parts merge; until then
-- a key may have several rows, so readers take argMax(attributes, seen_at) grouped by key (no
-- FINAL: it would merge the whole service's range to read a few thousand keys), and filter
-- seen_at themselves because TTL only removes rows when parts merge.
CREATE TABLE IF NOT EXISTS recent_contexts
(
    service_id LowCardinality(String),
    environment LowCardinality(String),
    targeting_key String,
    attributes String,
    seen_at DateTime64(3)
)
ENGINE = ReplacingMergeTree(seen_at)
ORDER BY (service_id, environment, targeting_key)
TTL toDateTime(seen_at) + INTERVAL 7 DAY
SETTINGS non_replicated_deduplication_window = 1000;

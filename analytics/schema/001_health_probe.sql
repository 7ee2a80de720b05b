-- Written and read back by /api/health so the check proves the engine accepts inserts.
CREATE TABLE IF NOT EXISTS health_probe
(
    probe_id String,
    instance String,
    written_at DateTime64(3)
)
ENGINE = MergeTree
ORDER BY (instance, written_at)
TTL toDateTime(written_at) + INTERVAL 1 DAY;

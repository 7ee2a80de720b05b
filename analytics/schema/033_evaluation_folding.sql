-- Alike evaluation requests folded into one row per flag (api/features/evaluation/recorder.ts):
-- same service, environment, protocol, targeting key, results, and server latency to two
-- significant digits, within a quarter of a second of one instance (EVAL_EVENTS_FOLD_MS). `evaluations` is how many evaluations
-- the row stands for (1 for rows written before this migration), stamped with the first one's
-- time; every reader of evaluation_events counts sum(evaluations), never count().
ALTER TABLE evaluation_events ADD COLUMN IF NOT EXISTS evaluations UInt32 DEFAULT 1 AFTER latency_ms;
ALTER TABLE evaluation_events COMMENT COLUMN evaluations 'evaluations this row stands for: alike requests folded together';

-- The rollup weighs each row by its evaluations: counts and latency sums multiply, and latency
-- percentiles come from an exact weighted histogram of the latencies, which the recorder has cut
-- to two significant digits, so a state holds at most a few hundred distinct values (a t-digest
-- of a few heavy rows interpolates between them: 90 requests at 1 ms and 10 at 50 ms read as a
-- median of 5.9 ms). A state of another type than the t-digest before it, which ClickHouse
-- cannot convert, hence a new column: minutes rolled up before this migration keep their counts
-- and latency sums, and their percentiles are not carried over (read as null).
ALTER TABLE evaluation_minutes ADD COLUMN IF NOT EXISTS latency_histogram AggregateFunction(quantilesExactWeighted(0.5, 0.95, 0.99), Float32, UInt32);
-- A view's query cannot be altered in place: it is dropped and created again. An insert another
-- process makes on a ClickHouse server in between is stored but not rolled up (the control plane
-- migrates at deploy, before new data planes write).
DROP VIEW IF EXISTS evaluation_minutes_mv;
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
    sum(toUInt64(weight)) AS evaluations,
    sum(toFloat64(latency_ms) * weight) AS latency_sum,
    quantilesExactWeightedState(0.5, 0.95, 0.99)(latency_ms, weight) AS latency_histogram
-- Read through a subquery: an alias named like the column would stand for it in the other aggregates.
FROM (SELECT *, evaluations AS weight FROM evaluation_events)
GROUP BY minute, project_id, service_id, environment, flag_key, reason, variant, error_code, value;
ALTER TABLE evaluation_minutes DROP COLUMN IF EXISTS latency_quantiles;

-- Which rule matched (its id, '' for none) and, for a rule or default with a partial rollout,
-- which side of it the caller fell: 'in' (served the rollout's value), 'out', or '' when no
-- partial rollout applied. The canary gates compare the two sides over the same window.
ALTER TABLE evaluation_events ADD COLUMN IF NOT EXISTS rule_id LowCardinality(String) DEFAULT '' AFTER error_code;
ALTER TABLE evaluation_events ADD COLUMN IF NOT EXISTS rollout_side LowCardinality(String) DEFAULT '' AFTER rule_id;
ALTER TABLE evaluation_events MODIFY SETTING non_replicated_deduplication_window = 1000;
ALTER TABLE evaluation_minutes MODIFY SETTING non_replicated_deduplication_window = 1000;

-- What evaluation_events.rule_id and rollout_side mean (025 added them; its wording of 'out' and
-- of a "default with a partial rollout" does not match the engine, which has partial rollouts on
-- rules only: api/features/evaluation/engine/evaluate.ts).
--
-- The rollout bucket is per flag and targeting key (engine/bucket.ts); a rule with
-- rolloutPercentage p < 100 holds a key iff its bucket < round(p * 1000).
--   * A rule without a partial rollout matched: rule_id = that rule, rollout_side = ''.
--   * The first rule whose conditions held has a partial rollout:
--       - the key is inside it: that rule served; rule_id = that rule, rollout_side = 'in';
--       - the key is outside it: a later rule, the variants or the default served (reason says
--         which); rule_id = the rule the key fell outside of, rollout_side = 'out'.
--     These are the canary's treatment and control cohorts (docs/canary.md) of that rule: conditions held, bucket
--     inside or outside. A TYPE_MISMATCH of the served value keeps the side.
--   * No rule's conditions held (or the flag is missing or disabled): rule_id = '', rollout_side = ''.
-- A context without a targeting key is never inside a partial rollout and on neither side.
ALTER TABLE evaluation_events COMMENT COLUMN rule_id 'the rule that decided: matched, or whose partial rollout left the key out; empty when no rule''s conditions held';
ALTER TABLE evaluation_events COMMENT COLUMN rollout_side 'in / out of the partial rollout of rule_id (the canary cohorts of docs/evaluation.md); empty when no partial rollout decided';

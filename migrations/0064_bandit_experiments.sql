-- Bandit experiments (docs/experiments.md). One row per
-- experiment on a flag's variants, one row per variant (arm).
--
-- Counters per arm come from two sources, kept apart so neither overwrites the other:
--   reward_trials / reward_successes: POST /api/experiments/{id}/reward, incremented in place;
--   event_trials / event_successes: the latest count from outcome events in ClickHouse
--     (only with conversion_event), recomputed over the whole experiment at every
--     reallocation and stored here so the record answers without a warehouse query.
-- The arm's trials and successes are the sums of both.
--
-- `seed` makes reallocation reproducible: round r draws from seededRandom(seed + r).
-- `cut_at` / `cut_evidence`: the errors guardrail cut the arm to the floor (it stays there).
-- `round_lease_until`: a reallocation round in progress (manual or scheduled) holds the
-- experiment until then, so rounds run one at a time across replicas without holding a
-- connection or row lock while the round reads the warehouse and writes the flag.
-- At most one running experiment per flag, service and environment: the partial unique index
-- makes two concurrent creates give one experiment and one 409.
CREATE TABLE bandit_experiments (
  id                             text PRIMARY KEY,
  project_id                     text NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
  flag_id                        text NOT NULL REFERENCES flags (id) ON DELETE CASCADE,
  service_id                     text NOT NULL,
  environment                    text NOT NULL,
  flag_key                       text NOT NULL,
  name                           text NOT NULL,
  algorithm                      text NOT NULL CHECK (algorithm IN ('thompson_sampling', 'epsilon_greedy')),
  status                         text NOT NULL CHECK (status IN ('running', 'completed', 'stopped')),
  status_reason                  text,
  winner                         text,
  min_exploration_floor          double precision NOT NULL CHECK (min_exploration_floor >= 0 AND min_exploration_floor <= 1),
  min_sample_size_per_variant    integer NOT NULL CHECK (min_sample_size_per_variant >= 0),
  confidence_threshold           double precision NOT NULL CHECK (confidence_threshold >= 0 AND confidence_threshold <= 1),
  auto_rollout_winner            boolean NOT NULL,
  conversion_event               text,
  reallocation_interval_minutes  double precision NOT NULL DEFAULT 15 CHECK (reallocation_interval_minutes BETWEEN 1 AND 10080),
  seed                           bigint NOT NULL,
  rounds                         integer NOT NULL DEFAULT 0,
  flag_version                   integer,
  last_reallocated_at            timestamptz,
  round_lease_until              timestamptz,
  workflow_id                    text NOT NULL,
  created_by_actor               text NOT NULL,
  started_at                     timestamptz NOT NULL DEFAULT now(),
  ended_at                       timestamptz,
  created_at                     timestamptz NOT NULL DEFAULT now(),
  updated_at                     timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX bandit_experiments_one_running ON bandit_experiments (service_id, environment, flag_key) WHERE status = 'running';
CREATE INDEX bandit_experiments_project_idx ON bandit_experiments (project_id, service_id, created_at);

CREATE TABLE bandit_experiment_variants (
  experiment_id     text NOT NULL REFERENCES bandit_experiments (id) ON DELETE CASCADE,
  name              text NOT NULL,
  position          integer NOT NULL,
  allocation        double precision NOT NULL CHECK (allocation >= 0 AND allocation <= 1),
  probability_best  double precision NOT NULL DEFAULT 0,
  reward_trials     bigint NOT NULL DEFAULT 0,
  reward_successes  bigint NOT NULL DEFAULT 0 CHECK (reward_successes <= reward_trials),
  event_trials      bigint NOT NULL DEFAULT 0,
  event_successes   bigint NOT NULL DEFAULT 0,
  cut_at            timestamptz,
  cut_evidence      jsonb,
  PRIMARY KEY (experiment_id, name)
);

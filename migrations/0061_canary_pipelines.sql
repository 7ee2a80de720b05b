-- Canary pipelines (docs/canary.md): one record per pipeline, the state its Temporal
-- workflow (workflows/canary.ts) persists at every change. `config` is the validated canary
-- configuration; `current_stage` and `completed_stages` hold stages with their gate evidence
-- (the shapes of docs/canary.md) as JSONB; `pre_canary_version` is the flag version abort and
-- rollback restore. At most one active (running or paused) pipeline per flag, service and
-- environment: the partial unique index makes two concurrent starts give one pipeline and one 409.
CREATE TABLE canary_pipelines (
  id                  text PRIMARY KEY,
  project_id          text NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
  flag_id             text NOT NULL REFERENCES flags (id) ON DELETE CASCADE,
  service_id          text NOT NULL,
  environment         text NOT NULL,
  flag_key            text NOT NULL,
  rule_id             text NOT NULL,
  status              text NOT NULL CHECK (status IN ('running', 'paused', 'completed', 'rolled_back', 'aborted')),
  config              jsonb NOT NULL,
  pre_canary_version  integer NOT NULL,
  current_stage       jsonb,
  completed_stages    jsonb NOT NULL DEFAULT '[]'::jsonb,
  soak_ends_at        timestamptz,
  health              jsonb NOT NULL,
  status_reason       text,
  workflow_id         text NOT NULL,
  created_by_actor    text NOT NULL,
  created_at          timestamptz NOT NULL DEFAULT now(),
  updated_at          timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX canary_pipelines_one_active ON canary_pipelines (service_id, environment, flag_key) WHERE status IN ('running', 'paused');
CREATE INDEX canary_pipelines_flag_idx ON canary_pipelines (service_id, environment, flag_key, created_at);

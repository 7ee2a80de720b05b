-- Cohorts (docs/cohorts.md): reusable audiences of a project. A context is a member when
-- any rule's conditions all hold; flags use one with the `in_cohort` operator, which snapshots
-- compile into the flag (evaluation never reads this table). `version` rises on every change:
-- snapshots keep the highest they saw and fold it into the ETag of every flag that uses the
-- cohort. Cohort changes reach the snapshots through flag_outbox (enqueued for the bus only).
CREATE TABLE cohorts (
  id               text PRIMARY KEY,
  project_id       text NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
  name             text NOT NULL,
  description      text NOT NULL DEFAULT '',
  -- [{id, conditions: [{property, operator, value}]}], validated as flag conditions are (no in_cohort).
  rules            jsonb NOT NULL DEFAULT '[]'::jsonb,
  version          integer NOT NULL DEFAULT 1,
  created_by       text NOT NULL,
  created_by_user  text,
  updated_by       text NOT NULL,
  updated_by_user  text,
  created_at       timestamptz NOT NULL DEFAULT now(),
  updated_at       timestamptz NOT NULL DEFAULT now()
);
-- Names are unique per project whatever their case ("Beta" and "beta" would confuse people).
CREATE UNIQUE INDEX cohorts_project_name_idx ON cohorts (project_id, lower(name));

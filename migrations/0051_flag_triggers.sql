-- Flag triggers (docs/api-reference.md#triggers): a capability URL that enables, disables or
-- toggles one flag in one environment. Only the SHA-256 of the URL token is stored. Deleting the
-- flag (or its project) removes its triggers; DELETE on the API only revokes, keeping the record.
CREATE TABLE flag_triggers (
  id               text PRIMARY KEY,
  flag_id          text NOT NULL REFERENCES flags (id) ON DELETE CASCADE,
  project_id       text NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
  service_id       text NOT NULL,
  environment      text NOT NULL,
  flag_key         text NOT NULL,
  name             text NOT NULL,
  action           text NOT NULL CHECK (action IN ('enable', 'disable', 'toggle')),
  token_hash       text NOT NULL UNIQUE,
  created_by       text REFERENCES users (id) ON DELETE SET NULL,
  created_by_actor text NOT NULL,
  created_at       timestamptz NOT NULL DEFAULT now(),
  revoked_at       timestamptz,
  last_executed_at timestamptz,
  execution_count  integer NOT NULL DEFAULT 0
);
CREATE INDEX flag_triggers_flag_idx ON flag_triggers (service_id, environment, flag_key, created_at);

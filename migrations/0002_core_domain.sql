-- The core domain every feature shares: projects, members, services, flags, audit.
-- Feature-specific tables come in later migrations owned by their feature.

CREATE TABLE projects (
  id          text PRIMARY KEY,
  org_id      text NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
  name        text NOT NULL,
  slug        text NOT NULL,
  description text NOT NULL DEFAULT '',
  tags        jsonb NOT NULL DEFAULT '[]',
  created_by  text REFERENCES users (id) ON DELETE SET NULL,
  created_at  timestamptz NOT NULL DEFAULT now(),
  updated_at  timestamptz NOT NULL DEFAULT now(),
  UNIQUE (org_id, slug)
);
CREATE INDEX projects_slug_idx ON projects (slug);

CREATE TABLE project_members (
  project_id text NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
  user_id    text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  role       text NOT NULL CHECK (role IN ('owner', 'admin', 'member', 'viewer')),
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (project_id, user_id)
);
CREATE INDEX project_members_user_idx ON project_members (user_id);

CREATE TABLE services (
  id          text PRIMARY KEY,
  project_id  text NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
  name        text NOT NULL,
  slug        text NOT NULL,
  description text NOT NULL DEFAULT '',
  tags        jsonb NOT NULL DEFAULT '[]',
  created_at  timestamptz NOT NULL DEFAULT now(),
  updated_at  timestamptz NOT NULL DEFAULT now(),
  UNIQUE (project_id, slug)
);
CREATE INDEX services_slug_idx ON services (slug);

CREATE TABLE flags (
  id            text PRIMARY KEY,
  project_id    text NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
  service_id    text NOT NULL REFERENCES services (id) ON DELETE CASCADE,
  environment   text NOT NULL CHECK (environment IN ('development', 'staging', 'production')),
  key           text NOT NULL,
  name          text NOT NULL,
  description   text NOT NULL DEFAULT '',
  type          text NOT NULL CHECK (type IN ('boolean', 'string', 'number', 'object')),
  enabled       boolean NOT NULL DEFAULT false,
  default_value jsonb NOT NULL,
  tags          jsonb NOT NULL DEFAULT '[]',
  variants      jsonb NOT NULL DEFAULT '[]',
  targeting     jsonb NOT NULL DEFAULT '[]',
  is_public     boolean NOT NULL DEFAULT false,
  version       integer NOT NULL DEFAULT 1,
  created_at    timestamptz NOT NULL DEFAULT now(),
  updated_at    timestamptz NOT NULL DEFAULT now(),
  UNIQUE (service_id, environment, key)
);
CREATE INDEX flags_project_idx ON flags (project_id, service_id, environment, key);
CREATE INDEX flags_project_updated_idx ON flags (project_id, updated_at);

-- Every change of a flag writes its full content here (the version snapshot of
-- docs/api-reference.md#flags). No FK to flags: history outlives a deleted flag and is removed with
-- its project.
CREATE TABLE flag_versions (
  id          text PRIMARY KEY,
  flag_id     text NOT NULL,
  project_id  text NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
  service_id  text NOT NULL,
  environment text NOT NULL,
  flag_key    text NOT NULL,
  version     integer NOT NULL,
  change_type text NOT NULL,
  snapshot    jsonb NOT NULL,
  actor       text NOT NULL,
  user_id     text,
  created_at  timestamptz NOT NULL DEFAULT now(),
  UNIQUE (flag_id, version)
);
CREATE INDEX flag_versions_lookup_idx ON flag_versions (service_id, environment, flag_key, version DESC);

-- Audit entries (docs/api-reference.md#audit-log). project_id has no FK on purpose: see
-- docs/architecture.md for what happens to a deleted project's audit trail.
CREATE TABLE audit_logs (
  id            text PRIMARY KEY,
  project_id    text NOT NULL,
  user_id       text,
  actor         text NOT NULL,
  action        text NOT NULL,
  resource_type text NOT NULL,
  resource_id   text NOT NULL,
  resource_name text,
  before        jsonb,
  after         jsonb,
  changes       jsonb NOT NULL DEFAULT '[]',
  metadata      jsonb NOT NULL DEFAULT '{}',
  ip_address    text,
  user_agent    text,
  timestamp     timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX audit_logs_project_time_idx ON audit_logs (project_id, timestamp DESC, id DESC);
CREATE INDEX audit_logs_resource_idx ON audit_logs (project_id, resource_type, resource_id);

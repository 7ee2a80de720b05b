-- Projects feature: invitations, flag watches and notification read marks, and the record a
-- deleted project leaves behind so its audit trail stays readable by the organization.

-- An invitation to a project by e-mail, valid 7 days
-- (docs/api-reference.md#members-and-invitations). Only the SHA-256 of the mailed token is stored.
-- `status` is the stored state; a pending row past `expires_at` is treated as expired everywhere
-- even before the expiry workflow has marked it.
CREATE TABLE invitations (
  id           text PRIMARY KEY,
  project_id   text NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
  email        text NOT NULL,
  role         text NOT NULL CHECK (role IN ('admin', 'member', 'viewer')),
  token_hash   text NOT NULL UNIQUE,
  status       text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'accepted', 'cancelled', 'expired')),
  invited_by   text REFERENCES users (id) ON DELETE SET NULL,
  accepted_by  text REFERENCES users (id) ON DELETE SET NULL,
  created_at   timestamptz NOT NULL DEFAULT now(),
  expires_at   timestamptz NOT NULL,
  settled_at   timestamptz
);
CREATE INDEX invitations_project_idx ON invitations (project_id, created_at DESC);
-- At most one pending invitation per address and project.
CREATE UNIQUE INDEX invitations_pending_email_key ON invitations (project_id, lower(email)) WHERE status = 'pending';

-- A user watches one flag (service, environment, key;
-- docs/api-reference.md#watching-and-notifications). `flag_id` is the flag row the watch was made
-- on, kept after the flag is deleted so its flag.delete entry still notifies.
CREATE TABLE flag_watches (
  user_id     text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  project_id  text NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
  service_id  text NOT NULL REFERENCES services (id) ON DELETE CASCADE,
  environment text NOT NULL CHECK (environment IN ('development', 'staging', 'production')),
  flag_key    text NOT NULL,
  flag_id     text NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (user_id, service_id, environment, flag_key)
);

-- "Mark all read" moves one high-water mark per user.
CREATE TABLE notification_reads (
  user_id text PRIMARY KEY REFERENCES users (id) ON DELETE CASCADE,
  read_at timestamptz NOT NULL
);

-- A deleted project's audit entries are kept (audit_logs has no FK to projects); this row
-- says which organization they belong to, so that organization's owners and admins can
-- still read them through GET /api/audit.
CREATE TABLE deleted_projects (
  id         text PRIMARY KEY,
  org_id     text NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
  name       text NOT NULL,
  slug       text NOT NULL,
  deleted_by text REFERENCES users (id) ON DELETE SET NULL,
  deleted_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX deleted_projects_org_idx ON deleted_projects (org_id);

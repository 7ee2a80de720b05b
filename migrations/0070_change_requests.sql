-- Change policy and change requests (docs/change-requests.md). A policy row protects one
-- environment of a project; an environment without a row, or with 0 approvals, needs none.
CREATE TABLE change_policies (
  project_id          text NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
  environment         text NOT NULL,
  required_approvals  integer NOT NULL CHECK (required_approvals BETWEEN 0 AND 5),
  approver_roles      jsonb NOT NULL DEFAULT '[]',
  allow_self_approval boolean NOT NULL DEFAULT false,
  emergency_reduce    text NOT NULL DEFAULT 'allow' CHECK (emergency_reduce IN ('allow', 'approve')),
  updated_at          timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (project_id, environment)
);

-- A change request holds its changes as submitted (the api/domain/change-requests.ts shapes);
-- what it needs (approvals, approver roles) is derived from the current policy whenever asked,
-- so a stricter policy applies to requests already open.
CREATE TABLE change_requests (
  id              text PRIMARY KEY,
  project_id      text NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
  status          text NOT NULL CHECK (status IN ('pending', 'approved', 'scheduled', 'applied', 'rejected', 'cancelled', 'failed')),
  title           text NOT NULL,
  description     text,
  changes         jsonb NOT NULL,
  approvals       jsonb NOT NULL DEFAULT '[]',
  rejection       jsonb,
  impact          jsonb NOT NULL DEFAULT '[]',
  created_by      text REFERENCES users (id) ON DELETE SET NULL,
  created_by_name text NOT NULL,
  scheduled_at    timestamptz,
  failure_reason  text,
  applied_at      timestamptz,
  -- Bumped by every edit: an approval names the revision it approved.
  revision        integer NOT NULL DEFAULT 1,
  created_at      timestamptz NOT NULL DEFAULT now(),
  updated_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX change_requests_project_idx ON change_requests (project_id, created_at DESC, id DESC);
CREATE INDEX change_requests_status_idx ON change_requests (project_id, status, created_at DESC, id DESC);

-- Accounts, organizations, sessions and the dev mailbox (docs/api-reference.md#organizations).

CREATE TABLE users (
  id             text PRIMARY KEY,
  email          text NOT NULL,
  name           text NOT NULL,
  password_hash  text NOT NULL,
  email_verified boolean NOT NULL DEFAULT false,
  created_at     timestamptz NOT NULL DEFAULT now(),
  updated_at     timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX users_email_key ON users (lower(email));

CREATE TABLE orgs (
  id         text PRIMARY KEY,
  name       text NOT NULL,
  personal   boolean NOT NULL DEFAULT false,
  created_by text REFERENCES users (id) ON DELETE SET NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE org_members (
  org_id     text NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
  user_id    text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  role       text NOT NULL CHECK (role IN ('owner', 'admin', 'member')),
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (org_id, user_id)
);
CREATE INDEX org_members_user_idx ON org_members (user_id);

-- Only the SHA-256 of the cookie value is stored; deleting the row revokes the session at once.
CREATE TABLE sessions (
  id_hash    text PRIMARY KEY,
  user_id    text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  csrf_token text NOT NULL,
  ip         text,
  user_agent text,
  created_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz NOT NULL
);
CREATE INDEX sessions_user_idx ON sessions (user_id);
CREATE INDEX sessions_expiry_idx ON sessions (expires_at);

CREATE TABLE email_verifications (
  token_hash text PRIMARY KEY,
  user_id    text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  email      text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz NOT NULL,
  used_at    timestamptz
);

-- Mail delivered on the embedded profile (no SMTP_URL); keyed by the sending workflow's id
-- so a retried activity cannot deliver twice.
CREATE TABLE dev_mailbox (
  id         text PRIMARY KEY,
  to_email   text NOT NULL,
  subject    text NOT NULL,
  body       text NOT NULL,
  token      text,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX dev_mailbox_to_idx ON dev_mailbox (lower(to_email), created_at DESC);

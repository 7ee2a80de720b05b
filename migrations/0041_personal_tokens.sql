-- Personal access tokens (docs/api-reference.md#personal-access-tokens): `fgp_` + 64 hex. Only the
-- SHA-256 of the secret and its last four characters are stored; the secret is shown once.
CREATE TABLE personal_tokens (
  id                  text PRIMARY KEY,
  user_id             text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  name                text NOT NULL,
  tier                text NOT NULL CHECK (tier IN ('read', 'write', 'admin')),
  allow_owner_actions boolean NOT NULL DEFAULT false,
  secret_hash         text NOT NULL UNIQUE,
  last_four           text NOT NULL,
  expires_in_days     integer NOT NULL CHECK (expires_in_days IN (7, 30, 90, 180, 365)),
  expires_at          timestamptz NOT NULL,
  created_at          timestamptz NOT NULL DEFAULT now(),
  last_used_at        timestamptz,
  revoked_at          timestamptz,
  -- Rotation chain: the token this one replaced.
  rotated_from        text REFERENCES personal_tokens (id) ON DELETE SET NULL,
  CHECK (NOT allow_owner_actions OR tier = 'admin')
);
CREATE INDEX personal_tokens_user_idx ON personal_tokens (user_id, created_at DESC);

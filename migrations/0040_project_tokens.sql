-- Project API tokens (docs/api-reference.md#project-api-tokens): opaque `fgr_` secrets and JWT
-- token families.

-- One row per token the project owns. An opaque token stores only the SHA-256 of its secret;
-- a JWT row is a token *family*: the access/refresh pairs issued for it live in
-- project_token_jwts. `scopes` is the one normalised grant list (opaque permissions map onto
-- read/write/delete, see api/auth/permissions.ts).
CREATE TABLE project_tokens (
  id           text PRIMARY KEY,
  project_id   text NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
  name         text NOT NULL,
  token_type   text NOT NULL CHECK (token_type IN ('opaque', 'jwt')),
  secret_hash  text UNIQUE,
  scopes       jsonb NOT NULL,
  -- Opaque: the optional expiry given at creation. JWT: when the newest refresh token expires,
  -- i.e. the last moment the family can still be refreshed.
  expires_at   timestamptz,
  created_by   text REFERENCES users (id) ON DELETE SET NULL,
  created_at   timestamptz NOT NULL DEFAULT now(),
  last_used_at timestamptz,
  revoked_at   timestamptz,
  revoked_reason text,
  CHECK ((token_type = 'opaque') = (secret_hash IS NOT NULL))
);
CREATE INDEX project_tokens_project_idx ON project_tokens (project_id, created_at DESC);
CREATE INDEX project_tokens_creator_idx ON project_tokens (created_by, created_at DESC);

-- Every JWT ever issued, by `jti`. This is also the durable revocation list: a row with
-- `revoked_at` set is refused until `expires_at`, and rows past `expires_at` are swept (the
-- signature check refuses them anyway). Redis holds a mirror of the revoked jtis with a TTL
-- up to the original expiry and is rebuilt from here when it loses them.
CREATE TABLE project_token_jwts (
  jti          text PRIMARY KEY,
  token_id     text NOT NULL REFERENCES project_tokens (id) ON DELETE CASCADE,
  kind         text NOT NULL CHECK (kind IN ('access', 'refresh')),
  issued_at    timestamptz NOT NULL DEFAULT now(),
  expires_at   timestamptz NOT NULL,
  -- Refresh tokens are single use: set when exchanged; presenting it again is reuse.
  consumed_at  timestamptz,
  revoked_at   timestamptz
);
CREATE INDEX project_token_jwts_token_idx ON project_token_jwts (token_id);
CREATE INDEX project_token_jwts_revoked_idx ON project_token_jwts (expires_at) WHERE revoked_at IS NOT NULL;
CREATE INDEX project_token_jwts_expiry_idx ON project_token_jwts (expires_at);

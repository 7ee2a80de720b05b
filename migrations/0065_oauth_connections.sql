-- OAuth 2.1 for MCP clients (docs/api-reference.md#connector-tokens,
-- docs/api-reference.md#oauth-and-mcp): dynamically registered public clients, one-time
-- authorization codes, and connections (one consent of a user to a client) whose connector tokens
-- `mcp_` + 64 hex are stored as SHA-256 only.
CREATE TABLE oauth_clients (
  id             text PRIMARY KEY,
  client_name    text NOT NULL,
  redirect_uris  text[] NOT NULL CHECK (cardinality(redirect_uris) BETWEEN 1 AND 10),
  client_uri     text,
  created_at     timestamptz NOT NULL DEFAULT now()
);

-- A code lives 60 s and is consumed once (used_at); only its hash is kept.
CREATE TABLE oauth_authorization_codes (
  code_hash       text PRIMARY KEY,
  client_id       text NOT NULL REFERENCES oauth_clients (id) ON DELETE CASCADE,
  user_id         text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  redirect_uri    text NOT NULL,
  code_challenge  text NOT NULL,
  project_ids     text[] NOT NULL CHECK (cardinality(project_ids) >= 1),
  scope           text NOT NULL CHECK (scope IN ('read', 'write')),
  resource        text,
  expires_at      timestamptz NOT NULL,
  used_at         timestamptz,
  created_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX oauth_authorization_codes_expiry_idx ON oauth_authorization_codes (expires_at);

-- What the user consented to; revoking it ends every token issued under it.
CREATE TABLE oauth_connections (
  id            text PRIMARY KEY,
  user_id       text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  client_id     text NOT NULL REFERENCES oauth_clients (id) ON DELETE CASCADE,
  project_ids   text[] NOT NULL,
  scope         text NOT NULL CHECK (scope IN ('read', 'write')),
  created_at    timestamptz NOT NULL DEFAULT now(),
  last_used_at  timestamptz,
  revoked_at    timestamptz
);
CREATE INDEX oauth_connections_user_idx ON oauth_connections (user_id, created_at DESC);

CREATE TABLE oauth_access_tokens (
  token_hash     text PRIMARY KEY,
  id             text NOT NULL UNIQUE,
  connection_id  text NOT NULL REFERENCES oauth_connections (id) ON DELETE CASCADE,
  expires_at     timestamptz NOT NULL,
  created_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX oauth_access_tokens_connection_idx ON oauth_access_tokens (connection_id);

-- Rotation: each refresh consumes its token (used_at) and issues a new pair; presenting a used
-- one again is treated as theft and revokes the whole connection.
CREATE TABLE oauth_refresh_tokens (
  token_hash     text PRIMARY KEY,
  connection_id  text NOT NULL REFERENCES oauth_connections (id) ON DELETE CASCADE,
  expires_at     timestamptz NOT NULL,
  used_at        timestamptz,
  created_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX oauth_refresh_tokens_connection_idx ON oauth_refresh_tokens (connection_id);

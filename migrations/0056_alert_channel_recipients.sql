-- E-mail alert channels mail a recipient only after that address confirmed, once, through a
-- mailed single-use token (only its SHA-256 is kept). Without it anyone could aim alerts, and
-- the test button, at any inbox.
CREATE TABLE alert_channel_recipients (
  channel_id    text NOT NULL REFERENCES alert_channels (id) ON DELETE CASCADE,
  email         text NOT NULL,
  token_hash    text NOT NULL UNIQUE,
  confirmed_at  timestamptz,
  created_at    timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (channel_id, email)
);

-- Recipients of channels made before confirmations existed keep receiving: an owner or admin
-- chose them, and nobody could confirm them now (their placeholder hash matches no token).
INSERT INTO alert_channel_recipients (channel_id, email, token_hash, confirmed_at)
SELECT c.id, r.email, 'grandfathered:' || c.id || ':' || r.email, now()
FROM alert_channels c, jsonb_array_elements_text(c.config -> 'recipients') AS r (email)
WHERE c.type = 'email';

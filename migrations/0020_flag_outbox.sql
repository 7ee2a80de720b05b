-- Transactional outbox for flag changes (docs/architecture.md#data-flow).
-- FlagService inserts one row in the same transaction as the flag row, its version snapshot and
-- its audit entry; the outbox relay publishes committed rows to the bus and runs the registered
-- consumers, then marks them completed.
--
-- `seq` orders events; a transaction may commit after one with a higher seq, so the relay scans
-- everything not completed (never "seq > last seen"). Per flag (service, environment, key) the row
-- lock taken by every write makes seq order equal commit order, and the relay never publishes an
-- event to the bus while an earlier one of the same flag is still unpublished.
CREATE TABLE flag_outbox (
  seq          bigserial PRIMARY KEY,
  id           text NOT NULL UNIQUE,
  project_id   text NOT NULL,
  service_id   text NOT NULL,
  environment  text NOT NULL,
  flag_key     text NOT NULL,
  event        text NOT NULL,
  payload      jsonb NOT NULL,
  created_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
  -- When a relay may (re)claim the row: now for new rows, lease expiry while claimed, backoff after a failure.
  available_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  claimed_by   text,
  attempts     integer NOT NULL DEFAULT 0,
  last_error   text,
  -- Set once the bus publish succeeded: a retry for a failed consumer never publishes again.
  published_at timestamptz,
  -- Consumers that already handled the event (by name), skipped on retry.
  consumers_done text[] NOT NULL DEFAULT '{}',
  -- Bus publish and every consumer succeeded.
  completed_at timestamptz
);
CREATE INDEX flag_outbox_pending_idx ON flag_outbox (seq) WHERE completed_at IS NULL;
CREATE INDEX flag_outbox_unpublished_stream_idx ON flag_outbox (service_id, environment, flag_key, seq) WHERE published_at IS NULL;
CREATE INDEX flag_outbox_completed_idx ON flag_outbox (completed_at) WHERE completed_at IS NOT NULL;

-- Each outbox consumer (the bus publish, webhook dispatch, ...) keeps its own progress:
-- one slow or failing consumer delays only itself, never every SDK's view of a flag.
--
-- A writer inserts, with each event and in the same transaction, one pending row per registered
-- consumer. A consumer's relay claims its own rows (SKIP LOCKED, leased by `available_at`), runs
-- the consumer and deletes the row when it succeeded, or gives it back with a backoff when it
-- failed. Per flag, a consumer never gets an event while an earlier one of that flag is still
-- pending for it elsewhere, so each consumer sees each flag's events in order. Events below the
-- lowest pending seq of every consumer have reached them all: kept for the retention, then pruned
-- (so pending rows need no foreign key to flag_outbox, and writers pay for no such check).
--
-- A consumer first registers (outbox_consumers) when a relay starts with it, and from then on
-- receives every event committed after that. Retiring one is deleting its row here and its
-- pending rows; until then its pending rows keep their events from being pruned. (No foreign key
-- to outbox_consumers: every flag write would take a share lock on the same few rows.)
CREATE TABLE outbox_consumers (
  name          text PRIMARY KEY,
  registered_at timestamptz NOT NULL DEFAULT clock_timestamp()
);

CREATE TABLE flag_outbox_pending (
  consumer     text NOT NULL,
  seq          bigint NOT NULL,
  -- The event's flag, copied so the in-order check needs no join.
  service_id   text NOT NULL,
  environment  text NOT NULL,
  flag_key     text NOT NULL,
  -- When a relay may (re)claim the row: now for new rows, lease expiry while claimed, backoff after a failure.
  available_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  claimed_by   text,
  attempts     integer NOT NULL DEFAULT 0,
  last_error   text,
  created_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
  PRIMARY KEY (consumer, seq)
);
CREATE INDEX flag_outbox_pending_stream_idx ON flag_outbox_pending (consumer, service_id, environment, flag_key, seq);

-- The two consumers that existed, and the work they had not done yet.
INSERT INTO outbox_consumers (name) VALUES ('bus'), ('webhooks');
INSERT INTO flag_outbox_pending (consumer, seq, service_id, environment, flag_key)
  SELECT 'bus', seq, service_id, environment, flag_key FROM flag_outbox WHERE published_at IS NULL;
INSERT INTO flag_outbox_pending (consumer, seq, service_id, environment, flag_key)
  SELECT 'webhooks', seq, service_id, environment, flag_key FROM flag_outbox
  WHERE completed_at IS NULL AND NOT ('webhooks' = ANY (consumers_done));

-- The event table keeps only the events; the per-relay state moved to the rows above.
ALTER TABLE flag_outbox
  DROP COLUMN available_at,
  DROP COLUMN claimed_by,
  DROP COLUMN attempts,
  DROP COLUMN last_error,
  DROP COLUMN published_at,
  DROP COLUMN consumers_done,
  DROP COLUMN completed_at;
CREATE INDEX flag_outbox_created_idx ON flag_outbox (created_at);

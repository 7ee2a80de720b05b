-- Outbound delivery: project webhooks (docs/api-reference.md#webhooks), organization alert
-- channels (docs/api-reference.md#organizations) and the log of every delivery made to either, one
-- row per Temporal delivery workflow.

CREATE TABLE webhooks (
  id          text PRIMARY KEY,
  project_id  text NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
  url         text NOT NULL,
  -- Needed in clear to sign every delivery (HMAC); never returned by the API after creation.
  secret      text NOT NULL,
  events      jsonb NOT NULL,
  active      boolean NOT NULL DEFAULT true,
  created_by  text REFERENCES users (id) ON DELETE SET NULL,
  created_at  timestamptz NOT NULL DEFAULT now(),
  updated_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhooks_project_idx ON webhooks (project_id, created_at, id);

-- `config` holds the per-type destination (url, routingKey, recipients, secret); secrets in it
-- are never returned by the API.
CREATE TABLE alert_channels (
  id          text PRIMARY KEY,
  org_id      text NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
  name        text NOT NULL,
  type        text NOT NULL CHECK (type IN ('chat', 'paging', 'email', 'webhook')),
  config      jsonb NOT NULL,
  enabled     boolean NOT NULL DEFAULT true,
  created_by  text REFERENCES users (id) ON DELETE SET NULL,
  created_at  timestamptz NOT NULL DEFAULT now(),
  updated_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX alert_channels_org_idx ON alert_channels (org_id, created_at, id);

-- `id` is the Temporal workflow id, derived from (target, event): starting the same delivery
-- twice finds this row and the running or finished workflow, never a second delivery.
-- `body` is the exact byte string every attempt sends (and signs).
CREATE TABLE outbound_deliveries (
  id                text PRIMARY KEY,
  webhook_id        text REFERENCES webhooks (id) ON DELETE CASCADE,
  alert_channel_id  text REFERENCES alert_channels (id) ON DELETE CASCADE,
  event             text NOT NULL,
  event_id          text NOT NULL,
  flag_key          text,
  body              text NOT NULL,
  max_attempts      integer NOT NULL DEFAULT 4,
  status            text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'failed', 'skipped')),
  attempt_count     integer NOT NULL DEFAULT 0,
  last_status_code  integer,
  last_error        text,
  created_at        timestamptz NOT NULL DEFAULT clock_timestamp(),
  completed_at      timestamptz,
  CHECK ((webhook_id IS NULL) <> (alert_channel_id IS NULL))
);
CREATE INDEX outbound_deliveries_webhook_idx ON outbound_deliveries (webhook_id, created_at DESC, id DESC) WHERE webhook_id IS NOT NULL;
CREATE INDEX outbound_deliveries_channel_idx ON outbound_deliveries (alert_channel_id, created_at DESC) WHERE alert_channel_id IS NOT NULL;

-- One row per HTTP attempt; (delivery, attempt) keys it so a retried recording is idempotent.
CREATE TABLE outbound_delivery_attempts (
  delivery_id  text NOT NULL REFERENCES outbound_deliveries (id) ON DELETE CASCADE,
  attempt      integer NOT NULL,
  outcome      text NOT NULL CHECK (outcome IN ('delivered', 'retry', 'failed', 'skipped')),
  status_code  integer,
  error        text,
  duration_ms  integer,
  started_at   timestamptz NOT NULL,
  PRIMARY KEY (delivery_id, attempt)
);

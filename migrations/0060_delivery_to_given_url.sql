-- Deliveries to an address given with the request itself (analytics export): no webhook or
-- alert channel row; the URL and the optional signing secret travel with the delivery. The
-- secret is cleared when the delivery settles (api/features/webhooks/deliveries.ts).
ALTER TABLE outbound_deliveries ADD COLUMN target_url text, ADD COLUMN signing_secret text;
ALTER TABLE outbound_deliveries DROP CONSTRAINT outbound_deliveries_check;
ALTER TABLE outbound_deliveries ADD CONSTRAINT outbound_deliveries_one_target
  CHECK (num_nonnulls(webhook_id, alert_channel_id, target_url) = 1);

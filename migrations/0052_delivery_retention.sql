-- Finished deliveries are pruned after the retention period (DeliveryQueue); this index keeps
-- that sweep cheap.
CREATE INDEX outbound_deliveries_finished_idx ON outbound_deliveries (completed_at) WHERE completed_at IS NOT NULL;

-- Public demo services (docs/api-reference.md#demo-service). A service listed here (or named in
-- DEMO_SERVICE_IDS) accepts unauthenticated list reads, evaluation and `enabled`-only bulk
-- writes. Kept in the database so every replica agrees on the services seeded at start; the
-- configured ids are not stored (every replica reads the same configuration).
CREATE TABLE demo_services (
  service_id text PRIMARY KEY REFERENCES services (id) ON DELETE CASCADE,
  -- How the service became a demo service: 'seed' = created by the embedded profile's first start.
  source     text NOT NULL DEFAULT 'seed' CHECK (source IN ('seed', 'manual')),
  created_at timestamptz NOT NULL DEFAULT now()
);

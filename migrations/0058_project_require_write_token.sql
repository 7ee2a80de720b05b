-- Browser ingestion (docs/api-reference.md#browser-analytics): a project may require every event
-- posted to {ingest_url}/e for its services to carry X-Write-Token (one of its API tokens with
-- `write`). Off by default: a page's script cannot keep a secret, so most sites post without one.
ALTER TABLE projects ADD COLUMN require_write_token boolean NOT NULL DEFAULT false;

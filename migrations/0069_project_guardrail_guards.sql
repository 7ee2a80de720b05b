-- Prometheus guards of the production guardrail (docs/guardrails.md#prometheus-guards): asked at
-- every check of a watched change, in the shape of api/domain/guards.ts GuardsSchema.
ALTER TABLE projects ADD COLUMN guardrail_guards jsonb NOT NULL DEFAULT '[]'::jsonb;

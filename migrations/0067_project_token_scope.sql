-- Bound project API tokens (docs/api-reference.md#project-api-tokens): a token may be bound to one
-- service and environment at creation; it then reads only those (evaluation and SDK routes).
-- Both columns are set together or not at all. No foreign key: a token bound to a deleted service
-- stays listed and revocable, and simply finds no service to read.
ALTER TABLE project_tokens
  ADD COLUMN scope_service_id  text,
  ADD COLUMN scope_environment text CHECK (scope_environment IN ('development', 'staging', 'production')),
  ADD CONSTRAINT project_tokens_scope_whole CHECK ((scope_service_id IS NULL) = (scope_environment IS NULL));

-- Automatic guardrail after production changes (docs/guardrails.md): every toggle or serving
-- change of a production flag is watched for guardrail_window_minutes, then judged like the
-- auto-rollback endpoint. With guardrail_auto_rollback a tripped check rolls the change back;
-- without it the verdict is only recorded and the alert channels are notified.
ALTER TABLE projects
  ADD COLUMN guardrail_auto_rollback boolean NOT NULL DEFAULT true,
  ADD COLUMN guardrail_window_minutes integer NOT NULL DEFAULT 15 CHECK (guardrail_window_minutes BETWEEN 1 AND 1440);

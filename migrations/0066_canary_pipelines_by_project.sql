-- GET /api/projects/{id}/canaries lists a project's pipelines, active first, newest first.
CREATE INDEX canary_pipelines_project_idx ON canary_pipelines (project_id, created_at DESC);

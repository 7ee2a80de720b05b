import type { Sql } from '../../infra/postgres';
import type { Queryable } from '../../infra/postgres';
import type { CanaryConfig, CanaryHealth, CanaryStage, CanaryState, CanaryStatus } from '../../../workflows/messages';

/** A canary pipeline as stored (migration 0061) and, shaped by toRecord, as the API answers it. */
export interface CanaryPipeline {
  id: string;
  projectId: string;
  flagId: string;
  flagKey: string;
  serviceId: string;
  environment: string;
  ruleId: string;
  status: CanaryStatus;
  config: CanaryConfig;
  preCanaryVersion: number;
  currentStage: CanaryStage | null;
  completedStages: CanaryStage[];
  soakEndsAt: string | null;
  health: CanaryHealth;
  statusReason: string | null;
  workflowId: string;
  createdAt: string;
  updatedAt: string;
}

interface PipelineRow {
  id: string;
  project_id: string;
  flag_id: string;
  flag_key: string;
  service_id: string;
  environment: string;
  rule_id: string;
  status: CanaryStatus;
  config: CanaryConfig;
  pre_canary_version: number;
  current_stage: CanaryStage | null;
  completed_stages: CanaryStage[];
  soak_ends_at: Date | null;
  health: CanaryHealth;
  status_reason: string | null;
  workflow_id: string;
  created_at: Date;
  updated_at: Date;
}

const toPipeline = (r: PipelineRow): CanaryPipeline => ({
  id: r.id,
  projectId: r.project_id,
  flagId: r.flag_id,
  flagKey: r.flag_key,
  serviceId: r.service_id,
  environment: r.environment,
  ruleId: r.rule_id,
  status: r.status,
  config: r.config,
  preCanaryVersion: r.pre_canary_version,
  currentStage: r.current_stage,
  completedStages: r.completed_stages,
  soakEndsAt: r.soak_ends_at?.toISOString() ?? null,
  health: r.health,
  statusReason: r.status_reason,
  workflowId: r.workflow_id,
  createdAt: r.created_at.toISOString(),
  updatedAt: r.updated_at.toISOString(),
});

export const ACTIVE_STATUSES: readonly CanaryStatus[] = ['running', 'paused'];

export type NewPipeline = Pick<CanaryPipeline, 'id' | 'projectId' | 'flagId' | 'flagKey' | 'serviceId' | 'environment' | 'ruleId' | 'config' | 'preCanaryVersion' | 'workflowId'> & {
  createdByActor: string;
};

export class CanaryStore {
  constructor(private readonly sql: Sql) {}

  /** Inserts a running pipeline; a unique violation (23505) when the flag already has an active one. */
  async insert(p: NewPipeline, db: Queryable = this.sql): Promise<CanaryPipeline> {
    const health: CanaryHealth = { status: 'pending', checkedAt: null, gate: null };
    const [row] = await db<PipelineRow[]>`
      INSERT INTO canary_pipelines (id, project_id, flag_id, service_id, environment, flag_key, rule_id, status, config, pre_canary_version, health, workflow_id, created_by_actor)
      VALUES (${p.id}, ${p.projectId}, ${p.flagId}, ${p.serviceId}, ${p.environment}, ${p.flagKey}, ${p.ruleId}, 'running',
              ${db.json(p.config as never)}, ${p.preCanaryVersion}, ${db.json(health as never)}, ${p.workflowId}, ${p.createdByActor})
      RETURNING *`;
    return toPipeline(row);
  }

  /** The flag's active pipeline, else its latest one; null when it never had one. */
  async activeOrLatest(serviceId: string, environment: string, flagKey: string): Promise<CanaryPipeline | null> {
    const [row] = await this.sql<PipelineRow[]>`
      SELECT * FROM canary_pipelines WHERE service_id = ${serviceId} AND environment = ${environment} AND flag_key = ${flagKey}
      ORDER BY (status IN ('running', 'paused')) DESC, created_at DESC, id DESC LIMIT 1`;
    return row ? toPipeline(row) : null;
  }

  /** A project's pipelines, active ones first, then newest first; only active ones when asked. */
  async listForProject(projectId: string, opts: { activeOnly: boolean; limit: number }): Promise<CanaryPipeline[]> {
    const rows = await this.sql<PipelineRow[]>`
      SELECT * FROM canary_pipelines
      WHERE project_id = ${projectId} ${opts.activeOnly ? this.sql`AND status IN ('running', 'paused')` : this.sql``}
      ORDER BY (status IN ('running', 'paused')) DESC, created_at DESC, id DESC LIMIT ${opts.limit}`;
    return rows.map(toPipeline);
  }

  async find(id: string): Promise<CanaryPipeline | null> {
    const [row] = await this.sql<PipelineRow[]>`SELECT * FROM canary_pipelines WHERE id = ${id}`;
    return row ? toPipeline(row) : null;
  }

  /** The workflow's state, whole: writing the same state twice leaves the same record. */
  async saveState(id: string, state: CanaryState): Promise<void> {
    await this.sql`
      UPDATE canary_pipelines SET status = ${state.status}, current_stage = ${state.currentStage ? this.sql.json(state.currentStage as never) : null},
        completed_stages = ${this.sql.json(state.completedStages as never)}, soak_ends_at = ${state.soakEndsAt},
        health = ${this.sql.json(state.health as never)}, status_reason = ${state.statusReason}, updated_at = now()
      WHERE id = ${id}`;
  }

  /** Ends a pipeline whose workflow never started (the start failed after the insert) or is gone. */
  async markEnded(id: string, reason: string): Promise<void> {
    await this.sql`UPDATE canary_pipelines SET status = 'aborted', status_reason = ${reason}, updated_at = now() WHERE id = ${id}`;
  }
}

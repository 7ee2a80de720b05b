import { conflict, isUniqueViolation } from '../../http/errors';
import type { Queryable } from '../../infra/postgres';
import type { CanaryConfig, CanaryHealth, CanaryRecord, CanaryStage, CanaryState, CanaryStatus } from '../../domain/canary';

/**
 * A canary pipeline as stored (migration 0061): the record the API answers without its computed
 * remainingSoakSeconds, plus what only the server sees.
 */
export type CanaryPipeline = Omit<CanaryRecord, 'remainingSoakSeconds'> & {
  projectId: string;
  flagId: string;
  preCanaryVersion: number;
  soakEndsAt: string | null;
  workflowId: string;
};

interface PipelineRow {
  id: string;
  project_id: string;
  flag_id: string;
  flag_key: string;
  service_id: string;
  environment: CanaryRecord['environment'];
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

export type NewPipeline = Pick<CanaryPipeline, 'id' | 'projectId' | 'flagId' | 'flagKey' | 'serviceId' | 'environment' | 'ruleId' | 'config' | 'preCanaryVersion' | 'workflowId'> & {
  createdByActor: string;
};

export const activePipelineExists = (flagKey: string, environment: string) => conflict(`Flag "${flagKey}" already has an active canary pipeline in ${environment}`);

/** The canary_pipelines table. Every method runs in the pool or transaction its caller hands it. */
export class CanaryStore {
  /** Inserts a running pipeline; 409 when the flag already has an active one (the partial unique index). */
  async insert(db: Queryable, p: NewPipeline): Promise<CanaryPipeline> {
    const health: CanaryHealth = { status: 'pending', checkedAt: null, gate: null };
    try {
      const [row] = await db<PipelineRow[]>`
        INSERT INTO canary_pipelines (id, project_id, flag_id, service_id, environment, flag_key, rule_id, status, config, pre_canary_version, health, workflow_id, created_by_actor)
        VALUES (${p.id}, ${p.projectId}, ${p.flagId}, ${p.serviceId}, ${p.environment}, ${p.flagKey}, ${p.ruleId}, 'running',
                ${db.json(p.config as never)}, ${p.preCanaryVersion}, ${db.json(health as never)}, ${p.workflowId}, ${p.createdByActor})
        RETURNING *`;
      return toPipeline(row);
    } catch (error) {
      if (isUniqueViolation(error)) throw activePipelineExists(p.flagKey, p.environment);
      throw error;
    }
  }

  /** The flag's active pipeline, else its latest one; null when it never had one. */
  async activeOrLatest(db: Queryable, serviceId: string, environment: string, flagKey: string): Promise<CanaryPipeline | null> {
    const [row] = await db<PipelineRow[]>`
      SELECT * FROM canary_pipelines WHERE service_id = ${serviceId} AND environment = ${environment} AND flag_key = ${flagKey}
      ORDER BY (status IN ('running', 'paused')) DESC, created_at DESC, id DESC LIMIT 1`;
    return row ? toPipeline(row) : null;
  }

  /** A project's pipelines, active ones first, then newest first; only active ones when asked. */
  async listForProject(db: Queryable, projectId: string, opts: { activeOnly: boolean; limit: number }): Promise<CanaryPipeline[]> {
    const rows = await db<PipelineRow[]>`
      SELECT * FROM canary_pipelines
      WHERE project_id = ${projectId} ${opts.activeOnly ? db`AND status IN ('running', 'paused')` : db``}
      ORDER BY (status IN ('running', 'paused')) DESC, created_at DESC, id DESC LIMIT ${opts.limit}`;
    return rows.map(toPipeline);
  }

  /** The workflow's state, whole: writing the same state twice leaves the same record. */
  async saveState(db: Queryable, id: string, state: CanaryState): Promise<void> {
    await db`
      UPDATE canary_pipelines SET status = ${state.status}, current_stage = ${state.currentStage ? db.json(state.currentStage as never) : null},
        completed_stages = ${db.json(state.completedStages as never)}, soak_ends_at = ${state.soakEndsAt},
        health = ${db.json(state.health as never)}, status_reason = ${state.statusReason}, updated_at = now()
      WHERE id = ${id}`;
  }

  /** Ends a pipeline whose workflow never started (the start failed after the insert) or is gone. */
  async markEnded(db: Queryable, id: string, reason: string): Promise<void> {
    await db`UPDATE canary_pipelines SET status = 'aborted', status_reason = ${reason}, updated_at = now() WHERE id = ${id}`;
  }
}

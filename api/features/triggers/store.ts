import type { Queryable, TransactionSql } from '../../infra/postgres';
import type { Environment } from '../../domain/environments';
import type { TriggerAction, TriggerRecord } from './types';

interface TriggerRow {
  id: string;
  flag_id: string;
  project_id: string;
  service_id: string;
  environment: Environment;
  flag_key: string;
  name: string;
  action: TriggerAction;
  created_by: string | null;
  created_at: Date;
  revoked_at: Date | null;
  last_executed_at: Date | null;
  execution_count: number;
}

const toTrigger = (r: TriggerRow): TriggerRecord => ({
  id: r.id,
  name: r.name,
  action: r.action,
  flagKey: r.flag_key,
  serviceId: r.service_id,
  environment: r.environment,
  projectId: r.project_id,
  createdBy: r.created_by,
  createdAt: r.created_at.toISOString(),
  lastExecutedAt: r.last_executed_at?.toISOString() ?? null,
  executionCount: r.execution_count,
  revokedAt: r.revoked_at?.toISOString() ?? null,
});

export class TriggerStore {
  async insert(
    db: Queryable,
    t: {
      id: string;
      flagId: string;
      projectId: string;
      serviceId: string;
      environment: Environment;
      flagKey: string;
      name: string;
      action: TriggerAction;
      tokenHash: string;
      createdBy: string | null;
      createdByActor: string;
    },
  ): Promise<TriggerRecord> {
    const [row] = await db<TriggerRow[]>`
      INSERT INTO flag_triggers (id, flag_id, project_id, service_id, environment, flag_key, name, action, token_hash, created_by, created_by_actor)
      VALUES (${t.id}, ${t.flagId}, ${t.projectId}, ${t.serviceId}, ${t.environment}, ${t.flagKey}, ${t.name}, ${t.action},
              ${t.tokenHash}, ${t.createdBy}, ${t.createdByActor})
      RETURNING *`;
    return toTrigger(row);
  }

  /** Active triggers of one flag key in a service, optionally one environment. */
  async listActive(db: Queryable, serviceId: string, flagKey: string, environment?: Environment): Promise<TriggerRecord[]> {
    const rows = environment
      ? await db<TriggerRow[]>`
          SELECT * FROM flag_triggers
          WHERE service_id = ${serviceId} AND flag_key = ${flagKey} AND environment = ${environment} AND revoked_at IS NULL
          ORDER BY created_at, id`
      : await db<TriggerRow[]>`
          SELECT * FROM flag_triggers
          WHERE service_id = ${serviceId} AND flag_key = ${flagKey} AND revoked_at IS NULL
          ORDER BY created_at, id`;
    return rows.map(toTrigger);
  }

  /** Active triggers of every flag of a service, by flag key (the flag index leads with service_id). */
  async listActiveInService(db: Queryable, serviceId: string, limit: number): Promise<TriggerRecord[]> {
    const rows = await db<TriggerRow[]>`
      SELECT * FROM flag_triggers
      WHERE service_id = ${serviceId} AND revoked_at IS NULL
      ORDER BY flag_key, created_at, id
      LIMIT ${limit}`;
    return rows.map(toTrigger);
  }

  /** With forUpdate, the row stays locked until the transaction ends. */
  findById(tx: TransactionSql, id: string, opts: { forUpdate: true }): Promise<TriggerRecord | null>;
  findById(db: Queryable, id: string): Promise<TriggerRecord | null>;
  async findById(db: Queryable, id: string, opts: { forUpdate?: boolean } = {}): Promise<TriggerRecord | null> {
    const [row] = opts.forUpdate
      ? await db<TriggerRow[]>`SELECT * FROM flag_triggers WHERE id = ${id} FOR UPDATE`
      : await db<TriggerRow[]>`SELECT * FROM flag_triggers WHERE id = ${id}`;
    return row ? toTrigger(row) : null;
  }

  async findActiveByTokenHash(db: Queryable, tokenHash: string): Promise<TriggerRecord | null> {
    const [row] = await db<TriggerRow[]>`SELECT * FROM flag_triggers WHERE token_hash = ${tokenHash} AND revoked_at IS NULL`;
    return row ? toTrigger(row) : null;
  }

  async revoke(db: Queryable, id: string): Promise<TriggerRecord | null> {
    const [row] = await db<TriggerRow[]>`
      UPDATE flag_triggers SET revoked_at = now() WHERE id = ${id} AND revoked_at IS NULL RETURNING *`;
    return row ? toTrigger(row) : null;
  }

  async markExecuted(db: Queryable, id: string): Promise<void> {
    await db`UPDATE flag_triggers SET execution_count = execution_count + 1, last_executed_at = now() WHERE id = ${id}`;
  }
}

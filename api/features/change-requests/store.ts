import type { Queryable, TransactionSql } from '../../infra/postgres';
import type { ChangeRequestStatus, Impact, Review, StoredFlagChange } from './schema';

/** A change request as stored (the answer adds what is derived: requirements, conflicts, actions). */
export interface StoredChangeRequest {
  id: string;
  projectId: string;
  status: ChangeRequestStatus;
  title: string;
  description: string | null;
  changes: StoredFlagChange[];
  approvals: (Review & { revision: number })[];
  rejection: Review | null;
  impact: Impact[];
  createdBy: string | null;
  createdByName: string;
  scheduledAt: string | null;
  failureReason: string | null;
  appliedAt: string | null;
  revision: number;
  createdAt: string;
  updatedAt: string;
}

interface Row {
  id: string;
  project_id: string;
  status: ChangeRequestStatus;
  title: string;
  description: string | null;
  changes: StoredFlagChange[];
  approvals: StoredChangeRequest['approvals'];
  rejection: Review | null;
  impact: Impact[];
  created_by: string | null;
  created_by_name: string;
  scheduled_at: Date | null;
  failure_reason: string | null;
  applied_at: Date | null;
  revision: number;
  created_at: Date;
  updated_at: Date;
}

const iso = (d: Date | null) => (d ? d.toISOString() : null);

function toRecord(r: Row): StoredChangeRequest {
  return {
    id: r.id,
    projectId: r.project_id,
    status: r.status,
    title: r.title,
    description: r.description,
    changes: r.changes,
    approvals: r.approvals,
    rejection: r.rejection,
    impact: r.impact,
    createdBy: r.created_by,
    createdByName: r.created_by_name,
    scheduledAt: iso(r.scheduled_at),
    failureReason: r.failure_reason,
    appliedAt: iso(r.applied_at),
    revision: r.revision,
    createdAt: r.created_at.toISOString(),
    updatedAt: r.updated_at.toISOString(),
  };
}

/** What an update may set; the store bumps updated_at (and the revision when asked). */
export type ChangeRequestUpdate = Partial<Pick<StoredChangeRequest, 'status' | 'title' | 'description' | 'changes' | 'approvals' | 'rejection' | 'impact' | 'scheduledAt' | 'failureReason'>> & {
  applied?: boolean;
  newRevision?: boolean;
};

/** The `change_requests` table. Holds no connection: each method runs in the `db` it is given. */
export class ChangeRequestStore {
  async insert(tx: TransactionSql, r: Omit<StoredChangeRequest, 'approvals' | 'rejection' | 'failureReason' | 'appliedAt' | 'revision' | 'createdAt' | 'updatedAt'>): Promise<StoredChangeRequest> {
    const [row] = await tx<Row[]>`
      INSERT INTO change_requests (id, project_id, status, title, description, changes, impact, created_by, created_by_name, scheduled_at)
      VALUES (${r.id}, ${r.projectId}, ${r.status}, ${r.title}, ${r.description}, ${tx.json(r.changes as never)}, ${tx.json(r.impact as never)},
              ${r.createdBy}, ${r.createdByName}, ${r.scheduledAt})
      RETURNING *`;
    return toRecord(row);
  }

  async find(db: Queryable, projectId: string, id: string): Promise<StoredChangeRequest | null> {
    const [row] = await db<Row[]>`SELECT * FROM change_requests WHERE id = ${id} AND project_id = ${projectId}`;
    return row ? toRecord(row) : null;
  }

  /** By id alone: for the scheduled apply, which knows no project. */
  async findById(db: Queryable, id: string): Promise<StoredChangeRequest | null> {
    const [row] = await db<Row[]>`SELECT * FROM change_requests WHERE id = ${id}`;
    return row ? toRecord(row) : null;
  }

  /** Reads and locks the request until the transaction ends: its steps run one at a time. */
  async lock(tx: TransactionSql, id: string): Promise<StoredChangeRequest | null> {
    const [row] = await tx<Row[]>`SELECT * FROM change_requests WHERE id = ${id} FOR UPDATE`;
    return row ? toRecord(row) : null;
  }

  /** Newest first. */
  async list(db: Queryable, projectId: string, status: ChangeRequestStatus | undefined, limit: number, offset: number): Promise<{ requests: StoredChangeRequest[]; total: number }> {
    const where = status ? db`project_id = ${projectId} AND status = ${status}` : db`project_id = ${projectId}`;
    const [rows, [count]] = await Promise.all([
      db<Row[]>`SELECT * FROM change_requests WHERE ${where} ORDER BY created_at DESC, id DESC LIMIT ${limit} OFFSET ${offset}`,
      db<{ total: number }[]>`SELECT count(*)::int AS total FROM change_requests WHERE ${where}`,
    ]);
    return { requests: rows.map(toRecord), total: count.total };
  }

  async update(tx: TransactionSql, id: string, set: ChangeRequestUpdate): Promise<StoredChangeRequest> {
    const has = (field: keyof ChangeRequestUpdate) => set[field] !== undefined;
    const json = (value: unknown) => tx.json(value as never);
    const [row] = await tx<Row[]>`
      UPDATE change_requests SET
        status = ${has('status') ? set.status! : tx`status`},
        title = ${has('title') ? set.title! : tx`title`},
        description = ${has('description') ? set.description! : tx`description`},
        changes = ${has('changes') ? json(set.changes) : tx`changes`},
        approvals = ${has('approvals') ? json(set.approvals) : tx`approvals`},
        rejection = ${has('rejection') ? (set.rejection === null ? null : json(set.rejection)) : tx`rejection`},
        impact = ${has('impact') ? json(set.impact) : tx`impact`},
        scheduled_at = ${has('scheduledAt') ? set.scheduledAt! : tx`scheduled_at`},
        failure_reason = ${has('failureReason') ? set.failureReason! : tx`failure_reason`},
        applied_at = ${set.applied ? tx`clock_timestamp()` : tx`applied_at`},
        revision = revision + ${set.newRevision ? 1 : 0},
        updated_at = clock_timestamp()
      WHERE id = ${id}
      RETURNING *`;
    return toRecord(row);
  }
}

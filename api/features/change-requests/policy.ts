import type { Environment } from '../../domain/environments';
import { ENVIRONMENTS } from '../../domain/environments';
import type { Queryable, TransactionSql } from '../../infra/postgres';
import type { ChangePolicy, EnvironmentPolicy } from './schema';

/** One project's policy by environment; an environment without an entry needs no approval. */
export type ProjectPolicy = Partial<Record<Environment, EnvironmentPolicy>>;

interface PolicyRow {
  project_id: string;
  environment: Environment;
  required_approvals: number;
  approver_roles: EnvironmentPolicy['approverRoles'];
  allow_self_approval: boolean;
  emergency_reduce: EnvironmentPolicy['emergencyReduce'];
}

/** An environment whose writes need approval. */
export function isProtected(policy: EnvironmentPolicy | undefined): policy is EnvironmentPolicy {
  return policy !== undefined && policy.requiredApprovals > 0;
}

/** The `change_policies` table (docs/change-requests.md#policy). */
export class ChangePolicyStore {
  async get(db: Queryable, projectId: string): Promise<ChangePolicy> {
    const policies = await this.forProjects(db, [projectId]);
    return { environments: policies.get(projectId) ?? {} };
  }

  /** The policies of the given projects (projects with none are absent). */
  async forProjects(db: Queryable, projectIds: readonly string[]): Promise<Map<string, ProjectPolicy>> {
    const byProject = new Map<string, ProjectPolicy>();
    if (!projectIds.length) return byProject;
    const rows = await db<PolicyRow[]>`
      SELECT project_id, environment, required_approvals, approver_roles, allow_self_approval, emergency_reduce
      FROM change_policies WHERE project_id = ANY(${db.array([...new Set(projectIds)])}::text[])`;
    for (const row of rows) {
      const policy = byProject.get(row.project_id) ?? {};
      policy[row.environment] = {
        requiredApprovals: row.required_approvals,
        approverRoles: row.approver_roles,
        allowSelfApproval: row.allow_self_approval,
        emergencyReduce: row.emergency_reduce,
      };
      byProject.set(row.project_id, policy);
    }
    return byProject;
  }

  /** Replaces the project's whole policy: environments left out lose their entry. */
  async put(tx: TransactionSql, projectId: string, policy: ChangePolicy): Promise<void> {
    await tx`DELETE FROM change_policies WHERE project_id = ${projectId}`;
    const rows = ENVIRONMENTS.flatMap((environment) => {
      const p = policy.environments[environment];
      return p ? [{ environment, ...p }] : [];
    });
    if (!rows.length) return;
    await tx`
      INSERT INTO change_policies (project_id, environment, required_approvals, approver_roles, allow_self_approval, emergency_reduce)
      SELECT ${projectId}, r->>'environment', (r->>'requiredApprovals')::int, r->'approverRoles', (r->>'allowSelfApproval')::boolean, r->>'emergencyReduce'
      FROM jsonb_array_elements(${tx.json(rows as never)}) AS r`;
  }
}

import { requireGrantable, type ProjectAccess } from '../../auth/access';
import { actingUser, type ProjectRole } from '../../auth/principal';
import { conflict, notFound } from '../../http/errors';
import type { Sql, TransactionSql } from '../../infra/postgres';
import { actorFromPrincipal, writeAudit } from '../audit/writer';
import type { Caller } from '../projects/common';
import { AlreadyMemberError, type MemberStore } from './store';
import type { MemberRecord } from './types';

export interface MemberServiceDeps {
  sql: Sql;
  access: ProjectAccess;
  store: MemberStore;
}

const lastOwner = () => conflict('The project must keep at least one owner; make another member owner first');
const changedMeanwhile = () => conflict('The membership changed while this request ran; reload and retry');

/**
 * Project membership (docs/api-reference.md#members-and-invitations). The routes check members:view
 * to list and leave and members:manage to change (access rules, members/routes.ts); anything that
 * grants, demotes, removes or transfers `owner` also needs members:owner (owners only, and an
 * owner-actions personal token). No token grants a role beyond what it holds itself
 * (requireGrantable). A project never loses its last owner.
 */
export class MemberService {
  constructor(private readonly deps: MemberServiceDeps) {}

  async list(projectId: string): Promise<MemberRecord[]> {
    return this.deps.store.list(this.deps.sql, projectId);
  }

  async add(caller: Caller, projectId: string, input: { userId: string; role: ProjectRole }): Promise<MemberRecord> {
    const { access, store, sql } = this.deps;
    if (input.role === 'owner') await access.require(caller.principal, projectId, 'members:owner');
    requireGrantable(caller.principal, input.role);
    if (!(await store.userExists(sql, input.userId))) throw notFound('User');
    try {
      return await sql.begin(async (tx) => {
        if (!(await store.lockProject(tx, projectId))) throw notFound('Project');
        const member = await store.insert(tx, projectId, input.userId, input.role);
        await this.audit(tx, caller, 'member.add', member, null, member);
        return member;
      });
    } catch (error) {
      if (error instanceof AlreadyMemberError) throw conflict('This user is already a member of the project; change their role instead');
      throw error;
    }
  }

  async changeRole(caller: Caller, projectId: string, userId: string, role: ProjectRole): Promise<MemberRecord> {
    const { access, store, sql } = this.deps;
    const target = await store.get(sql, projectId, userId);
    if (!target) throw notFound('Member');
    if (target.role === role) return target;
    if (target.role === 'owner' || role === 'owner') await access.require(caller.principal, projectId, 'members:owner');
    requireGrantable(caller.principal, role);
    return sql.begin(async (tx) => {
      await store.lockProject(tx, projectId);
      const current = await store.get(tx, projectId, userId, { forUpdate: true });
      if (!current) throw notFound('Member');
      // The owner check above was made for the role we read then; a different role now needs a new decision.
      if (current.role !== target.role) throw changedMeanwhile();
      if (current.role === 'owner' && (await store.countOwners(tx, projectId)) <= 1) throw lastOwner();
      const updated = await store.updateRole(tx, projectId, userId, role);
      await this.audit(tx, caller, 'member.role_change', updated, current, updated);
      return updated;
    });
  }

  /** Members may always leave a project themselves (members:view); removing others needs members:manage. */
  async remove(caller: Caller, projectId: string, userId: string): Promise<void> {
    const { access, store, sql } = this.deps;
    const self = actingUser(caller.principal)?.id === userId;
    const target = await store.get(sql, projectId, userId);
    if (!target) throw notFound('Member');
    if (target.role === 'owner') await access.require(caller.principal, projectId, 'members:owner');
    await sql.begin(async (tx) => {
      await store.lockProject(tx, projectId);
      const current = await store.get(tx, projectId, userId, { forUpdate: true });
      if (!current) throw notFound('Member');
      if (current.role !== target.role) throw changedMeanwhile();
      if (current.role === 'owner' && (await store.countOwners(tx, projectId)) <= 1) throw lastOwner();
      await store.delete(tx, projectId, userId);
      await this.audit(tx, caller, 'member.remove', current, current, null, self ? { selfRemoval: true } : undefined);
    });
  }

  private audit(
    tx: TransactionSql,
    caller: Caller,
    action: 'member.add' | 'member.role_change' | 'member.remove',
    member: MemberRecord,
    before: MemberRecord | null,
    after: MemberRecord | null,
    metadata?: Record<string, unknown>,
  ) {
    return writeAudit(tx, actorFromPrincipal(caller.principal, caller), {
      projectId: member.projectId,
      action,
      resourceType: 'member',
      resourceId: member.userId,
      resourceName: member.email,
      before: before && { userId: before.userId, email: before.email, role: before.role },
      after: after && { userId: after.userId, email: after.email, role: after.role },
      metadata,
    });
  }
}

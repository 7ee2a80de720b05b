import { randomBytes } from 'node:crypto';
import type { PersonalTokenTier, Principal, ProjectRole, TokenScope, UserRecord } from '../../api/auth/principal';
import type { TestApp, TestUser } from '../support/harness';

/**
 * Bearer credentials for tests of the projects area, independent of the token features: a
 * resolver with its own prefix hands the platform exactly the principal a real personal or
 * project token resolves to, so route policy and ProjectAccess see the real thing.
 */
export function testCredentials(app: TestApp) {
  const principals = new Map<string, Principal>();
  app.platform.authenticator.addResolver({
    accepts: (token) => token.startsWith('testcred_'),
    resolve: async (token) => principals.get(token) ?? null,
  });
  const issue = (principal: Principal) => {
    const token = `testcred_${randomBytes(12).toString('hex')}`;
    principals.set(token, principal);
    return token;
  };
  return {
    async personal(user: TestUser, tier: PersonalTokenTier, allowOwnerActions = false): Promise<string> {
      const record = await userRecord(app, user);
      return issue({ type: 'personal_access_token', tokenId: `pat_${randomBytes(4).toString('hex')}`, user: record, tier, allowOwnerActions });
    },
    project(projectId: string, scopes: TokenScope[], createdBy: string | null = null): string {
      return issue({ type: 'project_api_token', tokenId: `tok_${randomBytes(4).toString('hex')}`, tokenType: 'jwt', projectId, scopes, createdBy });
    },
  };
}

export async function userRecord(app: TestApp, user: TestUser): Promise<UserRecord> {
  const [row] = await app.platform.db.sql<{ id: string; email: string; name: string; email_verified: boolean; created_at: Date }[]>`
    SELECT id, email, name, email_verified, created_at FROM users WHERE id = ${user.id}`;
  return { id: row.id, email: row.email, name: row.name, emailVerified: row.email_verified, createdAt: row.created_at.toISOString() };
}

export async function createProject(user: TestUser, body: Record<string, unknown> = {}) {
  const res = await user.request('POST', '/api/projects', { name: `Project ${randomBytes(3).toString('hex')}`, ...body });
  if (res.status !== 201) throw new Error(`project create failed: ${res.status} ${res.text}`);
  return res.body as { id: string; orgId: string; name: string; slug: string };
}

export async function addMember(owner: TestUser, projectId: string, user: TestUser, role: ProjectRole) {
  const res = await owner.request('POST', `/api/projects/${projectId}/members`, { userId: user.id, role });
  if (res.status !== 201) throw new Error(`member add failed: ${res.status} ${res.text}`);
}

export async function createService(user: TestUser, projectId: string, body: Record<string, unknown> = {}) {
  const res = await user.request('POST', '/api/services', { projectId, name: `Service ${randomBytes(3).toString('hex')}`, ...body });
  if (res.status !== 201) throw new Error(`service create failed: ${res.status} ${res.text}`);
  return res.body as { id: string; projectId: string; name: string; slug: string };
}

/** A project with one user in each role. */
export async function projectWithRoles(app: TestApp) {
  const owner = await app.signup();
  const admin = await app.signup();
  const member = await app.signup();
  const viewer = await app.signup();
  const project = await createProject(owner);
  await addMember(owner, project.id, admin, 'admin');
  await addMember(owner, project.id, member, 'member');
  await addMember(owner, project.id, viewer, 'viewer');
  return { project, owner, admin, member, viewer };
}

export async function auditEntries(app: TestApp, projectId: string, action?: string) {
  const rows = await app.platform.db.sql<{ action: string; resource_id: string; user_id: string | null; before: any; after: any; metadata: any }[]>`
    SELECT action, resource_id, user_id, before, after, metadata FROM audit_logs
    WHERE project_id = ${projectId} ${action ? app.platform.db.sql`AND action = ${action}` : app.platform.db.sql``}
    ORDER BY timestamp, id`;
  return rows;
}

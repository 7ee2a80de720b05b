import { randomBytes } from 'node:crypto';
import type { PersonalTokenTier, ProjectRole, TokenScope } from '../../api/auth/principal';
import type { TestApp, TestUser } from '../support/harness';

/**
 * Real bearer credentials for tests of the projects area, created through the API, so route
 * policy, ProjectAccess and every refusal go through the real token resolvers.
 */
export function testCredentials(app: TestApp) {
  const sql = app.platform.db.sql;
  return {
    /**
     * A personal access token of `user`. Creating one needs a verified address
     * (docs/errors.md#permission-messages): a user who has none is verified for the call and put
     * back, so the test's user stays as it was.
     */
    async personal(user: TestUser, tier: PersonalTokenTier, allowOwnerActions = false): Promise<string> {
      const [{ email_verified: verified }] = await sql<{ email_verified: boolean }[]>`SELECT email_verified FROM users WHERE id = ${user.id}`;
      if (!verified) await sql`UPDATE users SET email_verified = true WHERE id = ${user.id}`;
      try {
        const res = await user.request('POST', '/api/users/me/personal-tokens', { name: `test ${tier}`, tier, allowOwnerActions });
        if (res.status !== 201) throw new Error(`personal token create failed: ${res.status} ${res.text}`);
        return res.body.value as string;
      } finally {
        if (!verified) await sql`UPDATE users SET email_verified = false WHERE id = ${user.id}`;
      }
    },
    /** A project JWT access token with `scopes`, created by `creator` (who must be allowed to). */
    async project(projectId: string, scopes: TokenScope[], creator: TestUser): Promise<string> {
      const res = await creator.request('POST', `/api/projects/${projectId}/tokens`, { name: `test ${scopes.join(' ')}`, scopes });
      if (res.status !== 201) throw new Error(`project token create failed: ${res.status} ${res.text}`);
      return res.body.accessToken as string;
    },
  };
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

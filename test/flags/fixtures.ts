import type { ProjectRole } from '../../api/auth/principal';
import type { TestApp, TestUser } from '../support/harness';

export interface ProjectFixture {
  projectId: string;
  serviceId: string;
  owner: TestUser;
  /** One user per role, added through the members API. */
  users: Record<ProjectRole, TestUser>;
}

function expectStatus(res: { status: number; text: string }, status: number, what: string) {
  if (res.status !== status) throw new Error(`${what}: expected ${status}, got ${res.status} ${res.text}`);
}

/** A project with one service and a member of every role, built through the public API. */
export async function createProjectFixture(app: TestApp, name = 'Flags project'): Promise<ProjectFixture> {
  const owner = await app.signup();
  const project = await owner.request('POST', '/api/projects', { name });
  expectStatus(project, 201, 'create project');
  const service = await owner.request('POST', '/api/services', { projectId: project.body.id, name: 'checkout' });
  expectStatus(service, 201, 'create service');
  const users = { owner } as Record<ProjectRole, TestUser>;
  for (const role of ['admin', 'member', 'viewer'] as const) {
    const user = await app.signup();
    const added = await owner.request('POST', `/api/projects/${project.body.id}/members`, { userId: user.id, role });
    expectStatus(added, 201, `add ${role}`);
    users[role] = user;
  }
  return { projectId: project.body.id, serviceId: service.body.id, owner, users };
}

export async function addService(user: TestUser, projectId: string, name: string): Promise<string> {
  const service = await user.request('POST', '/api/services', { projectId, name });
  expectStatus(service, 201, 'create service');
  return service.body.id;
}

/** An opaque project API token with the given permissions; returns the secret. */
export async function projectToken(owner: TestUser, projectId: string, permissions: { read?: boolean; write?: boolean; delete?: boolean }): Promise<string> {
  const res = await owner.request('POST', `/api/projects/${projectId}/tokens`, { name: `t-${Object.keys(permissions).join('-')}`, permissions });
  expectStatus(res, 201, 'create token');
  return res.body.value;
}

export const query = (params: Record<string, string | number | boolean | undefined>) =>
  '?' +
  Object.entries(params)
    .filter(([, v]) => v !== undefined)
    .map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(String(v))}`)
    .join('&');

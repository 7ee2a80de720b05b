import { randomBytes } from 'node:crypto';
import type { ProjectRole } from '../../api/auth/principal';
import { startTestApp, type TestApp, type TestUser } from '../support/harness';
import { addMember, createService, projectWithRoles } from './support';

/**
 * The roles of docs/api-reference.md#roles-and-capabilities enforced on every endpoint of projects,
 * services, members, invitations, audit and watching: each role is refused exactly what the table
 * denies it, a non-member is refused everything with 404, and nothing changes on a refusal.
 */
let app: TestApp;
let ctx: Awaited<ReturnType<typeof build>>;

async function build() {
  const roles = await projectWithRoles(app);
  const { project, owner } = roles;
  const target = await app.signup();
  await addMember(owner, project.id, target, 'viewer');
  const outsider = await app.signup();
  const service = await createService(owner, project.id, { name: 'Matrix' });
  const key = 'matrix-flag';
  await app.platform.db.sql`
    INSERT INTO flags (id, project_id, service_id, environment, key, name, type, default_value)
    VALUES (${`flg_${randomBytes(6).toString('hex')}`}, ${project.id}, ${service.id}, 'production', ${key}, ${key}, 'boolean', 'false')`;
  const invitation = (await owner.request('POST', `/api/projects/${project.id}/invitations`, { email: `matrix-${randomBytes(3).toString('hex')}@example.com`, role: 'viewer' })).body;
  const stranger = await app.signup();
  return { ...roles, target, outsider, service, key, invitation, stranger };
}

beforeAll(async () => {
  app = await startTestApp();
  ctx = await build();
});
afterAll(() => app?.stop());

type Ctx = typeof ctx;
interface Row {
  name: string;
  method: 'GET' | 'POST' | 'PATCH' | 'DELETE';
  path: (c: Ctx) => string;
  body?: (c: Ctx) => unknown;
  /** Roles refused with 403 and the permission the message names. */
  refused: Partial<Record<ProjectRole, string>>;
}

const MUTATIONS: Row[] = [
  { name: 'PATCH project settings', method: 'PATCH', path: (c) => `/api/projects/${c.project.id}`, body: () => ({ name: 'hijacked' }), refused: { member: 'manage_settings', viewer: 'manage_settings' } },
  { name: 'PATCH project slug', method: 'PATCH', path: (c) => `/api/projects/${c.project.id}`, body: () => ({ slug: 'hijacked-slug' }), refused: { admin: 'change_slug', member: 'manage_settings', viewer: 'manage_settings' } },
  { name: 'DELETE project', method: 'DELETE', path: (c) => `/api/projects/${c.project.id}`, refused: { admin: 'delete_project', member: 'delete_project', viewer: 'delete_project' } },
  { name: 'POST service', method: 'POST', path: () => '/api/services', body: (c) => ({ projectId: c.project.id, name: 'Intruder' }), refused: { viewer: 'write' } },
  { name: 'PATCH service', method: 'PATCH', path: (c) => `/api/services/${c.service.id}`, body: () => ({ name: 'hijacked' }), refused: { viewer: 'write' } },
  { name: 'DELETE service', method: 'DELETE', path: (c) => `/api/services/${c.service.id}`, refused: { member: 'delete', viewer: 'delete' } },
  { name: 'POST member', method: 'POST', path: (c) => `/api/projects/${c.project.id}/members`, body: (c) => ({ userId: c.outsider.id, role: 'viewer' }), refused: { member: 'manage_members', viewer: 'manage_members' } },
  { name: 'POST member as owner', method: 'POST', path: (c) => `/api/projects/${c.project.id}/members`, body: (c) => ({ userId: c.outsider.id, role: 'owner' }), refused: { admin: 'manage_owners', member: 'manage_members', viewer: 'manage_members' } },
  { name: 'PATCH member role', method: 'PATCH', path: (c) => `/api/projects/${c.project.id}/members/${c.target.id}`, body: () => ({ role: 'admin' }), refused: { member: 'manage_members', viewer: 'manage_members' } },
  { name: 'PATCH member to owner', method: 'PATCH', path: (c) => `/api/projects/${c.project.id}/members/${c.target.id}`, body: () => ({ role: 'owner' }), refused: { admin: 'manage_owners', member: 'manage_members', viewer: 'manage_members' } },
  { name: 'PATCH owner down', method: 'PATCH', path: (c) => `/api/projects/${c.project.id}/members/${c.owner.id}`, body: () => ({ role: 'viewer' }), refused: { admin: 'manage_owners', member: 'manage_members', viewer: 'manage_members' } },
  { name: 'DELETE member', method: 'DELETE', path: (c) => `/api/projects/${c.project.id}/members/${c.target.id}`, refused: { member: 'manage_members', viewer: 'manage_members' } },
  { name: 'DELETE owner', method: 'DELETE', path: (c) => `/api/projects/${c.project.id}/members/${c.owner.id}`, refused: { admin: 'manage_owners', member: 'manage_members', viewer: 'manage_members' } },
  { name: 'POST invitation', method: 'POST', path: (c) => `/api/projects/${c.project.id}/invitations`, body: () => ({ email: 'intruder@example.com', role: 'admin' }), refused: { member: 'manage_members', viewer: 'manage_members' } },
  { name: 'DELETE invitation', method: 'DELETE', path: (c) => `/api/projects/${c.project.id}/invitations/${c.invitation.id}`, refused: { member: 'manage_members', viewer: 'manage_members' } },
];

const READS: Row[] = [
  { name: 'GET project', method: 'GET', path: (c) => `/api/projects/${c.project.id}`, refused: {} },
  { name: 'GET project by slug', method: 'GET', path: (c) => `/api/projects/by-slug/${c.project.slug}`, refused: {} },
  { name: 'GET services', method: 'GET', path: (c) => `/api/services?projectId=${c.project.id}`, refused: {} },
  { name: 'GET service', method: 'GET', path: (c) => `/api/services/${c.service.id}`, refused: {} },
  { name: 'GET service by slug', method: 'GET', path: (c) => `/api/services/by-slug/${c.service.slug}?projectId=${c.project.id}`, refused: {} },
  { name: 'GET members', method: 'GET', path: (c) => `/api/projects/${c.project.id}/members`, refused: {} },
  { name: 'GET invitations', method: 'GET', path: (c) => `/api/projects/${c.project.id}/invitations`, refused: {} },
  { name: 'GET audit', method: 'GET', path: (c) => `/api/audit?projectId=${c.project.id}`, refused: {} },
  { name: 'GET watch', method: 'GET', path: (c) => `/api/flags/${c.key}/watch?serviceId=${c.service.id}&environment=production`, refused: {} },
  { name: 'POST watch', method: 'POST', path: (c) => `/api/flags/${c.key}/watch`, body: (c) => ({ serviceId: c.service.id, environment: 'production' }), refused: {} },
];

const ROLES: ProjectRole[] = ['owner', 'admin', 'member', 'viewer'];
const userFor = (role: ProjectRole): TestUser => ctx[role];

async function snapshot() {
  const { sql } = app.platform.db;
  return {
    project: await sql`SELECT name, slug, description FROM projects WHERE id = ${ctx.project.id}`,
    services: await sql`SELECT id, name FROM services WHERE project_id = ${ctx.project.id} ORDER BY id`,
    members: await sql`SELECT user_id, role FROM project_members WHERE project_id = ${ctx.project.id} ORDER BY user_id`,
    invitations: await sql`SELECT id, status FROM invitations WHERE project_id = ${ctx.project.id} ORDER BY id`,
  };
}

describe('refused mutations per role', () => {
  const cases = MUTATIONS.flatMap((row) =>
    Object.entries(row.refused).map(([role, permission]) => [row.name, role as ProjectRole, permission as string, row] as const),
  );
  it.each(cases)('%s: %s gets 403 needing %s, and nothing changes', async (_name, role, permission, row) => {
    const before = await snapshot();
    const res = await userFor(role).request(row.method, row.path(ctx), row.body?.(ctx));
    expect(res.status).toBe(403);
    expect(res.body).toEqual({ error: 'Forbidden', message: `Forbidden: You need '${permission}' permission` });
    expect(await snapshot()).toEqual(before);
  });
});

describe('non-members are refused every endpoint with 404 (BOLA)', () => {
  it.each([...MUTATIONS, ...READS].map((row) => [row.name, row] as const))('%s', async (_name, row) => {
    const before = await snapshot();
    const res = await ctx.stranger.request(row.method, row.path(ctx), row.body?.(ctx));
    expect(res.status).toBe(404);
    expect(res.body.error).toBe('Not Found');
    expect(JSON.stringify(res.body)).not.toContain(ctx.project.name);
    expect(await snapshot()).toEqual(before);
  });
});

describe('reads are open to every role', () => {
  const cases = READS.flatMap((row) => ROLES.map((role) => [row.name, role, row] as const));
  it.each(cases)('%s as %s', async (_name, role, row) => {
    const res = await userFor(role).request(row.method, row.path(ctx), row.body?.(ctx));
    expect(res.status).toBe(200);
  });
});

import { randomBytes } from 'node:crypto';
import type { FlagDefinition } from '../../api/features/evaluation/engine/index';
import type { TestApp, TestResponse, TestUser } from '../support/harness';

/** A project with a service, its owner, a viewer, an outsider and read / write-only tokens, built through the API. */
export interface DataPlaneFixture {
  projectId: string;
  serviceId: string;
  owner: TestUser;
  viewer: TestUser;
  outsider: TestUser;
  readToken: string;
  writeOnlyToken: string;
}

function expectStatus(res: TestResponse, status: number, what: string) {
  if (res.status !== status) throw new Error(`${what}: expected ${status}, got ${res.status} ${res.text}`);
}

export async function createFixture(app: TestApp): Promise<DataPlaneFixture> {
  const owner = await app.signup();
  const project = await owner.request('POST', '/api/projects', { name: `Data plane ${randomBytes(3).toString('hex')}` });
  expectStatus(project, 201, 'create project');
  const service = await owner.request('POST', '/api/services', { projectId: project.body.id, name: `svc-${randomBytes(3).toString('hex')}` });
  expectStatus(service, 201, 'create service');
  const viewer = await app.signup();
  expectStatus(await owner.request('POST', `/api/projects/${project.body.id}/members`, { userId: viewer.id, role: 'viewer' }), 201, 'add viewer');
  const outsider = await app.signup();
  return {
    projectId: project.body.id,
    serviceId: service.body.id,
    owner,
    viewer,
    outsider,
    readToken: await projectToken(owner, project.body.id, { read: true }),
    writeOnlyToken: await projectToken(owner, project.body.id, { write: true }),
  };
}

/** An opaque project API token (fgr_) with the given permissions; returns the secret. */
export async function projectToken(owner: TestUser, projectId: string, permissions: { read?: boolean; write?: boolean; delete?: boolean }) {
  const res = await owner.request('POST', `/api/projects/${projectId}/tokens`, { name: `t-${randomBytes(3).toString('hex')}`, permissions });
  expectStatus(res, 201, 'create token');
  return res.body.value as string;
}

/** A personal access token (fgp_) of a verified user. */
export async function personalToken(app: TestApp, user: TestUser, tier: 'read' | 'write' | 'admin' = 'read') {
  await app.platform.db.sql`UPDATE users SET email_verified = true WHERE id = ${user.id}`;
  const res = await user.request('POST', '/api/users/me/personal-tokens', { name: `pat-${randomBytes(3).toString('hex')}`, tier });
  expectStatus(res, 201, 'create personal token');
  return res.body.value as string;
}

let counter = 0;
export const uniqueKey = (prefix = 'flag') => `${prefix}-${++counter}-${randomBytes(3).toString('hex')}`;

/** Creates a flag through the API in one environment and returns it. */
export async function createFlag(user: TestUser, serviceId: string, body: Record<string, unknown>) {
  const res = await user.request('POST', '/api/flags', { key: uniqueKey(), serviceId, environment: 'development', ...body });
  expectStatus(res, 201, 'create flag');
  return res.body as { key: string; id: string; version: number; environment: string; [k: string]: unknown };
}

/** Waits until a REST evaluation on `listener` satisfies `check` (snapshots follow the bus). */
export async function untilEvaluated(
  app: TestApp,
  body: Record<string, unknown>,
  check: (result: any) => boolean,
  opts: { token?: string; listener?: 'control' | 'data' } = {},
) {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const res = await app.request('POST', '/api/flags/evaluate', { body, token: opts.token, listener: opts.listener });
    if (res.status === 200 && check(res.body)) return res.body;
    if (Date.now() > deadline) throw new Error(`evaluation never matched: ${res.status} ${res.text}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/**
 * Writes a flag straight into Postgres, bypassing the API's validation: stored data the write
 * API refuses (bad regexes, odd weights, values of the wrong type) must still be served sanely.
 * The service's snapshot loads it when it is first used.
 */
export async function storeFlag(app: TestApp, where: { projectId: string; serviceId: string; environment: string }, f: Omit<FlagDefinition, 'type'> & { type: string }) {
  const sql = app.platform.db.sql;
  const jsonb = (v: unknown) => (v === null || v === undefined ? sql`'null'::jsonb` : sql`${sql.json(v as never)}`);
  await sql`
    INSERT INTO flags (id, project_id, service_id, environment, key, name, type, enabled, default_value, variants, targeting, is_public)
    VALUES (${`flg_t_${randomBytes(8).toString('hex')}`}, ${where.projectId}, ${where.serviceId}, ${where.environment}, ${f.key}, ${f.key}, ${f.type},
            ${f.enabled === true}, ${jsonb(f.defaultValue)}, ${jsonb(f.variants ?? [])}, ${jsonb(f.targeting ?? [])}, false)`;
}

import { resolveActors } from '../../api/features/audit/actors';
import type { Queryable } from '../../api/infra/postgres';
import { startTestApp, type TestApp } from '../support/harness';
import { createFlag, createProject, expectStatus, opaqueToken, personalToken, qs, type Project } from '../webhooks/support';

let app: TestApp;
let p: Project;
beforeAll(async () => {
  app = await startTestApp();
  p = await createProject(app);
}, 120_000);
afterAll(() => app?.stop());

let n = 0;
const newKey = (label: string) => `names-${label}-${Date.now().toString(36)}-${n++}`;

async function projectToken(name: string): Promise<{ id: string; value: string }> {
  const res = await p.owner.request('POST', `/api/projects/${p.projectId}/tokens`, { name, permissions: { read: true, write: true } });
  expectStatus(res, 201, 'create token');
  return { id: res.body.token.id, value: res.body.value };
}

async function auditOf(query: Record<string, string | number>) {
  const res = await p.owner.request('GET', `/api/audit${qs({ projectId: p.projectId, ...query })}`);
  expectStatus(res, 200, 'read audit');
  return res.body as { logs: { actor: string; userId: string | null; action: string; resourceName: string | null; actorDisplay: Record<string, unknown> }[]; total: number };
}

/** An audit row written as a machine actor would (canary, guardrail, bandit, scheduled change, demo). */
async function seedEntry(actor: string, resourceName: string) {
  await app.platform.db.sql`
    INSERT INTO audit_logs (id, project_id, user_id, actor, action, resource_type, resource_id, resource_name)
    VALUES (${`aud_names_${n++}_${Date.now()}`}, ${p.projectId}, NULL, ${actor}, 'flag.update', 'flag', ${resourceName}, ${resourceName})`;
}

describe('actorDisplay on audit entries', () => {
  it('names users by name and e-mail, tokens by name (revoked ones say so) and trigger executions by trigger', async () => {
    const key = newKey('token');
    await createFlag(p.owner, p.serviceId, key);
    const deploy = await projectToken('deploy-bot');
    expectStatus(await app.request('POST', `/api/flags/${key}/toggle${qs({ serviceId: p.serviceId, environment: 'production' })}`, { token: deploy.value }), 200, 'toggle by token');
    const trigger = await p.owner.request('POST', `/api/flags/${key}/triggers`, { serviceId: p.serviceId, environment: 'production', action: 'toggle', name: 'Pager recovery' });
    expectStatus(trigger, 201, 'create trigger');
    expectStatus(await app.request('POST', new URL(trigger.body.url).pathname), 200, 'fire trigger');

    const { logs } = await auditOf({ resourceType: 'flag' });
    const byToken = logs.find((l) => l.actor === `token:${deploy.id}`)!;
    expect(byToken.actorDisplay).toEqual({ kind: 'token', id: deploy.id, name: 'API token “deploy-bot”' });
    expect(logs.find((l) => l.actor === 'trigger:Pager recovery')!.actorDisplay).toEqual({ kind: 'trigger', name: 'Trigger “Pager recovery”' });
    const [owner] = await app.platform.db.sql<{ name: string }[]>`SELECT name FROM users WHERE id = ${p.owner.id}`;
    expect(logs.find((l) => l.action === 'flag.create' && l.resourceName === key)!.actorDisplay).toEqual({ kind: 'user', id: p.owner.id, name: owner.name, email: p.owner.email });

    expectStatus(await p.owner.request('DELETE', `/api/projects/${p.projectId}/tokens/${deploy.id}`), 204, 'revoke token');
    const after = await auditOf({ actor: `token:${deploy.id}` });
    expect(after.logs.length).toBeGreaterThan(0);
    expect(after.logs.every((l) => l.actor === `token:${deploy.id}`)).toBe(true);
    expect(after.logs[0].actorDisplay).toEqual({ kind: 'token', id: deploy.id, name: 'API token “deploy-bot” (revoked)', status: 'revoked' });
  });

  it("names a personal token's changes by its owner and the token's name", async () => {
    const key = newKey('personal');
    await createFlag(p.owner, p.serviceId, key);
    const pat = await personalToken(p.member, 'write');
    expectStatus(await app.request('POST', `/api/flags/${key}/toggle${qs({ serviceId: p.serviceId, environment: 'production' })}`, { token: pat }), 200, 'toggle by personal token');
    const { logs } = await auditOf({ action: 'flag.toggle', userId: p.member.id });
    const [member] = await app.platform.db.sql<{ name: string }[]>`SELECT name FROM users WHERE id = ${p.member.id}`;
    expect(logs[0].actorDisplay).toEqual({ kind: 'personal_token', id: expect.any(String), name: `${member.name} via personal token “pat-write”`, email: p.member.email });
  });

  it('names canaries by flag and environment, system actors by a phrase, and gone records as deleted', async () => {
    const key = newKey('canary');
    const flag = await createFlag(p.owner, p.serviceId, key);
    const pipelineId = `cnr_names_${Date.now()}`;
    await app.platform.db.sql`
      INSERT INTO canary_pipelines (id, project_id, flag_id, service_id, environment, flag_key, rule_id, status, config, pre_canary_version, health, workflow_id, created_by_actor)
      VALUES (${pipelineId}, ${p.projectId}, ${flag.id}, ${p.serviceId}, 'production', ${key}, 'rule_1', 'running', '{}'::jsonb, 1, '{}'::jsonb, ${`wf-${pipelineId}`}, ${p.owner.email})`;
    await seedEntry(`canary:${pipelineId}`, `${key}-canary`);
    await seedEntry('system:guardrail', `${key}-guardrail`);
    await seedEntry('system:something-new', `${key}-system`);
    await seedEntry('public-demo', `${key}-demo`);
    await seedEntry('bandit:exp_gone', `${key}-bandit`);
    await seedEntry('token:tok_gone', `${key}-token`);

    const { logs } = await auditOf({ limit: 100 });
    const named = (suffix: string) => logs.find((l) => l.resourceName === `${key}-${suffix}`)!.actorDisplay;
    expect(named('canary')).toEqual({ kind: 'canary', id: pipelineId, name: `Canary of ${key} (production)` });
    expect(named('guardrail')).toEqual({ kind: 'guardrail', name: 'Guardrail (automatic rollback)' });
    expect(named('system')).toEqual({ kind: 'system', name: 'System (something new)' });
    expect(named('demo')).toEqual({ kind: 'demo', name: 'Public demo visitor' });
    expect(named('bandit')).toEqual({ kind: 'experiment', id: 'exp_gone', name: 'Deleted experiment', status: 'deleted' });
    expect(named('token')).toEqual({ kind: 'token', id: 'tok_gone', name: 'Deleted API token', status: 'deleted' });
    for (const entry of logs) expect(entry.actorDisplay.name).not.toMatch(/^(token|canary|trigger|system|bandit|schedule|mcp):/);
  });

  it('names flag versions in the history too', async () => {
    const key = newKey('history');
    await createFlag(p.owner, p.serviceId, key);
    const ci = await projectToken('ci');
    expectStatus(await app.request('POST', `/api/flags/${key}/toggle${qs({ serviceId: p.serviceId, environment: 'production' })}`, { token: ci.value }), 200, 'toggle by token');
    const res = await p.owner.request('GET', `/api/flags/${key}/history${qs({ serviceId: p.serviceId, environment: 'production' })}`);
    expectStatus(res, 200, 'history');
    expect(res.body.versions[0].actorDisplay).toEqual({ kind: 'token', id: ci.id, name: 'API token “ci”' });
    expect(res.body.versions[1].actorDisplay).toMatchObject({ kind: 'user', id: p.owner.id, email: p.owner.email });
  });
});

describe('resolving actors in batches', () => {
  it('asks the database once per kind of actor, whatever the number of rows', async () => {
    const sql = app.platform.db.sql;
    let queries = 0;
    const counting = ((strings: TemplateStringsArray, ...values: unknown[]) => {
      queries++;
      return sql(strings, ...(values as never[]));
    }) as unknown as Queryable;
    const tokens = await Promise.all(['a', 'b', 'c'].map((name) => projectToken(`batch-${name}`)));
    const rows = Array.from({ length: 60 }, (_, i) =>
      i % 3 === 0 ? { actor: `token:${tokens[i % 9 === 0 ? 0 : 1].id}`, userId: p.owner.id } : i % 3 === 1 ? { actor: p.member.email, userId: p.member.id } : { actor: `trigger:t${i}`, userId: null },
    );
    const named = await resolveActors(counting, rows);
    expect(queries).toBe(2); // users, project tokens; triggers need none
    expect(named(`token:${tokens[1].id}`, p.owner.id).name).toBe('API token “batch-b”');
    expect(named(p.member.email, p.member.id)).toMatchObject({ kind: 'user', email: p.member.email });

    queries = 0;
    await resolveActors(counting, [{ actor: 'public-demo', userId: null }, { actor: 'system:guardrail', userId: null }]);
    expect(queries).toBe(0);
  });
});

describe('GET /api/audit/facets', () => {
  it('lists the actions, resource types and named actors present in the project', async () => {
    const res = await p.member.request('GET', `/api/audit/facets${qs({ projectId: p.projectId })}`);
    expectStatus(res, 200, 'facets');
    expect(res.body.actions).toEqual(expect.arrayContaining(['flag.create', 'flag.toggle', 'project.create']));
    expect(res.body.resourceTypes).toEqual(expect.arrayContaining(['flag', 'project']));
    expect(res.body.actions).toEqual([...res.body.actions].sort());
    const deploy = res.body.actors.find((a: { actorDisplay: { name: string } }) => a.actorDisplay.name.startsWith('API token “deploy-bot”'));
    expect(deploy).toEqual({ actor: expect.stringMatching(/^token:/), userId: p.owner.id, actorDisplay: expect.objectContaining({ kind: 'token', status: 'revoked' }) });
  });

  it('is refused to outsiders, to tokens without manage_members and to bad input, like GET /api/audit', async () => {
    const outsider = await app.signup({ verified: true });
    for (const path of ['/api/audit', '/api/audit/facets']) {
      const foreign = await outsider.request('GET', `${path}${qs({ projectId: p.projectId })}`);
      expect([path, foreign.status]).toEqual([path, 404]);
      expect((await app.request('GET', `${path}${qs({ projectId: p.projectId })}`)).status).toBe(401);
      const reader = await opaqueToken(p.owner, p.projectId, { read: true });
      expect((await app.request('GET', `${path}${qs({ projectId: p.projectId })}`, { token: reader })).status).toBe(403);
      expect((await p.owner.request('GET', path)).status).toBe(400);
      expect((await p.owner.request('GET', `${path}${qs({ projectId: 'x'.repeat(5000) })}`)).status).toBe(400);
    }
    // Viewers read the audit trail (members:view), so they read its filters' choices too.
    expect((await p.viewer.request('GET', `/api/audit/facets${qs({ projectId: p.projectId })}`)).status).toBe(200);
  });

  it('filters GET /api/audit by an actor it lists, and refuses an oversize one', async () => {
    const facets = (await p.owner.request('GET', `/api/audit/facets${qs({ projectId: p.projectId })}`)).body;
    const trigger = facets.actors.find((a: { actorDisplay: { kind: string } }) => a.actorDisplay.kind === 'trigger');
    const { logs } = await auditOf({ actor: trigger.actor });
    expect(logs.length).toBeGreaterThan(0);
    expect(new Set(logs.map((l) => l.actor))).toEqual(new Set([trigger.actor]));
    const oversize = await p.owner.request('GET', `/api/audit${qs({ projectId: p.projectId, actor: 'a'.repeat(301) })}`);
    expect(oversize.status).toBe(400);
    expect(oversize.body.error).toBeDefined();
  });
});

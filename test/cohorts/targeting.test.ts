import { createClient } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import { EventSource } from 'eventsource';
import { evaluate } from '../../api/features/evaluation/engine';
import { EvaluationService } from '../../api/gen/flags/v1/evaluation_pb';
import { eventually, startTestApp, type TestApp } from '../support/harness';
import { expectOfrepBulk, expectOfrepSingle } from '../support/ofrep-schema';
import { createProject, expectStatus, opaqueToken, type Project } from '../webhooks/support';

/**
 * in_cohort in flag targeting (docs/cohorts.md) over REST, OFREP and Connect; a cohort change
 * reaching every evaluation path through the outbox and the bus without touching the flag
 * (values, ETag, stream); flag writes that name unknown cohorts; deleting a cohort in use.
 */

let app: TestApp;
let p: Project;
let other: Project;
let readToken: string;
let cohortId: string;
const flagKey = 'new-checkout';

const cohortsUrl = (project: Project) => `/api/projects/${project.projectId}/cohorts`;
const inCohort = (id: string) => ({ property: 'targetingKey', operator: 'in_cohort', value: id });

const rest = (context: Record<string, unknown>) =>
  app.request('POST', '/api/flags/evaluate', {
    listener: 'data',
    token: readToken,
    body: { flagKey, serviceId: p.serviceId, environment: 'production', defaultValue: 'default', context },
  });
const ofrepBulk = async (headers: Record<string, string> = {}) => {
  const res = await app.request('POST', '/api/ofrep/v1/evaluate/flags', {
    listener: 'data',
    token: readToken,
    headers: { 'x-service-id': p.serviceId, 'x-environment': 'production', ...headers },
    body: { context: { targetingKey: 'u-9', plan: 'pro' } },
  });
  expectOfrepBulk(res);
  return res;
};

beforeAll(async () => {
  app = await startTestApp();
  p = await createProject(app);
  other = await createProject(app);
  readToken = await opaqueToken(p.owner, p.projectId, { read: true });
  const cohort = await p.member.request('POST', cohortsUrl(p), {
    name: 'Beta testers',
    rules: [
      { id: 'staff', conditions: [{ property: 'email', operator: 'ends_with', value: '@staff.example.com' }] },
      { id: 'eu-pro', conditions: [{ property: 'country', operator: 'in', value: ['FR', 'DE'] }, { property: 'plan', operator: 'equals', value: 'pro' }] },
    ],
  });
  expectStatus(cohort, 201, 'create cohort');
  cohortId = cohort.body.id;
  const flag = await p.member.request('POST', '/api/flags', {
    key: flagKey,
    serviceId: p.serviceId,
    environment: 'production',
    type: 'string',
    enabled: true,
    defaultValue: 'old',
    targeting: [{ id: 'beta', conditions: [inCohort(cohortId)], value: 'new' }],
  });
  expectStatus(flag, 201, 'create flag');
  await eventually(async () => (await rest({ email: 'a@staff.example.com' })).body.value === 'new');
});
afterAll(async () => {
  await app?.stop();
});

describe('in_cohort in targeting', () => {
  it('evaluates over REST', async () => {
    expect((await rest({ targetingKey: 'u1', email: 'ann@staff.example.com' })).body).toEqual({ flagKey, value: 'new', reason: 'TARGETING_MATCH' });
    expect((await rest({ targetingKey: 'u2', country: 'DE', plan: 'pro' })).body).toMatchObject({ value: 'new', reason: 'TARGETING_MATCH' });
    expect((await rest({ targetingKey: 'u3', country: 'DE', plan: 'free' })).body).toMatchObject({ value: 'old', reason: 'DEFAULT' });
  });

  it('evaluates over OFREP', async () => {
    const one = async (context: Record<string, unknown>) => {
      const res = await app.request('POST', `/api/ofrep/v1/evaluate/flags/${flagKey}`, {
        listener: 'data',
        token: readToken,
        headers: { 'x-service-id': p.serviceId, 'x-environment': 'production' },
        body: { context },
      });
      expectOfrepSingle(res);
      return res;
    };
    expect((await one({ targetingKey: 'u1', email: 'bob@staff.example.com' })).body).toMatchObject({ key: flagKey, value: 'new', reason: 'TARGETING_MATCH' });
    const outsider = (await one({ targetingKey: 'u3', country: 'US', plan: 'pro' })).body;
    expect(outsider).toMatchObject({ key: flagKey, value: 'old' });
    expect(outsider.reason).not.toBe('TARGETING_MATCH');
  });

  it('evaluates over Connect', async () => {
    const client = createClient(EvaluationService, createConnectTransport({ baseUrl: `${app.urls.data}/api/connect`, httpVersion: '1.1', useBinaryFormat: true }));
    const auth = { headers: { Authorization: `Bearer ${readToken}` } };
    const member = await client.resolveString({ flagKey, serviceId: p.serviceId, environment: 'production', context: { targetingKey: 'u2', country: 'FR', plan: 'pro' } as never }, auth);
    expect({ value: member.value, reason: member.reason }).toEqual({ value: 'new', reason: 'TARGETING_MATCH' });
    const outsider = await client.resolveString({ flagKey, serviceId: p.serviceId, environment: 'production', context: { targetingKey: 'u3', country: 'FR' } as never }, auth);
    expect({ value: outsider.value, reason: outsider.reason }).toEqual({ value: 'old', reason: 'DEFAULT' });
  });

  it('explains the cohort rule that matched', async () => {
    const res = await p.viewer.request('POST', `/api/flags/${flagKey}/explain`, { serviceId: p.serviceId, environment: 'production', context: { targetingKey: 'u2', country: 'FR', plan: 'pro' } });
    expect(res.status).toBe(200);
    expect(res.body.rules[0].conditions[0]).toEqual({
      property: 'targetingKey',
      operator: 'in_cohort',
      expected: cohortId,
      actual: { cohortId, member: true, matchedRuleId: 'eu-pro' },
      passed: true,
    });
  });
});

describe('a cohort change', () => {
  it('changes evaluation results, the ETag and the stream without touching the flag', async () => {
    const before = await ofrepBulk();
    expect(before.status).toBe(200);
    const etag = before.headers.get('etag')!;
    expect(before.body.flags.find((f: { key: string }) => f.key === flagKey)).toMatchObject({ value: 'old' });
    expect((await ofrepBulk({ 'if-none-match': etag })).status).toBe(304);
    const flagBefore = await p.viewer.request('GET', `/api/flags/${flagKey}?serviceId=${p.serviceId}&environment=production`);
    const stream = await listen(`${app.urls.data}/api/flags/stream?serviceId=${p.serviceId}&environment=production`, readToken);

    // Pro accounts anywhere join the cohort.
    const changed = await p.member.request('PATCH', `${cohortsUrl(p)}/${cohortId}`, {
      rules: [
        { id: 'staff', conditions: [{ property: 'email', operator: 'ends_with', value: '@staff.example.com' }] },
        { id: 'pro', conditions: [{ property: 'plan', operator: 'equals', value: 'pro' }] },
      ],
    });
    expect(changed.status).toBe(200);
    await eventually(async () => (await rest({ targetingKey: 'u-9', plan: 'pro' })).body.value === 'new');

    const after = await ofrepBulk({ 'if-none-match': etag });
    expect(after.status).toBe(200);
    expect(after.headers.get('etag')).not.toBe(etag);
    expect(after.body.flags.find((f: { key: string }) => f.key === flagKey)).toMatchObject({ value: 'new', reason: 'TARGETING_MATCH' });
    // The flag itself did not change: same version, same record.
    const flagAfter = await p.viewer.request('GET', `/api/flags/${flagKey}?serviceId=${p.serviceId}&environment=production`);
    expect(flagAfter.body.version).toBe(flagBefore.body.version);
    // Stream clients are told to refetch the flag.
    const update = await eventually(async () => stream.messages.find((m) => m.type === 'flag-update' && m.flagKey === flagKey));
    expect(update.flag.version).toBe(flagBefore.body.version);
    stream.close();
  });

  it('changes nothing for flags that do not name the cohort (their ETag stays)', async () => {
    const otherService = await p.owner.request('POST', '/api/services', { projectId: p.projectId, name: 'plain' });
    expectStatus(otherService, 201, 'service');
    expectStatus(await p.member.request('POST', '/api/flags', { key: 'plain', serviceId: otherService.body.id, environment: 'production', enabled: true }), 201, 'flag');
    const bulk = async (headers: Record<string, string> = {}) => {
      const res = await app.request('POST', '/api/ofrep/v1/evaluate/flags', { listener: 'data', token: readToken, headers: { 'x-service-id': otherService.body.id, 'x-environment': 'production', ...headers }, body: { context: {} } });
      expectOfrepBulk(res);
      return res;
    };
    const etag = await eventually(async () => {
      const res = await bulk();
      return res.body.flags?.length === 1 ? res.headers.get('etag') : undefined;
    });
    const namingEtag = (await ofrepBulk()).headers.get('etag')!;
    expectStatus(await p.member.request('PATCH', `${cohortsUrl(p)}/${cohortId}`, { description: 'touched' }), 200, 'patch');
    // Applied once the flag that names the cohort has a new ETag; the other service's stays.
    await eventually(async () => (await ofrepBulk({ 'if-none-match': namingEtag })).status === 200);
    expect((await bulk({ 'if-none-match': etag! })).status).toBe(304);
  });
});

describe('flag writes that name cohorts', () => {
  it('refuse an unknown cohort or one of another project (400 with the field path)', async () => {
    const foreign = await other.member.request('POST', cohortsUrl(other), { name: 'Theirs' });
    expectStatus(foreign, 201, 'foreign cohort');
    for (const value of ['coh_missing', foreign.body.id]) {
      const res = await p.member.request('POST', '/api/flags', {
        key: `bad-${value.slice(-6)}`,
        serviceId: p.serviceId,
        environment: 'production',
        targeting: [{ conditions: [{ property: 'plan', operator: 'exists' }], value: false }, { conditions: [{ property: 'plan', operator: 'exists' }, inCohort(value)], value: true }],
      });
      expect(res.status).toBe(400);
      expect(res.body.details).toEqual([{ path: 'targeting.1.conditions.1.value', message: expect.stringContaining(value) }]);
    }
    const patch = await p.member.request('PATCH', `/api/flags/${flagKey}?serviceId=${p.serviceId}&environment=production`, {
      targeting: [{ id: 'beta', conditions: [inCohort(cohortId)], value: 'new' }, { conditions: [inCohort('coh_missing')], value: 'x' }],
    });
    expect(patch.status).toBe(400);
    for (const bad of ['', 5, null]) {
      const res = await p.member.request('POST', '/api/flags', { key: 'bad-value', serviceId: p.serviceId, environment: 'production', targeting: [{ conditions: [inCohort(bad as never)], value: true }] });
      expect(res.status).toBe(400);
    }
  });
});

describe('deleting a cohort', () => {
  it('answers 409 with the flags that use it, and deletes it once none does', async () => {
    const used = await p.member.request('DELETE', `${cohortsUrl(p)}/${cohortId}`);
    expect(used.status).toBe(409);
    expect(used.body.flags).toEqual([{ key: flagKey, serviceId: p.serviceId, environment: 'production' }]);
    expectStatus(await p.member.request('PATCH', `/api/flags/${flagKey}?serviceId=${p.serviceId}&environment=production`, { targeting: [] }), 200, 'drop targeting');
    expect((await p.member.request('DELETE', `${cohortsUrl(p)}/${cohortId}`)).status).toBe(204);
    expect((await p.viewer.request('GET', `${cohortsUrl(p)}/${cohortId}`)).status).toBe(404);
  });
});

describe('snapshots', () => {
  it('load cohorts at start and compile flags against them (a second replica)', async () => {
    const cohort = await p.member.request('POST', cohortsUrl(p), { name: 'Replica', rules: [{ id: 'all-pro', conditions: [{ property: 'plan', operator: 'equals', value: 'pro' }] }] });
    expectStatus(cohort, 201, 'cohort');
    expectStatus(
      await p.member.request('POST', '/api/flags', { key: 'replica-flag', serviceId: p.serviceId, environment: 'production', enabled: true, targeting: [{ conditions: [inCohort(cohort.body.id)], value: true }] }),
      201,
      'flag',
    );
    const replica = await startTestApp({ DATABASE_URL: app.databaseUrl });
    try {
      const res = await replica.request('POST', '/api/flags/evaluate', {
        listener: 'data',
        token: readToken,
        body: { flagKey: 'replica-flag', serviceId: p.serviceId, environment: 'production', context: { targetingKey: 'u', plan: 'pro' } },
      });
      expect(res.body).toMatchObject({ value: true, reason: 'TARGETING_MATCH' });
      const snapshots = replica.platform.evaluation!.snapshots;
      expect(snapshots.get(p.serviceId)!.environments.production.get('replica-flag')!.compiled.issues).toEqual([]);
    } finally {
      await replica.stop({ keepDatabase: true });
    }
  });
});

describe('SnapshotStore.compile', () => {
  it("compiles a flag that is not stored (simulate's candidate) against the project's cohorts", async () => {
    const cohort = await p.member.request('POST', cohortsUrl(p), { name: 'Candidates', rules: [{ id: 'pro', conditions: [{ property: 'plan', operator: 'equals', value: 'pro' }] }] });
    expectStatus(cohort, 201, 'cohort');
    const snapshots = app.platform.evaluation!.snapshots;
    const candidate = { key: 'candidate', type: 'boolean' as const, enabled: true, defaultValue: false, variants: [], targeting: [{ id: 'r', conditions: [inCohort(cohort.body.id)], value: true }] };
    // Known once the bus has carried the cohort to this replica.
    const compiled = await eventually(async () => {
      const c = snapshots.compile(p.projectId, candidate);
      return c.issues.length === 0 ? c : undefined;
    });
    expect(evaluate(compiled, 'candidate', { plan: 'pro' }, null).value).toBe(true);
    // Another project's snapshots do not know the cohort.
    expect(snapshots.compile(other.projectId, candidate).issues).toEqual([expect.objectContaining({ message: expect.stringContaining('does not exist') })]);
  });
});

describe('reconcile', () => {
  it('repairs cohort changes the bus never delivered (changed and deleted behind its back)', async () => {
    const snapshots = app.platform.evaluation!.snapshots;
    const cohort = await p.member.request('POST', cohortsUrl(p), { name: 'Repaired', rules: [{ id: 'pro', conditions: [{ property: 'plan', operator: 'equals', value: 'pro' }] }] });
    expectStatus(cohort, 201, 'cohort');
    expectStatus(
      await p.member.request('POST', '/api/flags', { key: 'repaired-flag', serviceId: p.serviceId, environment: 'production', enabled: true, targeting: [{ conditions: [inCohort(cohort.body.id)], value: true }] }),
      201,
      'flag',
    );
    const evaluateFree = async () =>
      (await app.request('POST', '/api/flags/evaluate', { listener: 'data', token: readToken, body: { flagKey: 'repaired-flag', serviceId: p.serviceId, environment: 'production', context: { plan: 'free' } } })).body.value;
    await eventually(async () => (await evaluateFree()) === false);
    // Written straight into Postgres: no outbox event, so only reconcile can learn of it.
    await app.platform.db.sql`
      UPDATE cohorts SET rules = ${app.platform.db.sql.json([{ id: 'free', conditions: [{ property: 'plan', operator: 'equals', value: 'free' }] }] as never)}, version = version + 1
      WHERE id = ${cohort.body.id}`;
    await snapshots.reconcile();
    expect(await evaluateFree()).toBe(true);
    // A cohort gone from Postgres (the API refuses this while a flag uses it): the flag's condition never holds.
    await app.platform.db.sql`DELETE FROM cohorts WHERE id = ${cohort.body.id}`;
    await snapshots.reconcile();
    expect(await evaluateFree()).toBe(false);
  });
});

interface Received {
  messages: any[];
  close(): void;
}

/** A browser-style EventSource collecting every message. */
function listen(url: string, token: string): Promise<Received> {
  return new Promise((resolve, reject) => {
    const messages: any[] = [];
    const source = new EventSource(url, {
      fetch: (input, init) => fetch(input, { ...init, headers: { ...(init?.headers ?? {}), Authorization: `Bearer ${token}` } }),
    });
    source.onmessage = (event) => {
      messages.push(JSON.parse(event.data));
      if (messages.length === 1) resolve({ messages, close: () => source.close() });
    };
    source.onerror = (error) => {
      if (messages.length === 0) {
        source.close();
        reject(new Error(`stream failed: ${(error as { message?: string }).message ?? 'error'}`));
      }
    };
  });
}

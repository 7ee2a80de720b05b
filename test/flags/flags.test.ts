import { FLAG_CHANGES_CHANNEL, type FlagChangeEvent } from '../../api/features/flags/types';
import { eventually, startTestApp, type TestApp, type TestUser } from '../support/harness';
import { addService, createProjectFixture, projectToken, query, type ProjectFixture } from './fixtures';

let app: TestApp;
let fx: ProjectFixture;
let other: ProjectFixture;
let owner: TestUser;

beforeAll(async () => {
  app = await startTestApp();
  fx = await createProjectFixture(app, 'Project A');
  other = await createProjectFixture(app, 'Project B');
  owner = fx.owner;
});
afterAll(() => app?.stop());

let counter = 0;
const uniqueKey = (prefix = 'flag') => `${prefix}-${++counter}-${Date.now().toString(36)}`;
const ref = (serviceId: string, environment = 'development') => query({ serviceId, environment });

async function createFlag(body: Record<string, unknown> = {}, user: TestUser = owner) {
  const res = await user.request('POST', '/api/flags', { key: uniqueKey(), serviceId: fx.serviceId, ...body });
  if (res.status !== 201) throw new Error(`create failed: ${res.status} ${res.text}`);
  return res.body;
}

async function auditRows(flagId: string) {
  return app.platform.db.sql`SELECT action, actor, user_id, before, after, changes, metadata FROM audit_logs WHERE resource_id = ${flagId} ORDER BY timestamp, id`;
}

describe('POST /api/flags', () => {
  it('creates the flag in all three environments (disabled) and returns the development copy', async () => {
    const key = uniqueKey('checkout');
    const res = await owner.request('POST', '/api/flags', { key, serviceId: fx.serviceId, name: 'New checkout', enabled: true, tags: ['web', 'web', 'beta'] });
    expect(res.status).toBe(201);
    expect(res.body).toEqual({
      id: expect.stringMatching(/^flg_/),
      projectId: fx.projectId,
      serviceId: fx.serviceId,
      environment: 'development',
      key,
      name: 'New checkout',
      description: '',
      type: 'boolean',
      enabled: true,
      defaultValue: false,
      tags: ['web', 'beta'],
      variants: [],
      targeting: [],
      isPublic: false,
      version: 1,
      createdAt: expect.any(String),
      updatedAt: expect.any(String),
      inProcessCompatible: true,
      inProcessIssues: [],
    });
    for (const environment of ['staging', 'production']) {
      const copy = await owner.request('GET', `/api/flags/${key}${ref(fx.serviceId, environment)}`);
      expect(copy.status).toBe(200);
      expect(copy.body).toMatchObject({ key, environment, enabled: false, version: 1, name: 'New checkout' });
      expect(copy.body.id).not.toBe(res.body.id);
    }
    const versions = await app.platform.db.sql`SELECT version, change_type FROM flag_versions WHERE flag_key = ${key}`;
    expect(versions).toHaveLength(3);
    expect(versions.every((v) => v.version === 1 && v.change_type === 'create')).toBe(true);
    const audit = await auditRows(res.body.id);
    expect(audit).toHaveLength(1);
    expect(audit[0]).toMatchObject({ action: 'flag.create', actor: owner.email, user_id: owner.id, before: null, after: { key, enabled: true } });
    const outbox = await app.platform.db.sql`SELECT event FROM flag_outbox WHERE flag_key = ${key}`;
    expect(outbox.map((o) => o.event)).toEqual(['flag.created', 'flag.created', 'flag.created']);
  });

  it('creates only the requested environment when one is given', async () => {
    const key = uniqueKey();
    const res = await owner.request('POST', '/api/flags', {
      key,
      serviceId: fx.serviceId,
      environment: 'production',
      projectId: fx.projectId,
      type: 'string',
      defaultValue: 'blue',
      enabled: true,
    });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ environment: 'production', type: 'string', defaultValue: 'blue', enabled: true });
    expect((await owner.request('GET', `/api/flags/${key}${ref(fx.serviceId, 'development')}`)).status).toBe(404);
  });

  it('stores variants and targeting rules and generates missing rule ids', async () => {
    const flag = await createFlag({
      type: 'string',
      defaultValue: 'control',
      variants: [
        { name: 'a', value: 'red', weight: 33.3 },
        { name: 'b', value: 'green', weight: 66.7 },
      ],
      targeting: [
        { id: 'beta', conditions: [{ property: 'plan', operator: 'in', value: ['pro', 'team'] }], value: 'beta', rolloutPercentage: 50 },
        { conditions: [{ property: 'country', operator: 'equals', value: 'DE' }], value: 'de' },
      ],
    });
    expect(flag.variants).toEqual([
      { name: 'a', value: 'red', weight: 33.3 },
      { name: 'b', value: 'green', weight: 66.7 },
    ]);
    expect(flag.targeting[0]).toEqual({ id: 'beta', conditions: [{ property: 'plan', operator: 'in', value: ['pro', 'team'] }], value: 'beta', rolloutPercentage: 50 });
    expect(flag.targeting[1]).toEqual({ id: expect.stringMatching(/^rule_/), conditions: [{ property: 'country', operator: 'equals', value: 'DE' }], value: 'de' });
  });

  it.each([
    ['a string flag with a boolean default', { type: 'string', defaultValue: true }, 'body.defaultValue'],
    ['a number flag with a string default', { type: 'number', defaultValue: '3' }, 'body.defaultValue'],
    ['an object flag with a number default', { type: 'object', defaultValue: 3 }, 'body.defaultValue'],
    ['a boolean flag with a null default', { defaultValue: null }, 'body.defaultValue'],
    ['a variant value of the wrong type', { type: 'number', defaultValue: 1, variants: [{ name: 'a', value: 'x', weight: 100 }] }, 'body.variants.0.value'],
    ['a rule value of the wrong type', { type: 'object', defaultValue: {}, targeting: [{ conditions: [], value: 'x' }] }, 'body.targeting.0.value'],
    ['weights that do not sum to 100', { variants: [{ name: 'a', value: true, weight: 50 }, { name: 'b', value: false, weight: 40 }] }, 'body.variants'],
    ['a duplicate variant name', { variants: [{ name: 'a', value: true, weight: 50 }, { name: 'a', value: false, weight: 50 }] }, 'body.variants.1.name'],
    ['a negative weight', { variants: [{ name: 'a', value: true, weight: -1 }] }, 'body.variants.0.weight'],
    ['a rollout above 100', { targeting: [{ conditions: [], value: true, rolloutPercentage: 101 }] }, 'body.targeting.0.rolloutPercentage'],
    ['a rollout below 0', { targeting: [{ conditions: [], value: true, rolloutPercentage: -1 }] }, 'body.targeting.0.rolloutPercentage'],
    ['an unknown operator', { targeting: [{ conditions: [{ property: 'a', operator: 'roughly', value: 1 }], value: true }] }, 'body.targeting.0.conditions.0.operator'],
    ['an operand the operator cannot use', { targeting: [{ conditions: [{ property: 'v', operator: 'semver_gt', value: 'abc' }], value: true }] }, 'body.targeting.0.conditions.0'],
    ['a catastrophic regex', { targeting: [{ conditions: [{ property: 'v', operator: 'matches', value: '(a+)+$' }], value: true }] }, 'body.targeting.0.conditions.0'],
    ['duplicate rule ids', { targeting: [{ id: 'r', conditions: [], value: true }, { id: 'r', conditions: [], value: false }] }, 'body.targeting.1.id'],
    ['a rule without a value', { targeting: [{ conditions: [] }] }, 'body.targeting.0.value'],
    ['an unknown field', { colour: 'red' }, 'body'],
    ['an unknown field inside a condition', { targeting: [{ conditions: [{ property: 'a', operator: 'equals', value: 1, negate: true }], value: true }] }, 'body.targeting.0.conditions.0'],
    ['an unknown type', { type: 'date' }, 'body.type'],
    ['an unknown environment', { environment: 'qa' }, 'body.environment'],
    ['a key with a space', { key: 'has space' }, 'body.key'],
    ['a key starting with a dot', { key: '.hidden' }, 'body.key'],
    ['a key longer than 128', { key: 'k'.repeat(129) }, 'body.key'],
    ['a reserved key', { key: 'export' }, 'body.key'],
    ['a missing serviceId', { serviceId: undefined }, 'body.serviceId'],
  ])('refuses %s with 400 and changes nothing', async (_what, patch, path) => {
    const before = await app.platform.db.sql`SELECT count(*)::int AS n FROM flags`;
    const body: Record<string, unknown> = { key: uniqueKey(), serviceId: fx.serviceId, ...patch };
    const res = await owner.request('POST', '/api/flags', body);
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ error: 'Bad Request', message: expect.stringContaining('Validation failed') });
    expect(res.body.details.map((d: { path: string }) => d.path)).toContain(path);
    const after = await app.platform.db.sql`SELECT count(*)::int AS n FROM flags`;
    expect(after[0].n).toBe(before[0].n);
  });

  it('accepts every key character class and the 128-character maximum', async () => {
    for (const key of ['A', '9lives', 'a.b_c-D', 'k'.repeat(128)]) {
      const res = await owner.request('POST', '/api/flags', { key: `${key}`, serviceId: fx.serviceId, environment: 'staging' });
      expect(res.status).toBe(201);
    }
  });

  it('answers 409 on a duplicate key and creates nothing when one environment already has it', async () => {
    const key = uniqueKey();
    expect((await owner.request('POST', '/api/flags', { key, serviceId: fx.serviceId, environment: 'staging' })).status).toBe(201);
    const dupSame = await owner.request('POST', '/api/flags', { key, serviceId: fx.serviceId, environment: 'staging' });
    expect(dupSame.status).toBe(409);
    expect(dupSame.body).toEqual({ error: 'Conflict', message: expect.stringContaining(key) });
    const dupAll = await owner.request('POST', '/api/flags', { key, serviceId: fx.serviceId });
    expect(dupAll.status).toBe(409);
    expect((await owner.request('GET', `/api/flags/${key}${ref(fx.serviceId, 'development')}`)).status).toBe(404);
    // The same key in another service is a different flag.
    const second = await addService(owner, fx.projectId, `svc-${counter}`);
    expect((await owner.request('POST', '/api/flags', { key, serviceId: second, environment: 'staging' })).status).toBe(201);
  });

  it('answers 404 for an unknown service and 400 when projectId is not the service project', async () => {
    expect((await owner.request('POST', '/api/flags', { key: uniqueKey(), serviceId: 'svc_nope' })).status).toBe(404);
    const mismatch = await owner.request('POST', '/api/flags', { key: uniqueKey(), serviceId: fx.serviceId, projectId: other.projectId });
    expect(mismatch.status).toBe(400);
    expect(mismatch.body.details).toEqual([{ path: 'projectId', message: expect.any(String) }]);
  });

  it('enforces the 256 KB body limit', async () => {
    const res = await owner.request('POST', '/api/flags', { key: uniqueKey(), serviceId: fx.serviceId, description: 'x'.repeat(300 * 1024) });
    expect(res.status).toBe(413);
  });
});

describe('GET /api/flags/{key}', () => {
  it('reads a flag and answers 400 without serviceId, 404 for unknown keys', async () => {
    const flag = await createFlag();
    const got = await owner.request('GET', `/api/flags/${flag.key}${ref(fx.serviceId)}`);
    expect(got.status).toBe(200);
    expect(got.body).toEqual(flag);
    // environment defaults to development
    expect((await owner.request('GET', `/api/flags/${flag.key}?serviceId=${fx.serviceId}`)).body.id).toBe(flag.id);
    expect((await owner.request('GET', `/api/flags/${flag.key}`)).status).toBe(400);
    expect((await owner.request('GET', `/api/flags/${flag.key}${ref(fx.serviceId, 'qa')}`)).status).toBe(400);
    const missing = await owner.request('GET', `/api/flags/nope-${counter}${ref(fx.serviceId)}`);
    expect(missing.status).toBe(404);
    expect(missing.body).toEqual({ error: 'Not Found', message: expect.stringContaining('not found') });
  });
});

describe('PATCH /api/flags/{key}', () => {
  it('changes only the given fields, bumps the version, audits and emits flag.updated', async () => {
    const flag = await createFlag({ name: 'Before', description: 'keep me', tags: ['a'] });
    const res = await owner.request('PATCH', `/api/flags/${flag.key}${ref(fx.serviceId)}`, { name: 'After', isPublic: true, version: 1 });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ id: flag.id, name: 'After', description: 'keep me', tags: ['a'], isPublic: true, version: 2 });
    expect(Date.parse(res.body.updatedAt)).toBeGreaterThanOrEqual(Date.parse(flag.updatedAt));
    const audit = await auditRows(flag.id);
    expect(audit.map((a) => a.action)).toEqual(['flag.create', 'flag.update']);
    expect(audit[1].changes).toEqual(
      expect.arrayContaining([
        { field: 'name', oldValue: 'Before', newValue: 'After' },
        { field: 'isPublic', oldValue: false, newValue: true },
      ]),
    );
    expect(audit[1].changes).toHaveLength(2);
    const [event] = await app.platform.db.sql`SELECT payload FROM flag_outbox WHERE payload->'flag'->>'id' = ${flag.id} AND event = 'flag.updated'`;
    expect(event.payload.data).toEqual({
      flagKey: flag.key,
      projectId: fx.projectId,
      serviceId: fx.serviceId,
      environment: 'development',
      changes: { name: { from: 'Before', to: 'After' }, isPublic: { from: false, to: true } },
    });
  });

  it('answers 409 on a stale version and changes nothing', async () => {
    const flag = await createFlag();
    expect((await owner.request('PATCH', `/api/flags/${flag.key}${ref(fx.serviceId)}`, { name: 'v2' })).status).toBe(200);
    const stale = await owner.request('PATCH', `/api/flags/${flag.key}${ref(fx.serviceId)}`, { name: 'lost', version: 1 });
    expect(stale.status).toBe(409);
    expect(stale.body).toMatchObject({ error: 'Conflict', currentVersion: 2 });
    const now = await owner.request('GET', `/api/flags/${flag.key}${ref(fx.serviceId)}`);
    expect(now.body).toMatchObject({ name: 'v2', version: 2 });
    expect(await auditRows(flag.id)).toHaveLength(2);
  });

  it.each([
    ['key', { key: 'moved' }],
    ['serviceId', { serviceId: 'svc_other' }],
    ['environment', { environment: 'production' }],
    ['projectId', { projectId: 'prj_other' }],
  ])('refuses to move a flag by changing %s', async (field, body) => {
    const flag = await createFlag();
    const res = await owner.request('PATCH', `/api/flags/${flag.key}${ref(fx.serviceId)}`, body);
    expect(res.status).toBe(400);
    expect(res.body.details).toEqual([{ path: `body.${field}`, message: expect.stringContaining('cannot be changed') }]);
  });

  it('refuses unknown fields, empty patches and content that no longer fits the type', async () => {
    const flag = await createFlag({ variants: [{ name: 'on', value: true, weight: 100 }] });
    const path = `/api/flags/${flag.key}${ref(fx.serviceId)}`;
    expect((await owner.request('PATCH', path, { id: 'flg_x' })).status).toBe(400);
    expect((await owner.request('PATCH', path, { version: 1 })).status).toBe(400);
    expect((await owner.request('PATCH', path, {})).status).toBe(400);
    // Changing the type alone leaves a boolean default and variant: refused against the merged flag.
    const retype = await owner.request('PATCH', path, { type: 'number' });
    expect(retype.status).toBe(400);
    expect(retype.body.details.map((d: { path: string }) => d.path)).toEqual(expect.arrayContaining(['defaultValue', 'variants.0.value']));
    const ok = await owner.request('PATCH', path, { type: 'number', defaultValue: 0, variants: [{ name: 'one', value: 1, weight: 100 }] });
    expect(ok.status).toBe(200);
    expect(ok.body).toMatchObject({ type: 'number', defaultValue: 0, version: 2 });
    const badWeights = await owner.request('PATCH', path, { variants: [{ name: 'one', value: 1, weight: 99 }] });
    expect(badWeights.status).toBe(400);
    expect((await owner.request('GET', path)).body.version).toBe(2);
  });

  it('writes no version for a patch that changes nothing', async () => {
    const flag = await createFlag({ name: 'Same', targeting: [{ id: 'r1', conditions: [{ property: 'a', operator: 'equals', value: 1 }], value: true }] });
    const res = await owner.request('PATCH', `/api/flags/${flag.key}${ref(fx.serviceId)}`, {
      name: 'Same',
      targeting: [{ value: true, conditions: [{ value: 1, operator: 'equals', property: 'a' }], id: 'r1' }],
    });
    expect(res.status).toBe(200);
    expect(res.body.version).toBe(1);
    expect(await auditRows(flag.id)).toHaveLength(1);
  });

  it('answers 404 for an unknown flag', async () => {
    expect((await owner.request('PATCH', `/api/flags/nope${ref(fx.serviceId)}`, { name: 'x' })).status).toBe(404);
  });
});

describe('POST /api/flags/{key}/toggle', () => {
  it('flips without a body, sets with {enabled}, honours version, audits flag.toggle', async () => {
    const flag = await createFlag();
    const path = `/api/flags/${flag.key}/toggle${ref(fx.serviceId)}`;
    const flipped = await owner.request('POST', path);
    expect(flipped.status).toBe(200);
    expect(flipped.body).toMatchObject({ enabled: true, version: 2 });
    const set = await owner.request('POST', path, { enabled: false, version: 2 });
    expect(set.body).toMatchObject({ enabled: false, version: 3 });
    const stale = await owner.request('POST', path, { enabled: true, version: 2 });
    expect(stale.status).toBe(409);
    const again = await owner.request('POST', path, { enabled: false });
    expect(again.body).toMatchObject({ enabled: false, version: 3 });
    expect((await owner.request('POST', path, { enabled: 'yes' })).status).toBe(400);
    expect((await owner.request('POST', path, { flip: true })).status).toBe(400);
    const audit = await auditRows(flag.id);
    expect(audit.map((a) => a.action)).toEqual(['flag.create', 'flag.toggle', 'flag.toggle']);
    expect(audit[1].changes).toEqual([{ field: 'enabled', oldValue: false, newValue: true }]);
    const events = await app.platform.db.sql`SELECT event FROM flag_outbox WHERE payload->'data'->>'flagKey' = ${flag.key} ORDER BY seq`;
    expect(events.map((e) => e.event)).toEqual(['flag.created', 'flag.created', 'flag.created', 'flag.toggled', 'flag.toggled']);
    expect((await owner.request('POST', `/api/flags/nope/toggle${ref(fx.serviceId)}`)).status).toBe(404);
  });

  it('loses no update under 200 concurrent toggles, and a toggle answered 503 commits nothing', async () => {
    const flag = await createFlag({ environment: 'production' });
    const received: FlagChangeEvent[] = [];
    const unsubscribe = await app.platform.cache.subscribe(FLAG_CHANGES_CHANNEL, (m) => {
      const event = JSON.parse(m) as FlagChangeEvent;
      if (event.flag?.id === flag.id && event.event === 'flag.toggled') received.push(event);
    });
    const path = `/api/flags/${flag.key}/toggle${ref(fx.serviceId, 'production')}`;
    const results = await Promise.all(Array.from({ length: 200 }, () => app.request('POST', path, { cookie: owner.cookie, csrf: owner.csrf })));
    // The toggles queue on one row: on a loaded machine the last may pass the request deadline,
    // which answers 503 and must leave no trace. Anything else is a failure.
    const refused = results.filter((r) => r.status === 503);
    for (const r of refused) expect(r.headers.get('retry-after')).toBe('5');
    const unexpected = results.filter((r) => r.status !== 200 && r.status !== 503).map((r) => `${r.status} ${r.text}`);
    if (unexpected.length) throw new Error(`${unexpected.length} toggles failed: ${unexpected.slice(0, 5).join(' | ')}\nserver errors:\n${app.errorLog().join('\n')}`);
    const committed = results.length - refused.length;
    // Enough toggles commit for the order to mean something (all 200 on an idle machine).
    expect(committed).toBeGreaterThanOrEqual(50);
    const versions = await app.platform.db.sql`SELECT version, snapshot FROM flag_versions WHERE flag_id = ${flag.id} ORDER BY version`;
    expect(versions.map((v) => v.version)).toEqual(Array.from({ length: committed + 1 }, (_, i) => i + 1));
    // Every version is a flip of the one before.
    for (let i = 1; i < versions.length; i++) expect(versions[i].snapshot.enabled).toBe(!versions[i - 1].snapshot.enabled);
    const toggles = await app.platform.db.sql`SELECT count(*)::int AS n FROM audit_logs WHERE resource_id = ${flag.id} AND action = 'flag.toggle'`;
    expect(toggles[0].n).toBe(committed);
    const now = await owner.request('GET', `/api/flags/${flag.key}${ref(fx.serviceId, 'production')}`);
    expect(now.body).toMatchObject({ version: committed + 1, enabled: committed % 2 === 1 });
    const responseVersions = results.filter((r) => r.status === 200).map((r) => r.body.version).sort((a, b) => a - b);
    expect(responseVersions).toEqual(Array.from({ length: committed }, (_, i) => i + 2));
    // Each committed toggle reaches the bus exactly once, in version order.
    await eventually(async () => received.length >= committed);
    await new Promise((r) => setTimeout(r, 200));
    await unsubscribe();
    expect(received.map((e) => e.flag?.version)).toEqual(Array.from({ length: committed }, (_, i) => i + 2));
  });

  it('lets exactly one of many writers with the same expected version win', async () => {
    const flag = await createFlag();
    const path = `/api/flags/${flag.key}${ref(fx.serviceId)}`;
    const results = await Promise.all(Array.from({ length: 20 }, (_, i) => owner.request('PATCH', path, { name: `writer ${i}`, version: 1 })));
    expect(results.filter((r) => r.status === 200)).toHaveLength(1);
    expect(results.filter((r) => r.status === 409)).toHaveLength(19);
    expect((await owner.request('GET', path)).body.version).toBe(2);
  });
});

describe('DELETE /api/flags/{key}', () => {
  it('deletes one environment copy, audits flag.delete and emits flag.deleted', async () => {
    const flag = await createFlag();
    const stale = await owner.request('DELETE', `/api/flags/${flag.key}${query({ serviceId: fx.serviceId, environment: 'development', version: 5 })}`);
    expect(stale.status).toBe(409);
    const res = await owner.request('DELETE', `/api/flags/${flag.key}${query({ serviceId: fx.serviceId, environment: 'development', version: 1 })}`);
    expect(res.status).toBe(204);
    expect(res.text).toBe('');
    expect((await owner.request('GET', `/api/flags/${flag.key}${ref(fx.serviceId)}`)).status).toBe(404);
    expect((await owner.request('GET', `/api/flags/${flag.key}${ref(fx.serviceId, 'staging')}`)).status).toBe(200);
    const audit = await auditRows(flag.id);
    expect(audit.at(-1)).toMatchObject({ action: 'flag.delete', after: null, before: { key: flag.key } });
    const [event] = await app.platform.db.sql`SELECT payload FROM flag_outbox WHERE event = 'flag.deleted' AND payload->'data'->>'flagKey' = ${flag.key}`;
    expect(event.payload).toMatchObject({ event: 'flag.deleted', flag: null, data: { flagKey: flag.key, environment: 'development' } });
    expect((await owner.request('DELETE', `/api/flags/${flag.key}${ref(fx.serviceId)}`)).status).toBe(404);
    // The key is free again.
    expect((await owner.request('POST', '/api/flags', { key: flag.key, serviceId: fx.serviceId, environment: 'development' })).status).toBe(201);
  });
});

describe('history and rollback', () => {
  it('lists versions newest first with snapshots, and pages', async () => {
    const flag = await createFlag({ type: 'string', defaultValue: 'v1' });
    const path = `/api/flags/${flag.key}`;
    await owner.request('PATCH', `${path}${ref(fx.serviceId)}`, { defaultValue: 'v2' });
    await owner.request('POST', `${path}/toggle${ref(fx.serviceId)}`);
    const history = await owner.request('GET', `${path}/history${ref(fx.serviceId)}`);
    expect(history.status).toBe(200);
    expect(history.body).toMatchObject({ total: 3, hasMore: false });
    expect(history.body.versions.map((v: any) => [v.version, v.changeType])).toEqual([
      [3, 'toggle'],
      [2, 'update'],
      [1, 'create'],
    ]);
    expect(history.body.versions[1]).toEqual({
      id: expect.any(String),
      version: 2,
      changeType: 'update',
      snapshot: expect.objectContaining({ id: flag.id, key: flag.key, defaultValue: 'v2', enabled: false, version: 2 }),
      actor: owner.email,
      actorDisplay: { kind: 'user', id: owner.id, name: expect.any(String), email: owner.email },
      userId: owner.id,
      createdAt: expect.any(String),
    });
    const page = await owner.request('GET', `${path}/history${query({ serviceId: fx.serviceId, limit: 1, offset: 1 })}`);
    expect(page.body).toMatchObject({ total: 3, hasMore: true });
    expect(page.body.versions.map((v: any) => v.version)).toEqual([2]);
    expect((await owner.request('GET', `${path}/history${query({ serviceId: fx.serviceId, limit: 101 })}`)).status).toBe(400);
    expect((await owner.request('GET', `/api/flags/nope/history${ref(fx.serviceId)}`)).status).toBe(404);
  });

  it('restores a snapshot as a new version, audited as flag.update with rollbackTo', async () => {
    const flag = await createFlag({ type: 'number', defaultValue: 1, tags: ['x'] });
    const base = `/api/flags/${flag.key}`;
    await owner.request('PATCH', `${base}${ref(fx.serviceId)}`, { defaultValue: 2, tags: ['y'], enabled: true });
    const rolled = await owner.request('POST', `${base}/rollback/1${ref(fx.serviceId)}`);
    expect(rolled.status).toBe(200);
    expect(rolled.body).toMatchObject({ id: flag.id, defaultValue: 1, tags: ['x'], enabled: false, version: 3 });
    const audit = await auditRows(flag.id);
    expect(audit.at(-1)).toMatchObject({ action: 'flag.update', metadata: expect.objectContaining({ rollbackTo: 1 }) });
    const history = await owner.request('GET', `${base}/history${ref(fx.serviceId)}`);
    expect(history.body.versions[0]).toMatchObject({ version: 3, changeType: 'rollback' });
    expect((await owner.request('POST', `${base}/rollback/99${ref(fx.serviceId)}`)).status).toBe(404);
    expect((await owner.request('POST', `${base}/rollback/zero${ref(fx.serviceId)}`)).status).toBe(400);
    expect((await owner.request('POST', `${base}/rollback/0${ref(fx.serviceId)}`)).status).toBe(400);
    expect((await fx.users.viewer.request('POST', `${base}/rollback/1${ref(fx.serviceId)}`)).status).toBe(403);
  });
});

describe('GET /api/flags (list)', () => {
  let listService: string;
  let keys: string[];

  beforeAll(async () => {
    listService = await addService(owner, fx.projectId, 'list-svc');
    keys = [];
    for (let i = 0; i < 12; i++) {
      const key = `list-${String(i).padStart(2, '0')}`;
      keys.push(key);
      const res = await owner.request('POST', '/api/flags', {
        key,
        serviceId: listService,
        environment: 'production',
        name: i % 2 ? `Odd ${i}` : `Even ${i}`,
        type: i < 8 ? 'boolean' : 'string',
        defaultValue: i < 8 ? false : 's',
        enabled: i % 3 === 0,
        tags: i % 4 === 0 ? ['team-a'] : i % 4 === 1 ? ['team-b'] : [],
      });
      expect(res.status).toBe(201);
    }
  });

  const list = (params: Record<string, string | number | boolean | undefined>, user: TestUser = owner) =>
    user.request('GET', `/api/flags${query({ projectId: fx.projectId, serviceId: listService, ...params })}`);

  it('lists with totals and filters', async () => {
    const all = await list({});
    expect(all.status).toBe(200);
    expect(all.body).toMatchObject({ total: 12, limit: 50, offset: 0, hasMore: false, nextCursor: null, prevCursor: null });
    expect(all.body.flags.map((f: any) => f.key)).toEqual(keys);
    expect((await list({ environment: 'production' })).body.total).toBe(12);
    expect((await list({ environment: 'staging' })).body.total).toBe(0);
    expect((await list({ search: 'ODD' })).body.total).toBe(6);
    expect((await list({ search: 'list-1' })).body.flags.map((f: any) => f.key)).toEqual(['list-10', 'list-11']);
    expect((await list({ search: '%' })).body.total).toBe(0);
    expect((await list({ tags: 'team-a' })).body.total).toBe(3);
    expect((await list({ tags: 'team-a,team-b' })).body.total).toBe(6);
    expect((await list({ enabled: true })).body.flags.map((f: any) => f.key)).toEqual(['list-00', 'list-03', 'list-06', 'list-09']);
    expect((await list({ enabled: false })).body.total).toBe(8);
    expect((await list({ type: 'string' })).body.total).toBe(4);
    expect((await list({ type: 'string', enabled: true })).body.flags.map((f: any) => f.key)).toEqual(['list-09']);
    // Without serviceId the whole project is listed.
    const project = await owner.request('GET', `/api/flags${query({ projectId: fx.projectId })}`);
    expect(project.body.total).toBeGreaterThan(12);
  });

  it('pages by offset and caps the limit at 100', async () => {
    const first = await list({ limit: 5 });
    expect(first.body).toMatchObject({ total: 12, limit: 5, offset: 0, hasMore: true, prevCursor: null });
    expect(first.body.nextCursor).toEqual(expect.any(String));
    const third = await list({ limit: 5, offset: 10 });
    expect(third.body.flags.map((f: any) => f.key)).toEqual(['list-10', 'list-11']);
    expect(third.body).toMatchObject({ hasMore: false, nextCursor: null, prevCursor: expect.any(String) });
    expect((await list({ limit: 1000 })).body.limit).toBe(100);
    expect((await list({ limit: 0 })).status).toBe(400);
    expect((await list({ offset: -1 })).status).toBe(400);
  });

  it('pages by cursor in both directions with a stable order', async () => {
    const seen: string[] = [];
    let page = await list({ limit: 5 });
    seen.push(...page.body.flags.map((f: any) => f.key));
    const cursors: string[] = [];
    while (page.body.nextCursor) {
      cursors.push(page.body.nextCursor);
      page = await list({ limit: 5, cursor: page.body.nextCursor, cursor_direction: 'next' });
      expect(page.status).toBe(200);
      seen.push(...page.body.flags.map((f: any) => f.key));
    }
    expect(seen).toEqual(keys);
    expect(page.body).toMatchObject({ hasMore: false, nextCursor: null, prevCursor: expect.any(String) });
    // Back from the last page.
    const back = await list({ limit: 5, cursor: page.body.prevCursor, cursor_direction: 'prev' });
    expect(back.body.flags.map((f: any) => f.key)).toEqual(keys.slice(5, 10));
    expect(back.body).toMatchObject({ hasMore: true, nextCursor: expect.any(String), prevCursor: expect.any(String) });
    const start = await list({ limit: 5, cursor: back.body.prevCursor, cursor_direction: 'prev' });
    expect(start.body.flags.map((f: any) => f.key)).toEqual(keys.slice(0, 5));
    expect(start.body.prevCursor).toBeNull();
    expect((await list({ cursor: 'garbage' })).status).toBe(400);
    expect((await list({ cursor: cursors[0], offset: 5 })).status).toBe(400);
    expect((await list({ cursor: cursors[0], cursor_direction: 'sideways' })).status).toBe(400);
  });

  it('projects fields and refuses unknown ones', async () => {
    const res = await list({ fields: 'key,enabled', limit: 2 });
    expect(res.body.flags).toEqual([
      { key: 'list-00', enabled: true },
      { key: 'list-01', enabled: false },
    ]);
    const withVersion = await list({ fields: 'key,version,updatedAt', limit: 1 });
    expect(Object.keys(withVersion.body.flags[0]).sort()).toEqual(['key', 'updatedAt', 'version']);
    const bad = await list({ fields: 'key,secret' });
    expect(bad.status).toBe(400);
    expect(bad.body.details).toEqual([{ path: 'query.fields', message: expect.stringContaining('secret') }]);
  });

  it('needs projectId and valid filter values', async () => {
    expect((await owner.request('GET', '/api/flags')).status).toBe(400);
    expect((await list({ enabled: 'maybe' })).status).toBe(400);
    expect((await list({ type: 'date' })).status).toBe(400);
    expect((await list({ environment: 'qa' })).status).toBe(400);
  });
});

describe('access control', () => {
  let flag: any;
  beforeAll(async () => {
    flag = await createFlag();
  });
  const at = (suffix = '', environment = 'development') => `/api/flags/${flag.key}${suffix}${ref(fx.serviceId, environment)}`;

  it('lets a member of another project neither read nor change the flags (404, no oracle)', async () => {
    const outsider = other.owner;
    const unknownService = await outsider.request('GET', `/api/flags/${flag.key}${ref('svc_does_not_exist')}`);
    const checks = [
      await outsider.request('GET', at()),
      await outsider.request('PATCH', at(), { name: 'pwned' }),
      await outsider.request('POST', at('/toggle')),
      await outsider.request('DELETE', at()),
      await outsider.request('GET', at('/history')),
      await outsider.request('POST', at('/rollback/1')),
      await outsider.request('POST', '/api/flags', { key: uniqueKey(), serviceId: fx.serviceId }),
      await outsider.request('GET', `/api/flags${query({ projectId: fx.projectId })}`),
    ];
    for (const res of checks) expect(res.status).toBe(404);
    expect(checks[0].body).toEqual(unknownService.body);
    // Filtering by another project's service inside one's own project yields nothing.
    const cross = await outsider.request('GET', `/api/flags${query({ projectId: other.projectId, serviceId: fx.serviceId })}`);
    expect(cross.body).toMatchObject({ total: 0, flags: [] });
    const now = await owner.request('GET', at());
    expect(now.body).toMatchObject({ version: 1, name: flag.name });
  });

  it('lets a viewer read only', async () => {
    const viewer = fx.users.viewer;
    expect((await viewer.request('GET', at())).status).toBe(200);
    expect((await viewer.request('GET', `/api/flags${query({ projectId: fx.projectId })}`)).status).toBe(200);
    expect((await viewer.request('GET', at('/history'))).status).toBe(200);
    for (const res of [
      await viewer.request('POST', '/api/flags', { key: uniqueKey(), serviceId: fx.serviceId }),
      await viewer.request('PATCH', at(), { isPublic: true }),
      await viewer.request('POST', at('/toggle')),
    ]) {
      expect(res.status).toBe(403);
      expect(res.body).toEqual({ error: 'Forbidden', message: "Forbidden: You need 'write' permission" });
    }
    const del = await viewer.request('DELETE', at());
    expect(del.status).toBe(403);
    expect(del.body.message).toBe("Forbidden: You need 'delete' permission");
    expect((await owner.request('GET', at())).body.isPublic).toBe(false);
  });

  it('lets a member write but not delete; admins delete', async () => {
    const member = fx.users.member;
    expect((await member.request('PATCH', at(), { description: 'by member' })).status).toBe(200);
    expect((await member.request('POST', at('/toggle'))).status).toBe(200);
    const del = await member.request('DELETE', at());
    expect(del.status).toBe(403);
    expect(del.body.message).toBe("Forbidden: You need 'delete' permission");
    expect((await fx.users.admin.request('DELETE', at('', 'staging'))).status).toBe(204);
  });

  it('needs authentication and the CSRF header for cookie sessions', async () => {
    expect((await app.request('GET', at())).status).toBe(401);
    expect((await app.request('POST', '/api/flags', { body: { key: uniqueKey(), serviceId: fx.serviceId } })).status).toBe(401);
    const noCsrf = await app.request('POST', at('/toggle'), { cookie: owner.cookie });
    expect(noCsrf.status).toBe(403);
  });

  it('applies personal token tiers on top of the user role', async () => {
    await app.platform.db.sql`UPDATE users SET email_verified = true WHERE id IN (${fx.users.member.id}, ${fx.users.viewer.id})`;
    const pat = async (user: TestUser, tier: string) => {
      const res = await user.request('POST', '/api/users/me/personal-tokens', { name: `pat-${tier}`, tier });
      expect(res.status).toBe(201);
      return res.body.value as string;
    };
    const memberRead = await pat(fx.users.member, 'read');
    const memberWrite = await pat(fx.users.member, 'write');
    const viewerWrite = await pat(fx.users.viewer, 'write');
    expect((await app.request('GET', at('', 'production'), { token: memberRead })).status).toBe(200);
    const readOnly = await app.request('POST', at('/toggle', 'production'), { token: memberRead });
    expect(readOnly.status).toBe(403);
    expect(readOnly.body.message).toMatch(/read-only/);
    expect((await app.request('POST', at('/toggle', 'production'), { token: memberWrite })).status).toBe(200);
    // A write-tier token never exceeds its owner's role.
    const viewer = await app.request('POST', at('/toggle', 'production'), { token: viewerWrite });
    expect(viewer.status).toBe(403);
    expect(viewer.body.message).toBe("Forbidden: You need 'write' permission");
    expect((await app.request('DELETE', at('', 'production'), { token: memberWrite })).status).toBe(403);
  });

  it('applies project API token permissions and scopes them to their project', async () => {
    const readOnly = await projectToken(owner, fx.projectId, { read: true });
    const writer = await projectToken(owner, fx.projectId, { read: true, write: true });
    const foreign = await projectToken(other.owner, other.projectId, { read: true, write: true, delete: true });
    expect((await app.request('GET', at('', 'production'), { token: readOnly })).status).toBe(200);
    expect((await app.request('POST', at('/toggle', 'production'), { token: readOnly })).status).toBe(403);
    const toggled = await app.request('POST', at('/toggle', 'production'), { token: writer });
    expect(toggled.status).toBe(200);
    expect((await app.request('DELETE', at('', 'production'), { token: writer })).status).toBe(403);
    expect((await app.request('GET', at('', 'production'), { token: foreign })).status).toBe(404);
    expect((await app.request('GET', `/api/flags${query({ projectId: fx.projectId })}`, { token: foreign })).status).toBe(404);
    const audit = await app.platform.db.sql`SELECT actor FROM audit_logs WHERE resource_id = ${toggled.body.id} AND action = 'flag.toggle' ORDER BY timestamp DESC LIMIT 1`;
    expect(audit[0].actor).toMatch(/^token:/);
  });
});

describe('OpenAPI', () => {
  it('documents every flag route from the same schemas that validate it', async () => {
    const res = await app.request('GET', '/api/openapi.json');
    expect(res.status).toBe(200);
    const paths = res.body.paths;
    expect(Object.keys(paths)).toEqual(
      expect.arrayContaining(['/api/flags', '/api/flags/{key}', '/api/flags/{key}/toggle', '/api/flags/{key}/history', '/api/flags/{key}/rollback/{version}']),
    );
    expect(Object.keys(paths['/api/flags/{key}']).sort()).toEqual(['delete', 'get', 'patch']);
    const create = paths['/api/flags'].post.requestBody.content['application/json'].schema;
    expect(create.additionalProperties).toBe(false);
    expect(create.properties.key.description).toContain('Pattern');
  });
});

describe('FlagService on the platform', () => {
  it('is the same mutation path for in-process writers (actor names recorded as given)', async () => {
    const flag = await createFlag();
    const service = app.platform.flagService;
    const actor = { name: 'trigger:nightly', userId: null };
    const toggled = await service.toggle(actor, { key: flag.key, serviceId: fx.serviceId, environment: 'development' }, true, undefined, { metadata: { triggerId: 'trg_1' } });
    expect(toggled).toMatchObject({ enabled: true, version: 2 });
    const [audit] = await app.platform.db.sql`SELECT actor, metadata FROM audit_logs WHERE resource_id = ${flag.id} AND action = 'flag.toggle'`;
    expect(audit).toMatchObject({ actor: 'trigger:nightly', metadata: expect.objectContaining({ triggerId: 'trg_1', version: 2 }) });
    await expect(service.update(actor, { key: flag.key, serviceId: fx.serviceId, environment: 'development' }, { name: 'x' }, 1)).rejects.toMatchObject({ status: 409 });
  });
});

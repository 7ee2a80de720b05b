import { compileFlag, evaluate, type FlagDefinition } from '../../api/features/evaluation/engine';
import { eventually, startTestApp, type TestApp } from '../support/harness';
import { createProject, expectStatus, opaqueToken, personalToken, type Project } from '../webhooks/support';

/**
 * POST /api/flags/{key}/simulate over HTTP (docs/simulate.md;
 * docs/api-reference.md#personal-access-tokens): contexts from the context ring (evaluated over the
 * API with a project token) and from the recent-contexts warehouse (rows put in directly), exact
 * counts, nothing written, access.
 */

let app: TestApp;
let p: Project;
let other: Project;
let evaluateToken: string;
// Each test app has its own database; a fixed key keeps the rollout buckets below the same on every run.
const key = 'checkout-v2';
const BETA_RULE = { id: 'beta', conditions: [{ property: 'plan', operator: 'equals', value: 'beta' }], value: 'beta' };
const FLAG = { key, name: 'Checkout', type: 'string', enabled: true, defaultValue: 'off', variants: [], targeting: [BETA_RULE] };

const simulate = (body: unknown, flagKey = key) => p.owner.request('POST', `/api/flags/${flagKey}/simulate`, body);
const body = (candidateFlag: unknown, extra: Record<string, unknown> = {}) => ({ serviceId: p.serviceId, environment: 'production', candidateFlag, ...extra });

async function evaluateOver(context: Record<string, unknown>) {
  const res = await app.request('POST', '/api/flags/evaluate', { token: evaluateToken, body: { flagKey: key, serviceId: p.serviceId, environment: 'production', context } });
  expectStatus(res, 200, 'evaluate');
}

/** The recorder hands rows over on the next turn; the writer then inserts them on flush. */
async function flushAnalytics() {
  await new Promise((resolve) => setImmediate(resolve));
  await app.platform.analyticsWriter.flush();
}

async function count(query: string, params: Record<string, unknown>): Promise<number> {
  const rs = await app.platform.analytics.client.query({ query, query_params: params, format: 'JSONEachRow' });
  const [row] = await rs.json<{ n: string | number }>();
  return Number(row.n);
}

const chTime = (ms: number) => new Date(ms).toISOString().replace('T', ' ').replace('Z', '');
const HOUR = 3600_000;

async function storeContexts(rows: { key: string; attributes: Record<string, unknown>; agoMs: number; environment?: string }[]) {
  await app.platform.analytics.client.insert({
    table: 'recent_contexts',
    format: 'JSONEachRow',
    values: rows.map((row) => ({
      service_id: p.serviceId,
      environment: row.environment ?? 'production',
      targeting_key: row.key,
      attributes: JSON.stringify(row.attributes),
      seen_at: chTime(Date.now() - row.agoMs),
    })),
  });
}

const acmeProfile = { email: 'x@acme.com', tier: 'gold' };

beforeAll(async () => {
  app = await startTestApp();
  p = await createProject(app);
  other = await createProject(app);
  expectStatus(await p.owner.request('POST', '/api/flags', { ...FLAG, serviceId: p.serviceId, environment: 'production' }), 201, 'create flag');
  evaluateToken = await opaqueToken(p.owner, p.projectId, { read: true });
  await eventually(async () => (await app.request('POST', '/api/flags/evaluate', { token: evaluateToken, body: { flagKey: key, serviceId: p.serviceId, environment: 'production' } })).body?.reason === 'DEFAULT');

  // The ring, most recent last: r-2, r-3, r-4, then r-1 twice (its second context is the one the ring keeps).
  await evaluateOver({ targetingKey: 'r-1', plan: 'beta', email: 'ann@acme.com', profile: acmeProfile });
  await evaluateOver({ targetingKey: 'r-2', plan: 'beta' });
  await evaluateOver({ targetingKey: 'r-3', plan: 'free', blob: 'x'.repeat(5_000) });
  await evaluateOver({ targetingKey: 'r-4', plan: 'pro' });
  await evaluateOver({ targetingKey: 'r-1', plan: 'free', email: 'ann@acme.com', profile: acmeProfile });
  // Only the warehouse knows these (other instances' evaluations); one is older than 7 days, one of another environment,
  // one a key the ring has too.
  await storeContexts([
    { key: 'w-1', attributes: { plan: 'pro' }, agoMs: 1 * HOUR },
    { key: 'w-2', attributes: { plan: 'beta' }, agoMs: 2 * HOUR },
    { key: 'w-3', attributes: { plan: 'free' }, agoMs: 3 * HOUR },
    { key: 'r-2', attributes: { plan: 'pro' }, agoMs: 5 * HOUR },
    { key: 'w-old', attributes: { plan: 'pro' }, agoMs: 8 * 24 * HOUR },
    { key: 'w-staging', attributes: { plan: 'pro' }, agoMs: HOUR, environment: 'staging' },
  ]);
  await flushAnalytics();
});
afterAll(async () => {
  await app?.stop();
});

describe('recording recent contexts', () => {
  it('stores one row per key however often it is evaluated, without deny-listed attributes (at any depth) or attributes past the size cap', async () => {
    const rows = await app.platform.analytics.client.query({
      query: `SELECT targeting_key, attributes FROM recent_contexts WHERE service_id = {serviceId:String} AND targeting_key IN ('r-1', 'r-3', 'r-4') ORDER BY targeting_key`,
      query_params: { serviceId: p.serviceId },
      format: 'JSONEachRow',
    });
    const stored = (await rows.json<{ targeting_key: string; attributes: string }>()).map((row) => [row.targeting_key, JSON.parse(row.attributes)]);
    // r-1 twice within a minute: its first context only (had the second been written, it would be the latest).
    expect(stored).toEqual([
      ['r-1', { plan: 'beta', profile: { tier: 'gold' } }],
      ['r-3', { plan: 'free' }],
      ['r-4', { plan: 'pro' }],
    ]);
    const raw = JSON.stringify(stored);
    expect(raw).not.toContain('acme.com');
    expect(raw).not.toContain('xxxx');
  });
});

describe('simulating a candidate', () => {
  it('counts exactly over the ring first, then the warehouse, one context per key, most recent first', async () => {
    const res = await simulate(body({ targeting: [{ ...BETA_RULE, conditions: [{ property: 'plan', operator: 'in', value: ['beta', 'pro'] }] }] }));
    expectStatus(res, 200, 'simulate');
    // Cohort: r-1 (free, its latest context), r-4 (pro), r-3 (free), r-2 (beta, the ring's), then w-1 (pro), w-2 (beta), w-3 (free).
    expect(res.body).toEqual({
      flagKey: key,
      cohortSize: 1000,
      evaluated: 7,
      changed: 2,
      unchanged: 5,
      transitions: [{ from: 'off', to: 'beta', count: 2 }],
      byRule: [
        { ruleId: 'beta', outcome: 'rule', before: 2, after: 4 },
        { ruleId: '$default', outcome: 'default', before: 5, after: 3 },
      ],
      examples: [
        { targetingKey: 'r-4', before: 'off', after: 'beta', beforeRuleId: '$default', afterRuleId: 'beta' },
        { targetingKey: 'w-1', before: 'off', after: 'beta', beforeRuleId: '$default', afterRuleId: 'beta' },
      ],
      sources: { ring: 4, warehouse: 3 },
    });
  });

  it('takes the most recent keys up to cohortSize', async () => {
    const res = await simulate(body({ enabled: false }, { cohortSize: 3 }));
    expectStatus(res, 200, 'simulate');
    // r-1, r-4, r-3: none served beta, so turning the flag off changes nothing.
    expect(res.body).toMatchObject({
      cohortSize: 3,
      evaluated: 3,
      changed: 0,
      unchanged: 3,
      transitions: [],
      byRule: [
        { ruleId: 'beta', outcome: 'rule', before: 0, after: 0 },
        { ruleId: '$default', outcome: 'default', before: 3, after: 0 },
        { ruleId: '$disabled', outcome: 'disabled', before: 0, after: 3 },
      ],
      sources: { ring: 3, warehouse: 0 },
    });
    const five = await simulate(body({ enabled: false }, { cohortSize: 5 }));
    expect(five.body).toMatchObject({ evaluated: 5, changed: 1, sources: { ring: 4, warehouse: 1 }, examples: [{ targetingKey: 'r-2', before: 'beta', after: 'off' }] });
  });

  it('buckets a rollout change as evaluation does', async () => {
    const candidate = { targeting: [{ ...BETA_RULE, conditions: [], rolloutPercentage: 50 }] };
    const res = await simulate(body(candidate));
    expectStatus(res, 200, 'simulate');
    const definition: FlagDefinition = { key, type: 'string', enabled: true, defaultValue: 'off', variants: [], targeting: candidate.targeting };
    const compiled = compileFlag(definition);
    const cohort: [string, string][] = [['r-1', 'free'], ['r-4', 'pro'], ['r-3', 'free'], ['r-2', 'beta'], ['w-1', 'pro'], ['w-2', 'beta'], ['w-3', 'free']];
    const inside = cohort.filter(([targetingKey]) => evaluate(compiled, key, { targetingKey }, null).reason === 'TARGETING_MATCH');
    const beforeBeta = new Set(['r-2', 'w-2']);
    const changed = cohort.filter(([k]) => inside.some(([i]) => i === k) !== beforeBeta.has(k));
    expect(inside.length).toBeGreaterThan(0);
    expect(inside.length).toBeLessThan(7);
    expect(res.body).toMatchObject({
      evaluated: 7,
      changed: changed.length,
      byRule: [
        { ruleId: 'beta', outcome: 'rule', before: 2, after: inside.length },
        { ruleId: '$default', outcome: 'default', before: 5, after: 7 - inside.length },
      ],
    });
  });

  it('replays the stored attributes only: a rule on a deny-listed attribute matches nobody, other nested attributes still target', async () => {
    const res = await simulate(
      body({
        targeting: [
          { id: 'acme', conditions: [{ property: 'email', operator: 'ends_with', value: '@acme.com' }], value: 'acme' },
          { id: 'acme-profile', conditions: [{ property: 'profile.email', operator: 'ends_with', value: '@acme.com' }], value: 'acme' },
          { conditions: [{ property: 'profile.tier', operator: 'equals', value: 'gold' }], value: 'gold' },
        ],
      }),
    );
    expectStatus(res, 200, 'simulate');
    expect(res.body).toMatchObject({
      evaluated: 7,
      changed: 3,
      unchanged: 4,
      transitions: [
        { from: 'beta', to: 'off', count: 2 },
        { from: 'off', to: 'gold', count: 1 },
      ],
      byRule: [
        { ruleId: 'beta', outcome: 'rule', before: 2, after: 0 },
        { ruleId: 'acme', outcome: 'rule', before: 0, after: 0 },
        { ruleId: 'acme-profile', outcome: 'rule', before: 0, after: 0 },
        { ruleId: '$new:2', outcome: 'rule', before: 0, after: 1 },
        { ruleId: '$default', outcome: 'default', before: 5, after: 6 },
      ],
      examples: [
        { targetingKey: 'r-1', before: 'off', after: 'gold', beforeRuleId: '$default', afterRuleId: '$new:2' },
        { targetingKey: 'r-2', before: 'beta', after: 'off', beforeRuleId: 'beta', afterRuleId: '$default' },
        { targetingKey: 'w-2', before: 'beta', after: 'off', beforeRuleId: 'beta', afterRuleId: '$default' },
      ],
    });
  });

  it('names variant outcomes by variant', async () => {
    const variants = [
      { name: 'a', value: 'A', weight: 50 },
      { name: 'b', value: 'B', weight: 50 },
    ];
    const res = await simulate(body({ variants, targeting: [] }));
    expectStatus(res, 200, 'simulate');
    const [beta, a, b, fallback] = res.body.byRule;
    expect(beta).toEqual({ ruleId: 'beta', outcome: 'rule', before: 2, after: 0 });
    expect([a.ruleId, b.ruleId, a.before, b.before, a.after + b.after]).toEqual(['$variant:a', '$variant:b', 0, 0, 7]);
    expect(fallback).toEqual({ ruleId: '$default', outcome: 'default', before: 5, after: 0 });
    expect(res.body.changed).toBe(7);
  });

  it("resolves the project's cohorts in the candidate, and refuses a cohort that is not one of them (400 with the rule's path)", async () => {
    const cohort = await p.owner.request('POST', `/api/projects/${p.projectId}/cohorts`, { name: 'Pro', rules: [{ id: 'pro', conditions: [{ property: 'plan', operator: 'equals', value: 'pro' }] }] });
    expectStatus(cohort, 201, 'cohort');
    const inCohort = (id: string) => ({ targeting: [BETA_RULE, { id: 'pros', conditions: [{ property: 'targetingKey', operator: 'in_cohort', value: id }], value: 'pro' }] });
    // The snapshots learn of the cohort through the change bus.
    const res = await eventually(async () => {
      const r = await simulate(body(inCohort(cohort.body.id)));
      return r.status === 200 ? r : undefined;
    });
    // r-4 and w-1 are on the pro plan.
    expect(res.body).toMatchObject({ evaluated: 7, changed: 2, transitions: [{ from: 'off', to: 'pro', count: 2 }] });
    expect(res.body.byRule).toContainEqual({ ruleId: 'pros', outcome: 'rule', before: 0, after: 2 });
    const foreign = await other.owner.request('POST', `/api/projects/${other.projectId}/cohorts`, { name: 'Theirs' });
    expectStatus(foreign, 201, 'foreign cohort');
    for (const id of ['coh_missing', foreign.body.id]) {
      const refused = await simulate(body(inCohort(id)));
      expect(refused.status).toBe(400);
      expect(refused.body.details).toEqual([{ path: 'body.candidateFlag.targeting.1', message: expect.stringContaining(id) }]);
    }
  });

  it('writes nothing: no evaluation events, no ring entries, no warehouse rows', async () => {
    await flushAnalytics();
    const scope = { serviceId: p.serviceId };
    const events = () => count('SELECT count() AS n FROM evaluation_events WHERE service_id = {serviceId:String}', scope);
    const stored = () => count('SELECT count() AS n FROM recent_contexts WHERE service_id = {serviceId:String}', scope);
    const ring = async () => (await p.owner.request('GET', `/api/contexts?serviceId=${p.serviceId}`)).body.total as number;
    const before = [await events(), await stored(), await ring()];
    expect(before[0]).toBeGreaterThanOrEqual(5);
    for (let i = 0; i < 3; i++) expectStatus(await simulate(body({ enabled: false })), 200, 'simulate');
    await flushAnalytics();
    expect([await events(), await stored(), await ring()]).toEqual(before);
  });
});

describe('who may simulate, and what input', () => {
  const path = `/api/flags/${key}/simulate`;

  it('lets a viewer and read-tier personal tokens simulate', async () => {
    expect((await p.viewer.request('POST', path, body({}))).status).toBe(200);
    const pat = await personalToken(p.viewer, 'read');
    const byPat = await app.request('POST', path, { token: pat, body: body({}) });
    expect(byPat.status).toBe(200);
    expect(byPat.body).toMatchObject({ evaluated: 7, changed: 0, unchanged: 7 });
  });

  it('refuses anonymous callers (401), other projects (404) and project API tokens, even full ones (403: the answer names real users)', async () => {
    expect((await app.request('POST', path, { body: body({}) })).status).toBe(401);
    expect((await other.owner.request('POST', path, body({}))).status).toBe(404);
    const otherPat = await personalToken(other.owner, 'read');
    expect((await app.request('POST', path, { token: otherPat, body: body({}) })).status).toBe(404);
    const full = await opaqueToken(p.owner, p.projectId, { read: true, write: true, delete: true });
    for (const token of [evaluateToken, full]) {
      const res = await app.request('POST', path, { token, body: body({}) });
      expect(res.status).toBe(403);
      expect(res.body.message).toContain('project API tokens cannot call this endpoint');
    }
  });

  it('answers 404 for an unknown flag and for an environment without it', async () => {
    expect((await simulate(body({}), 'no-such-flag')).status).toBe(404);
    expect((await simulate({ ...body({}), environment: 'staging' })).status).toBe(404);
  });

  it('rejects a malformed candidate with the field path (400)', async () => {
    const badOperator = await simulate(body({ targeting: [{ conditions: [{ property: 'plan', operator: 'like', value: 'x' }], value: 'x' }] }));
    expect(badOperator.status).toBe(400);
    expect(badOperator.body.details).toEqual([expect.objectContaining({ path: 'body.candidateFlag.targeting.0.conditions.0.operator' })]);
    const wrongType = await simulate(body({ defaultValue: 3 }));
    expect(wrongType.status).toBe(400);
    expect(wrongType.body.details).toEqual([{ path: 'body.candidateFlag.defaultValue', message: expect.stringContaining('string') }]);
    const weights = await simulate(body({ variants: [{ name: 'a', value: 'A', weight: 30 }] }));
    expect(weights.status).toBe(400);
    expect(weights.body.details[0].path).toBe('body.candidateFlag.variants');
    const notAField = await simulate(body({ key: 'other' }));
    expect(notAField.status).toBe(400);
    expect(notAField.body.message).toContain('candidateFlag');
    for (const bad of [{}, { serviceId: p.serviceId, environment: 'production' }, { ...body({}), extra: 1 }, { ...body({}), environment: 'moon' }, { ...body([]) }]) {
      expect((await simulate(bad)).status).toBe(400);
    }
    const raw = await app.request('POST', path, { cookie: p.owner.cookie, csrf: p.owner.csrf, rawBody: '{"serviceId":', headers: { 'content-type': 'application/json' } });
    expect(raw.status).toBe(400);
  });

  it('bounds cohortSize to 1..10,000 (default 1,000)', async () => {
    for (const cohortSize of [0, -1, 10_001, 2.5, '10']) {
      const res = await simulate(body({}, { cohortSize }));
      expect(res.status).toBe(400);
      expect(res.body.details[0].path).toBe('body.cohortSize');
    }
    const max = await simulate(body({}, { cohortSize: 10_000 }));
    expect(max.body).toMatchObject({ cohortSize: 10_000, evaluated: 7 });
  });

  it('refuses an oversized body (413)', async () => {
    const rules = Array.from({ length: 200 }, (_, i) => ({ id: `r${i}`, conditions: [{ property: 'plan', operator: 'equals', value: 'x'.repeat(1_500) }], value: 'x' }));
    expect((await simulate(body({ targeting: rules }))).status).toBe(413);
  });
});

describe('OpenAPI', () => {
  it('documents the route with its request and response schemas', async () => {
    const doc = (await app.request('GET', '/api/openapi.json')).body;
    const operation = doc.paths['/api/flags/{key}/simulate'].post;
    expect(operation.requestBody.content['application/json'].schema.additionalProperties).toBe(false);
    const response = JSON.stringify(operation.responses);
    for (const field of ['cohortSize', 'evaluated', 'changed', 'unchanged', 'transitions', 'byRule', 'examples']) expect(response).toContain(`"${field}"`);
  });
});

import { randomBytes } from 'node:crypto';
import { eventually, startTestApp, type TestApp } from '../support/harness';
import { createProject, expectStatus, opaqueToken, personalToken, type Project } from '../webhooks/support';

/**
 * POST /api/flags/{key}/explain over HTTP (docs/explain.md;
 * docs/api-reference.md#personal-access-tokens): the snapshot evaluation serves, the same engine,
 * access.
 */

let app: TestApp;
let p: Project;
let other: Project;
let evaluateToken: string;
const key = `checkout-${randomBytes(3).toString('hex')}`;

const FLAG = {
  key,
  name: 'Checkout',
  type: 'string',
  enabled: true,
  defaultValue: 'off',
  variants: [
    { name: 'control', value: 'control', weight: 50 },
    { name: 'treatment', value: 'treatment', weight: 50 },
  ],
  targeting: [
    {
      id: 'eu-enterprise',
      conditions: [
        { property: 'country', operator: 'in', value: ['FR', 'DE'] },
        { property: 'plan', operator: 'equals', value: 'enterprise' },
      ],
      value: 'enterprise',
    },
    { id: 'beta-ramp', conditions: [{ property: 'plan', operator: 'equals', value: 'beta' }], value: 'beta', rolloutPercentage: 40 },
    { id: 'staff', conditions: [{ property: 'email', operator: 'ends_with', value: '@staff.example.com' }], value: 'staff' },
  ],
};

const explain = (body: unknown, flagKey = key) => p.owner.request('POST', `/api/flags/${flagKey}/explain`, body);
const body = (context: unknown) => ({ serviceId: p.serviceId, environment: 'production', context });

beforeAll(async () => {
  app = await startTestApp();
  p = await createProject(app);
  other = await createProject(app);
  expectStatus(await p.owner.request('POST', '/api/flags', { ...FLAG, serviceId: p.serviceId, environment: 'production' }), 201, 'create flag');
  evaluateToken = await opaqueToken(p.owner, p.projectId, { read: true });
  // Evaluation's snapshot learns of the flag through the change bus.
  await eventually(async () => (await explain(body({}))).status === 200);
});
afterAll(async () => {
  await app?.stop();
});

describe('explaining an evaluation', () => {
  it('says per condition why earlier rules did not match and which one did', async () => {
    const res = await explain(body({ targetingKey: 'user-1', country: 'US', plan: 'pro', email: 'ann@staff.example.com' }));
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      flagKey: key,
      value: 'staff',
      reason: 'TARGETING_MATCH',
      ruleId: 'staff',
      rules: [
        {
          id: 'eu-enterprise',
          matched: false,
          conditions: [
            { property: 'country', operator: 'in', expected: ['FR', 'DE'], actual: 'US', passed: false },
            { property: 'plan', operator: 'equals', expected: 'enterprise', actual: 'pro', passed: false },
          ],
        },
        { id: 'beta-ramp', matched: false, conditions: [{ property: 'plan', operator: 'equals', expected: 'beta', actual: 'pro', passed: false }] },
        {
          id: 'staff',
          matched: true,
          conditions: [{ property: 'email', operator: 'ends_with', expected: '@staff.example.com', actual: 'ann@staff.example.com', passed: true }],
        },
      ],
    });
  });

  it('shows the rollout bucket against the percentage and the variant bucket', async () => {
    const users = Array.from({ length: 40 }, (_, i) => `beta-user-${i}`);
    const explained = await Promise.all(users.map((user) => explain(body({ targetingKey: user, plan: 'beta' }))));
    const inside = explained.filter((res) => res.body.reason === 'TARGETING_MATCH');
    const outside = explained.filter((res) => res.body.reason === 'VARIANT');
    expect(inside.length + outside.length).toBe(users.length);
    expect(inside.length).toBeGreaterThan(0);
    expect(outside.length).toBeGreaterThan(0);
    for (const res of inside) {
      const rollout = res.body.rules[1].rollout;
      expect(rollout).toEqual({ percentage: 40, bucket: expect.any(Number), included: true });
      expect(rollout.bucket).toBeLessThan(40);
      expect(res.body).toMatchObject({ value: 'beta', ruleId: 'beta-ramp', bucket: rollout.bucket });
    }
    for (const res of outside) {
      expect(res.body.rules[1]).toMatchObject({ matched: false, rollout: { percentage: 40, included: false } });
      expect(res.body.rules[1].rollout.bucket).toBeGreaterThanOrEqual(40);
      // Variants split 50/50: the variant bucket says which half.
      expect(res.body.variant).toBe(res.body.bucket < 50 ? 'control' : 'treatment');
      expect(res.body.ruleId).toBeUndefined();
    }
  });

  it('answers what evaluation answers for the same contexts', async () => {
    const contexts = [
      { targetingKey: 'u-1', country: 'FR', plan: 'enterprise' },
      { targetingKey: 'u-2', country: 'DE', plan: 'beta' },
      { targetingKey: 'u-3', plan: 'beta' },
      { targetingKey: 'u-4', email: 'x@staff.example.com' },
      { targetingKey: 'u-5' },
      { plan: 'beta' },
      {},
      'not-an-object',
    ];
    for (const context of contexts) {
      const explained = await explain(body(context));
      const evaluated = await app.request('POST', '/api/flags/evaluate', {
        token: evaluateToken,
        body: { flagKey: key, serviceId: p.serviceId, environment: 'production', context },
      });
      expectStatus(evaluated, 200, 'evaluate');
      expect(explained.status).toBe(200);
      const { value, reason, variant, errorCode } = evaluated.body;
      expect({ value: explained.body.value, reason: explained.body.reason, variant: explained.body.variant, errorCode: explained.body.errorCode }).toEqual({ value, reason, variant, errorCode });
    }
  });

  it('explains a disabled flag without reaching any rule', async () => {
    const disabledKey = `${key}-off`;
    expectStatus(await p.owner.request('POST', '/api/flags', { ...FLAG, key: disabledKey, enabled: false, serviceId: p.serviceId, environment: 'production' }), 201, 'create flag');
    const res = await eventually(async () => {
      const r = await explain(body({ targetingKey: 'u', plan: 'beta' }), disabledKey);
      return r.status === 200 ? r : undefined;
    });
    expect(res.body).toEqual({ flagKey: disabledKey, value: 'off', reason: 'DEFAULT', disabled: true, rules: [] });
  });
});

describe('who may explain', () => {
  it('lets a viewer and read-tier personal tokens explain, and project tokens that read flags', async () => {
    expect((await p.viewer.request('POST', `/api/flags/${key}/explain`, body({ targetingKey: 'u' }))).status).toBe(200);
    const pat = await personalToken(p.viewer, 'read');
    expect((await app.request('POST', `/api/flags/${key}/explain`, { token: pat, body: body({ targetingKey: 'u' }) })).status).toBe(200);
    expect((await app.request('POST', `/api/flags/${key}/explain`, { token: evaluateToken, body: body({ targetingKey: 'u' }) })).status).toBe(200);
  });

  it('refuses anonymous callers (401), other projects (404) and project tokens without flag read (403)', async () => {
    expect((await app.request('POST', `/api/flags/${key}/explain`, { body: body({}) })).status).toBe(401);
    expect((await other.owner.request('POST', `/api/flags/${key}/explain`, body({}))).status).toBe(404);
    const otherPat = await personalToken(other.owner, 'read');
    expect((await app.request('POST', `/api/flags/${key}/explain`, { token: otherPat, body: body({}) })).status).toBe(404);
    const writeOnly = await opaqueToken(p.owner, p.projectId, { write: true });
    expect((await app.request('POST', `/api/flags/${key}/explain`, { token: writeOnly, body: body({}) })).status).toBe(403);
  });

  it('answers 404 for an unknown flag and for another environment without it', async () => {
    const missing = await explain(body({}), 'no-such-flag');
    expect(missing.status).toBe(404);
    expect((await explain({ ...body({}), environment: 'staging' })).status).toBe(404);
  });

  it('rejects malformed and oversized bodies (400, 413)', async () => {
    for (const bad of [{}, { serviceId: p.serviceId, environment: 'moon' }, { ...body({}), extra: 1 }, { serviceId: 42 }]) {
      const res = await explain(bad);
      expect(res.status).toBe(400);
    }
    const raw = await app.request('POST', `/api/flags/${key}/explain`, { cookie: p.owner.cookie, csrf: p.owner.csrf, rawBody: '{"serviceId":', headers: { 'content-type': 'application/json' } });
    expect(raw.status).toBe(400);
    const huge = await explain(body({ targetingKey: 'u', blob: 'x'.repeat(70 * 1024) }));
    expect(huge.status).toBe(413);
  });
});

describe('OpenAPI', () => {
  it('documents the route with its request and response schemas', async () => {
    const doc = (await app.request('GET', '/api/openapi.json')).body;
    const operation = doc.paths['/api/flags/{key}/explain'].post;
    expect(operation.requestBody.content['application/json'].schema.additionalProperties).toBe(false);
    const response = JSON.stringify(operation.responses);
    for (const field of ['ruleId', 'bucket', 'conditions', 'rollout', 'actual', 'passed']) expect(response).toContain(`"${field}"`);
  });
});

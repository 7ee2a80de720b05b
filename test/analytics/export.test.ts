import { startTestApp, type TestApp } from '../support/harness';
import { createProject, opaqueToken, personalToken, startReceiver, uniquePath, type Project, type Receiver } from '../webhooks/support';
import { DAY, evaluationRow, insertRows, MINUTE, outcomeRow, type Tenant } from './queries-fixtures';

/**
 * POST /api/analytics/export (docs/analytics.md): signed chunks to a webhook, bounds, access, SSRF
 * guard.
 */

let app: TestApp;
let receiver: Receiver;
let p: Project;
let other: Project;
let tenant: Tenant;
const now = Date.now();
const SECRET = 'export-signing-secret';

beforeAll(async () => {
  app = await startTestApp();
  receiver = await startReceiver();
  p = await createProject(app);
  other = await createProject(app);
  tenant = { projectId: p.projectId, serviceId: p.serviceId };
  await insertRows(app, 'evaluation_events', [
    evaluationRow(tenant, { at: now - 30 * MINUTE, flagKey: 'checkout', value: { color: 'blue' }, user: 'u1', latencyMs: 3 }),
    evaluationRow(tenant, { at: now - 20 * MINUTE, flagKey: 'checkout', value: true, user: 'u2' }),
    evaluationRow(tenant, { at: now - 10 * MINUTE, flagKey: 'search', value: 'v2' }),
    // Outside 24 h, inside 7 d.
    evaluationRow(tenant, { at: now - 2 * DAY, flagKey: 'checkout', value: false, user: 'u3' }),
    evaluationRow({ projectId: other.projectId, serviceId: other.serviceId }, { at: now - 10 * MINUTE, flagKey: 'x', value: true }),
  ]);
  await insertRows(app, 'outcome_events', [
    outcomeRow(tenant, { at: now - 15 * MINUTE, event: 'purchase', user: 'u1', value: 12.5, flags: { checkout: { color: 'blue' } } }),
    outcomeRow(tenant, { at: now - 5 * MINUTE, event: 'error', user: 'u2' }),
  ]);
});
afterAll(async () => {
  await receiver?.close();
  await app?.stop();
});

const exportBody = (path: string, extra: Record<string, unknown> = {}) => ({
  projectId: p.projectId,
  destination: 'webhook',
  webhookUrl: receiver.url(path),
  signingSecret: SECRET,
  ...extra,
});

describe('exporting to a webhook', () => {
  it('sends the period’s evaluations and outcomes, one signed chunk per data type', async () => {
    const path = uniquePath('export');
    receiver.expectSecret(path, SECRET);
    const res = await p.owner.request('POST', '/api/analytics/export', exportBody(path));
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ ok: true, exported: { evaluations: 3, outcomes: 2 } });
    const got = receiver.received(path);
    expect(got).toHaveLength(2);
    for (const delivery of got) {
      expect(delivery.svcSignatureValid).toBe(true);
      expect(delivery.standardSignatureValid).toBe(true);
      expect(delivery.headers['x-svc-event']).toBe('analytics.export');
    }
    const [evaluations, outcomes] = got.map((d) => d.body);
    expect(evaluations).toMatchObject({ event: 'analytics.export', projectId: p.projectId, period: '24h', dataType: 'evaluations', chunk: 1, chunks: 1 });
    expect(evaluations.exportId).toBe(outcomes.exportId);
    expect(evaluations.rows.map((r: { flagKey: string }) => r.flagKey)).toEqual(['checkout', 'checkout', 'search']);
    expect(evaluations.rows[0]).toMatchObject({
      timestamp: new Date(now - 30 * MINUTE).toISOString(),
      serviceId: p.serviceId,
      environment: 'production',
      value: { color: 'blue' },
      latencyMs: 3,
      targetingKeyHash: expect.stringMatching(/^[0-9a-f]{32}$/),
    });
    expect(outcomes.rows).toEqual([
      expect.objectContaining({ event: 'purchase', value: 12.5, flags: { checkout: { color: 'blue' } }, origin: 'track' }),
      expect.objectContaining({ event: 'error', value: null, flags: {} }),
    ]);
  });

  it('exports only the asked data types and period; unsigned without a secret; empty types send nothing', async () => {
    const path = uniquePath('week-of-evaluations');
    const res = await p.owner.request('POST', '/api/analytics/export', exportBody(path, { dataTypes: ['evaluations'], period: '7d', signingSecret: undefined }));
    expect(res.body).toEqual({ ok: true, exported: { evaluations: 4, outcomes: 0 } });
    const [only] = receiver.received(path);
    expect(receiver.received(path)).toHaveLength(1);
    expect(only.headers['x-svc-signature']).toBeUndefined();
    expect(only.body.period).toBe('7d');

    const quiet = uniquePath('quiet');
    const hour = await p.owner.request('POST', '/api/analytics/export', exportBody(quiet, { dataTypes: ['outcomes'], period: '1h' }));
    expect(hour.body).toEqual({ ok: true, exported: { evaluations: 0, outcomes: 2 } });
    const none = await other.owner.request('POST', '/api/analytics/export', { ...exportBody(uniquePath('none'), { projectId: other.projectId, dataTypes: ['outcomes'] }) });
    expect(none.body).toEqual({ ok: true, exported: { evaluations: 0, outcomes: 0 } });
  });

  it('retries a chunk on the webhook schedule, same delivery id, until the receiver takes it', async () => {
    const path = uniquePath('flaky');
    receiver.expectSecret(path, SECRET);
    receiver.behave(path, (attempt) => ({ status: attempt === 1 ? 503 : attempt === 2 ? 429 : 200 }));
    const res = await p.owner.request('POST', '/api/analytics/export', exportBody(path, { dataTypes: ['outcomes'] }));
    expect(res.body).toEqual({ ok: true, exported: { evaluations: 0, outcomes: 2 } });
    const got = receiver.received(path);
    expect(got.map((d) => d.headers['x-svc-delivery-attempt'])).toEqual(['1', '2', '3']);
    expect(new Set(got.map((d) => d.headers['webhook-id'])).size).toBe(1);
    expect(got.every((d) => d.svcSignatureValid && d.standardSignatureValid)).toBe(true);
  });

  it('stops at a chunk the receiver refuses and says what was delivered (502)', async () => {
    const path = uniquePath('refuses');
    receiver.behave(path, (attempt) => ({ status: attempt === 1 ? 200 : 410 }));
    const res = await p.owner.request('POST', '/api/analytics/export', exportBody(path));
    expect(res.status).toBe(502);
    expect(res.body).toMatchObject({ ok: false, code: 'EXPORT_DELIVERY_FAILED', exported: { evaluations: 3, outcomes: 0 } });
    expect(res.body.message).toContain('HTTP 410');
    // A 4xx other than 429 is final: no second attempt.
    expect(receiver.received(path)).toHaveLength(2);
  });

  it('gives a chunk up after 4 attempts of a receiver that stays down', async () => {
    const path = uniquePath('down');
    receiver.behave(path, () => ({ status: 503 }));
    const res = await p.owner.request('POST', '/api/analytics/export', exportBody(path, { dataTypes: ['outcomes'] }));
    expect(res.status).toBe(502);
    expect(res.body).toMatchObject({ ok: false, exported: { evaluations: 0, outcomes: 0 } });
    expect(res.body.message).toContain('after 4 attempts');
    expect(receiver.received(path)).toHaveLength(4);
  });

  it('chunks big periods and refuses more than the bound before sending anything (413)', async () => {
    const big: Tenant = { projectId: other.projectId, serviceId: other.serviceId };
    const rows = (n: number, offset: number) =>
      Array.from({ length: n }, (_, i) => outcomeRow(big, { at: now - 40 * MINUTE + (offset + i) * 10, event: 'view', user: `b${offset + i}` }));
    await insertRows(app, 'outcome_events', rows(12_000, 0));
    const path = uniquePath('chunks');
    const res = await other.owner.request('POST', '/api/analytics/export', { ...exportBody(path, { projectId: other.projectId, dataTypes: ['outcomes'] }) });
    expect(res.body).toEqual({ ok: true, exported: { evaluations: 0, outcomes: 12_000 } });
    const chunks = receiver.received(path).map((d) => d.body);
    expect(chunks.map((c) => [c.chunk, c.chunks, c.rows.length])).toEqual([
      [1, 3, 5000],
      [2, 3, 5000],
      [3, 3, 2000],
    ]);
    expect(new Set(chunks.flatMap((c) => c.rows.map((r: { eventId: string }) => r.eventId))).size).toBe(12_000);

    await insertRows(app, 'outcome_events', rows(38_001, 12_000));
    const tooBig = uniquePath('too-big');
    const refused = await other.owner.request('POST', '/api/analytics/export', { ...exportBody(tooBig, { projectId: other.projectId }) });
    expect(refused.status).toBe(413);
    expect(refused.body).toMatchObject({ code: 'EXPORT_TOO_LARGE', rows: { evaluations: 1, outcomes: 50_001 }, maxRows: 50_000 });
    expect(receiver.received(tooBig)).toHaveLength(0);
  });
});

describe('who may export', () => {
  it('needs settings:manage on the project: owner and admin yes; member, viewer, read scopes and lower personal tiers no', async () => {
    const ok = async (status: number, opts: { as?: Project['owner']; token?: string }) => {
      const path = uniquePath('who');
      const res = opts.as
        ? await opts.as.request('POST', '/api/analytics/export', exportBody(path, { dataTypes: ['outcomes'] }))
        : await app.request('POST', '/api/analytics/export', { body: exportBody(path, { dataTypes: ['outcomes'] }), token: opts.token });
      expect([res.status, res.text]).toEqual([status, expect.any(String)]);
      expect(receiver.received(path)).toHaveLength(status === 200 ? 1 : 0);
    };
    await ok(200, { as: p.admin });
    await ok(403, { as: p.member });
    await ok(403, { as: p.viewer });
    await ok(404, { as: other.owner });
    await ok(401, {});
    await ok(403, { token: await opaqueToken(p.owner, p.projectId, { read: true, write: true, delete: true }) });
    await ok(403, { token: await personalToken(p.owner, 'read') });
    await ok(403, { token: await personalToken(p.owner, 'write') });
    await ok(200, { token: await personalToken(p.owner, 'admin') });
  });

  it('needs the CSRF header from a cookie session', async () => {
    const path = uniquePath('csrf');
    const res = await app.request('POST', '/api/analytics/export', { cookie: p.owner.cookie, body: exportBody(path) });
    expect(res.status).toBe(403);
    expect(receiver.received(path)).toHaveLength(0);
  });

  it('validates every field and bounds the body', async () => {
    const path = uniquePath('invalid');
    for (const extra of [
      { destination: 's3' },
      { destination: undefined },
      { webhookUrl: 'ftp://example.com/x' },
      { webhookUrl: undefined },
      { dataTypes: [] },
      { dataTypes: ['clicks'] },
      { dataTypes: ['outcomes', 'outcomes'] },
      { period: '2h' },
      { signingSecret: '' },
      { surprise: true },
    ]) {
      const res = await p.owner.request('POST', '/api/analytics/export', exportBody(path, extra));
      expect([JSON.stringify(extra), res.status]).toEqual([JSON.stringify(extra), 400]);
    }
    const huge = await p.owner.request('POST', '/api/analytics/export', exportBody(path, { signingSecret: 'x'.repeat(20_000) }));
    expect(huge.status).toBe(413);
    expect(receiver.received(path)).toHaveLength(0);
  });
});

describe('SSRF guard', () => {
  let strict: TestApp;
  let q: Project;
  beforeAll(async () => {
    strict = await startTestApp({ ALLOW_PRIVATE_WEBHOOK_TARGETS: 'false' });
    q = await createProject(strict);
  });
  afterAll(async () => {
    await strict?.stop();
  });

  it('refuses internal targets with 400 and sends nothing', async () => {
    const path = uniquePath('ssrf');
    for (const webhookUrl of [receiver.url(path), 'http://169.254.169.254/latest/meta-data', 'http://10.0.0.7/hook', 'http://[::1]:8080/']) {
      const res = await q.owner.request('POST', '/api/analytics/export', { projectId: q.projectId, destination: 'webhook', webhookUrl });
      expect([webhookUrl, res.status]).toEqual([webhookUrl, 400]);
      expect(res.body.message).toMatch(/internal targets are not allowed/);
    }
    expect(receiver.received(path)).toHaveLength(0);
  });
});

import { randomBytes } from 'node:crypto';
import { eventually, startTestApp, type TestApp } from '../support/harness';
import { GUARD_METRIC, requirePrometheus, startFixtureExporter, type FixtureExporter } from '../support/prometheus';
import { createFlag, createProject, expectStatus, qs, startReceiver, uniquePath, type Project } from '../webhooks/support';

/**
 * Prometheus guards of the production guardrail: set over HTTP on the project, asked by the
 * guardrail's check (the activity the watch runs, docs/guardrails.md) against the real Prometheus
 * of scripts/test-infra.sh scraping a fixture exporter. The check is called directly, right after
 * the toggle: the windows have no evaluations yet ("not enough evidence"), so the guard alone
 * decides. The watch's timer and its rechecks are covered in guardrail-workflow.test.ts.
 */

let app: TestApp;
let exporter: FixtureExporter;
const prometheus = requirePrometheus();

beforeAll(async () => {
  exporter = await startFixtureExporter();
  app = await startTestApp({ PROMETHEUS_URL_ALLOWLIST: prometheus.url });
}, 60_000);
afterAll(async () => {
  await app?.stop();
  await exporter?.close();
});

const guard = (extra: Record<string, unknown> = {}) => ({
  name: 'checkout errors',
  source: 'prometheus',
  url: prometheus.url,
  query: `max(${GUARD_METRIC}{flag_key="{{flagKey}}"})`,
  failWhen: { op: '>', threshold: 0.05 },
  ...extra,
});

/** A project with these guards and a flag toggled on in production: the watched change. */
async function toggledWithGuards(label: string, guards: unknown[]) {
  const p = await createProject(app);
  expectStatus(await p.owner.request('PATCH', `/api/projects/${p.projectId}`, { guardrailGuards: guards }), 200, 'set guards');
  const key = `${label}-${randomBytes(3).toString('hex')}`;
  const flag = await createFlag(p.owner, p.serviceId, key);
  const toggled = await p.member.request('POST', `/api/flags/${key}/toggle${qs({ serviceId: p.serviceId, environment: 'production' })}`, { enabled: true });
  expectStatus(toggled, 200, 'toggle');
  return { p, key, flagId: flag.id as string, version: toggled.body.version as number };
}

const flagOf = async (p: Project, key: string) => (await p.owner.request('GET', `/api/flags/${key}${qs({ serviceId: p.serviceId, environment: 'production' })}`)).body;

async function checkedAudit(flagId: string) {
  const rows = await app.platform.db.sql<{ metadata: any }[]>`SELECT metadata FROM audit_logs WHERE resource_id = ${flagId} AND action = 'guardrail.checked' ORDER BY timestamp, id`;
  return rows.map((r) => r.metadata);
}

describe('Prometheus guards of the production guardrail', () => {
  it('a breached guard rolls the change back, with the guard in the verdict and the audit entry', async () => {
    const { p, key, flagId, version } = await toggledWithGuards('gr-breach', [guard()]);
    await exporter.set(key, 0.4);
    const result = await app.platform.guardrail.check({ flagId, version, windowMinutes: 1 });
    expect(result).toEqual({ verdict: 'rolled_back', reason: 'guard "checkout errors" breached: 0.4 > 0.05' });
    const flag = await flagOf(p, key);
    expect(flag.enabled).toBe(false);
    expect(flag.version).toBe(version + 1);
    const [entry] = await checkedAudit(flagId);
    expect(entry).toMatchObject({ verdict: 'rolled_back', actionTaken: 'rolled_back', newVersionNumber: version + 1 });
    expect(entry.guards).toEqual([{ name: 'checkout errors', decision: 'fail', reason: '0.4 > 0.05', value: 0.4 }]);
  }, 90_000);

  it('a breached guard with automatic rollback off trips and leaves the flag as it is', async () => {
    const { p, key, flagId, version } = await toggledWithGuards('gr-trip', [guard()]);
    expectStatus(await p.owner.request('PATCH', `/api/projects/${p.projectId}`, { guardrailAutoRollback: false }), 200, 'rollback off');
    await exporter.set(key, 0.4);
    const result = await app.platform.guardrail.check({ flagId, version, windowMinutes: 1 });
    expect(result.verdict).toBe('tripped');
    expect(result.reason).toMatch(/guard "checkout errors" breached: 0\.4 > 0\.05/);
    expect((await flagOf(p, key)).version).toBe(version);
  }, 90_000);

  it('a healthy guard passes', async () => {
    const { p, key, flagId, version } = await toggledWithGuards('gr-ok', [guard()]);
    await exporter.set(key, 0.01);
    const result = await app.platform.guardrail.check({ flagId, version, windowMinutes: 1 });
    expect(result.verdict).toBe('passed');
    expect((await flagOf(p, key)).enabled).toBe(true);
    expect((await checkedAudit(flagId))[0].guards).toEqual([{ name: 'checkout errors', decision: 'pass', reason: '0.01 not > 0.05', value: 0.01 }]);
  }, 90_000);

  it('no data or a refused query is never a pass: waiting, with the reasons named', async () => {
    const { p, key, flagId, version } = await toggledWithGuards('gr-wait', [
      guard({ name: 'silent', query: `max(${GUARD_METRIC}{flag_key="{{flagKey}}-absent"})` }),
      guard({ name: 'broken', query: `rate(${GUARD_METRIC}[{{window}}` }),
    ]);
    const result = await app.platform.guardrail.check({ flagId, version, windowMinutes: 1 });
    expect(result.verdict).toBe('waiting');
    expect(result.reason).toMatch(/^guard "silent" cannot be judged: no data: the query answered no series; guard "broken" cannot be judged: query error \(HTTP 400\): bad_data: .*; not enough evidence/);
    expect((await flagOf(p, key)).enabled).toBe(true);
    const [entry] = await checkedAudit(flagId);
    expect(entry.verdict).toBe('waiting');
    expect(entry.guards.map((g: { decision: string }) => g.decision)).toEqual(['wait', 'wait']);
    expect(entry.alertNotifiedChannels).toEqual([]);

    // The watch's last check still cannot judge: the organization's alert channels hear of it.
    const receiver = await startReceiver();
    try {
      const hook = uniquePath('unjudged');
      const channel = await p.owner.request('POST', `/api/orgs/${p.orgId}/alert-channels`, { type: 'webhook', name: 'on-call', url: receiver.url(hook) });
      expectStatus(channel, 201, 'alert channel');
      const last = await app.platform.guardrail.check({ flagId, version, windowMinutes: 1, lastCheck: true });
      expect(last.verdict).toBe('waiting');
      expect((await checkedAudit(flagId)).at(-1).alertNotifiedChannels).toEqual([{ id: channel.body.id, name: 'on-call', type: 'webhook' }]);
      const delivered = await eventually(async () => receiver.received(hook).length > 0 && receiver.received(hook), 30_000);
      expect(delivered[0].body.data).toMatchObject({ kind: 'flag.guardrail_unjudged', severity: 'warning', flagKey: key, details: { version } });
      expect((await flagOf(p, key)).enabled).toBe(true);
    } finally {
      await receiver.close();
    }
  }, 90_000);

  it('guards are project settings: settings:manage only, servers on the allow-list, bounded, refused whole', async () => {
    const p = await createProject(app);
    const path = `/api/projects/${p.projectId}`;
    expect((await p.member.request('PATCH', path, { guardrailGuards: [guard()] })).status).toBe(403);
    const refused: [unknown, RegExp][] = [
      [[guard({ url: 'http://10.0.0.1:9090' })], /not in PROMETHEUS_URL_ALLOWLIST/],
      [[guard({ url: 'gopher://x' })], /http or https/],
      [[guard(), guard()], /another guard is named/],
      [[guard({ query: '' })], /query/],
      [[guard({ source: 'datadog' })], /source/],
    ];
    for (const [guards, message] of refused) {
      const res = await p.admin.request('PATCH', path, { guardrailGuards: guards, guardrailWindowMinutes: 30 });
      expect(res.status).toBe(400);
      expect(res.body.message).toMatch(message);
    }
    const unchanged = await p.owner.request('GET', path);
    expect(unchanged.body).toMatchObject({ guardrailGuards: [], guardrailWindowMinutes: 15 });
    const set = await p.admin.request('PATCH', path, { guardrailGuards: [guard()] });
    expectStatus(set, 200, 'admin sets guards');
    expect(set.body.guardrailGuards).toEqual([guard()]);
    expectStatus(await p.admin.request('PATCH', path, { guardrailGuards: [] }), 200, 'clear guards');
    expect((await p.owner.request('GET', path)).body.guardrailGuards).toEqual([]);
  }, 60_000);
});

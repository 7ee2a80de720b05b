import { spawn } from 'node:child_process';
import { projectPath } from '../../api/infra/paths';
import { createFixture, uniqueKey, type DataPlaneFixture } from '../data-plane/support';
import { boundToken } from '../flagd/support';
import { eventually, startTestApp, type TestApp } from '../support/harness';
import { expectStatus, qs } from '../webhooks/support';

/**
 * A canary judged by OpenTelemetry alone (docs/opentelemetry.md), end to end in real time on the
 * app's own Temporal: test/canary/otlp-flagd-app.ts, in its own process, evaluates through the
 * published flagd provider in-process and exports its request traces with the OpenTelemetry SDK.
 * It never calls our evaluation or track APIs: exposures and errors reach us only as OTLP, and the
 * canary's sides come from placing those exposures by their context id.
 */

let app: TestApp;
let fx: DataPlaneFixture;
let token: string;

beforeAll(async () => {
  // Writers flush often: the gate reads the warehouse every second of a 3 s soak.
  app = await startTestApp({ EVAL_EVENTS_FLUSH_MS: '200', ANALYTICS_FLUSH_MS: '200' });
  fx = await createFixture(app);
  token = (await boundToken(fx, { environment: 'production' })).value;
}, 60_000);
afterAll(async () => {
  await app?.stop();
});

interface AppSummary {
  users: number;
  treated: number;
  failed: number;
  exports: { ok: number; failed: number };
}

/** Which OpenTelemetry exporter the application uses: OTLP protobuf or OTLP JSON. */
type ExporterKind = 'proto' | 'http';

/** Starts the application for `flagKey`; `stop()` ends it and answers what it did. */
function startApplication(flagKey: string, failEvery: number, exporter: ExporterKind) {
  const child = spawn(process.execPath, ['-r', projectPath('node_modules/tsx/dist/cjs/index.cjs'), projectPath('test/canary/otlp-flagd-app.ts')], {
    env: { ...process.env, OTLP_URL: app.urls.ingest, SYNC_PORT: new URL(app.urls.flagdSync!).port, TOKEN: token, FLAG_KEY: flagKey, FAIL_EVERY: String(failEvery), USER_PREFIX: flagKey, OTLP_EXPORTER: exporter },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-4000)));
  const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
  return {
    stop: async (): Promise<AppSummary> => {
      child.kill('SIGTERM');
      const code = await exited;
      if (code !== 0) throw new Error(`the application exited with ${code}: ${stderr}`);
      return JSON.parse(stdout) as AppSummary;
    },
  };
}

const recordPath = (key: string) => `/api/flags/${key}/canary${qs({ serviceId: fx.serviceId, environment: 'production' })}`;

/** Runs a canary while the application serves it; the record once it ended, and what the application did. */
async function canaryWithApplication(failEvery: number, exporter: ExporterKind, ramp: { initialRolloutPercent: number; targetRolloutPercent: number; rampStepPercent: number }) {
  const key = uniqueKey('otlp-canary');
  const created = await fx.owner.request('POST', '/api/flags', { key, name: key, type: 'boolean', serviceId: fx.serviceId, environment: 'production', enabled: true, defaultValue: false });
  expectStatus(created, 201, 'create flag');
  const application = startApplication(key, failEvery, exporter);
  try {
    const started = await fx.owner.request('POST', `/api/flags/${key}/canary`, {
      serviceId: fx.serviceId,
      ...ramp,
      soakPeriodMinutes: 0.05,
      errorRateGateDelta: 0.05,
      latencyGateDeltaMs: 100,
      autoRollbackOnBreach: true,
      minSamplesPerCohort: 100,
      maxWaitMinutes: 1.5,
    });
    expectStatus(started, 201, 'start');
    const record = await eventually(
      async () => {
        const current = await fx.viewer.request('GET', recordPath(key));
        return ['completed', 'rolled_back', 'paused'].includes(current.body.status) ? current.body : null;
      },
      120_000,
      500,
    );
    return { key, record, summary: await application.stop() };
  } catch (error) {
    await application.stop().catch(() => undefined);
    throw error;
  }
}

/** Where the flag's exposures and outcomes came from: source / origin and how many. */
async function provenance(key: string) {
  await app.platform.analyticsWriter.flush();
  const query = async (sql: string) => (await app.platform.analytics.client.query({ query: sql, query_params: { s: fx.serviceId, f: key }, format: 'JSONEachRow' })).json<{ from: string; n: string }>();
  const exposures = await query(`SELECT source AS from, count() AS n FROM evaluation_events WHERE service_id = {s:String} AND flag_key = {f:String} GROUP BY source`);
  const outcomes = await query(`SELECT origin AS from, count() AS n FROM outcome_events WHERE service_id = {s:String} AND mapContains(flags, {f:String}) GROUP BY origin`);
  return { exposures: exposures.map((r) => r.from), outcomes: outcomes.map((r) => r.from) };
}

describe('a canary judged by OpenTelemetry from an in-process flagd application', () => {
  it('rolls back when one in five treated requests fails, with nothing but OTLP (protobuf) as the error source', async () => {
    const { key, record, summary } = await canaryWithApplication(5, 'proto', { initialRolloutPercent: 50, targetRolloutPercent: 50, rampStepPercent: 50 });

    expect(record.status).toBe('rolled_back');
    expect(record.statusReason).toMatch(/gate failed at 50%/);
    const gate = record.currentStage.gate;
    expect(gate.decision).toBe('fail');
    expect(gate.treatment.exposures).toBeGreaterThanOrEqual(100);
    // One in five, give or take the traces still on their way when the gate looked.
    expect(gate.treatment.errorRate).toBeGreaterThan(0.1);
    expect(gate.treatment.errorRate).toBeLessThan(0.3);
    expect(gate.control.errors).toBe(0);
    expect(gate.errorRateDelta.lower).toBeGreaterThan(0.05);
    // Placing exposures by the context id agrees with the provider's buckets: the sides split as served.
    expect(gate.srm.ok).toBe(true);

    expect(summary.failed).toBeGreaterThan(0);
    expect(summary.exports.failed).toBe(0);
    expect(await provenance(key)).toEqual({ exposures: ['otlp'], outcomes: ['otlp'] });
    const flag = await fx.owner.request('GET', `/api/flags/${key}${qs({ serviceId: fx.serviceId, environment: 'production' })}`);
    expect(flag.body.targeting).toEqual([]);
  }, 150_000);

  it('lets the canary ramp through every stage when the same application is healthy, exporting OTLP JSON', async () => {
    const { key, record, summary } = await canaryWithApplication(0, 'http', { initialRolloutPercent: 25, targetRolloutPercent: 75, rampStepPercent: 25 });

    expect(record.status).toBe('completed');
    expect(record.completedStages.map((s: { rolloutPercent: number }) => s.rolloutPercent)).toEqual([25, 50, 75]);
    for (const { gate } of record.completedStages) {
      expect(gate.decision).toBe('pass');
      expect(gate.treatment.exposures).toBeGreaterThanOrEqual(100);
      expect(gate.control.exposures).toBeGreaterThanOrEqual(100);
      expect(gate.treatment.errors).toBe(0);
      expect(gate.control.errors).toBe(0);
      expect(gate.srm.ok).toBe(true);
    }

    expect(summary.treated).toBeGreaterThan(0);
    expect(summary.exports.failed).toBe(0);
    expect(await provenance(key)).toEqual({ exposures: ['otlp'], outcomes: ['otlp'] });
  }, 150_000);
});

import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { fromBinary } from '@bufbuild/protobuf';
import postgres from 'postgres';
import { ExportTraceServiceRequestSchema } from '../../api/gen/opentelemetry/proto/collector/trace/v1/trace_service_pb';
import { projectPath } from '../../api/infra/paths';
import { freePort } from '../../api/infra/temporal';
import { eventually, requireInfra, startTestApp } from '../support/harness';
import { createProject, expectStatus, opaqueToken, personalToken, startReceiver, uniquePath, type Receiver } from '../webhooks/support';

/**
 * Tracing (docs/operations.md#tracing) in the process `npm start` runs: api/main.ts in a child
 * process, exporting OTLP/HTTP protobuf to a collector this test runs. A flag write, an
 * evaluation on the lean path and an alert-channel test send (a workflow whose activity calls
 * out with undici) each carry a `traceparent`; their spans must continue that trace. Without an
 * endpoint, none of the SDK is loaded.
 */

jest.setTimeout(240_000);

interface ExportedSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  kind: number;
  attributes: Record<string, unknown>;
  service: unknown;
}

/** int64 attributes decode as bigint. */
const plain = (value: unknown) => (typeof value === 'bigint' ? Number(value) : value);

/** An OTLP/HTTP traces endpoint that keeps every span it is sent. */
async function startCollector() {
  const spans: ExportedSpan[] = [];
  const contentTypes = new Set<string>();
  const hex = (bytes: Uint8Array) => Buffer.from(bytes).toString('hex');
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      contentTypes.add(String(req.headers['content-type']));
      const request = fromBinary(ExportTraceServiceRequestSchema, Buffer.concat(chunks));
      for (const resourceSpans of request.resourceSpans) {
        const service = resourceSpans.resource?.attributes.find((a) => a.key === 'service.name')?.value?.value.value;
        for (const scope of resourceSpans.scopeSpans) {
          for (const span of scope.spans) {
            spans.push({
              traceId: hex(span.traceId),
              spanId: hex(span.spanId),
              parentSpanId: hex(span.parentSpanId),
              name: span.name,
              kind: span.kind,
              attributes: Object.fromEntries(span.attributes.map((a) => [a.key, plain(a.value?.value.value)])),
              service,
            });
          }
        }
      }
      res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    spans,
    contentTypes,
    inTrace: (traceId: string) => spans.filter((s) => s.traceId === traceId),
    close: () => new Promise((resolve) => server.close(resolve)),
  };
}

/**
 * A module the child loads first (`--require`): answers an IPC message with the node_modules
 * packages in require.cache, so the test sees what the process loaded.
 */
const loadedModulesProbe = path.join(os.tmpdir(), `flags-loaded-modules-${process.pid}.js`);
fs.writeFileSync(
  loadedModulesProbe,
  `process.on('message', (m) => { if (m === 'loaded-modules') process.send({ loaded: Object.keys(require.cache).filter((f) => f.includes('node_modules')) }); });\n`,
);

interface App {
  child: ChildProcess;
  control: string;
  data: string;
  loadedModules(): Promise<string[]>;
  output(): string;
  stop(): Promise<void>;
}

/** api/main.ts through tsx, as `npm run dev` starts it, with the control, data and worker roles. */
async function spawnApp(env: Record<string, string>): Promise<App> {
  const [port, dataPort] = [await freePort(), await freePort()];
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'flags-tracing-'));
  const child = spawn(process.execPath, ['--require', loadedModulesProbe, '--import', 'tsx', projectPath('api/main.ts')], {
    env: { ...process.env, PORT: String(port), DATA_PORT: String(dataPort), MANAGEMENT_PORT: '0', DATA_DIR: dataDir, CHDB_PATH: path.join(dataDir, 'chdb'), ...env },
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
  });
  const output: string[] = [];
  child.stdout?.on('data', (chunk: Buffer) => output.push(chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => output.push(chunk.toString()));
  const control = `http://127.0.0.1:${port}`;
  await eventually(async () => {
    if (child.exitCode !== null) throw new Error(`the app exited with ${child.exitCode}: ${output.join('').slice(-2000)}`);
    return (await fetch(`${control}/api/health`).catch(() => undefined))?.ok;
  }, 150_000, 250);
  return {
    child,
    control,
    data: `http://127.0.0.1:${dataPort}`,
    output: () => output.join(''),
    loadedModules: () =>
      new Promise((resolve) => {
        child.once('message', (m: { loaded: string[] }) => resolve(m.loaded));
        child.send('loaded-modules');
      }),
    async stop() {
      if (child.exitCode === null) {
        const exited = new Promise((resolve) => child.once('exit', resolve));
        child.kill('SIGTERM');
        // Not what is tested here: a stop that stalls must not hold the suite.
        const killed = setTimeout(() => child.kill('SIGKILL'), 30_000);
        await exited;
        clearTimeout(killed);
      }
      fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** A sampled W3C trace context from "the caller", with fresh ids. */
function traceparent() {
  const traceId = randomBytes(16).toString('hex');
  const parentId = randomBytes(8).toString('hex');
  return { traceId, parentId, header: `00-${traceId}-${parentId}-01` };
}

const SDK_PACKAGES = ['@opentelemetry/sdk-node', '@opentelemetry/instrumentation-http', '@opentelemetry/exporter-trace-otlp-proto', '@temporalio/interceptors-opentelemetry'];
const loadedSdkPackages = (loaded: string[]) => SDK_PACKAGES.filter((name) => loaded.some((file) => file.includes(`/node_modules/${name}/`)));

let databaseUrl = '';
let receiver: Receiver;
let collector: Awaited<ReturnType<typeof startCollector>>;
const apps: App[] = [];
let setup: { serviceId: string; orgId: string; writeToken: string; adminToken: string; readToken: string; env: Record<string, string> };

beforeAll(async () => {
  // Users, tokens and an alert channel through an in-process app, which then leaves its
  // database to the spawned ones.
  const app = await startTestApp();
  const p = await createProject(app);
  receiver = await startReceiver();
  collector = await startCollector();
  const { config } = app.platform;
  setup = {
    serviceId: p.serviceId,
    orgId: p.orgId,
    writeToken: await personalToken(p.owner, 'write'),
    adminToken: await personalToken(p.owner, 'admin'),
    readToken: await opaqueToken(p.owner, p.projectId, { read: true }),
    env: {
      NODE_ENV: 'test',
      DATABASE_URL: app.databaseUrl,
      REDIS_URL: config.REDIS_URL ?? '',
      REDIS_KEY_PREFIX: config.REDIS_KEY_PREFIX,
      TEMPORAL_ADDRESS: requireInfra().temporalAddress,
      CLICKHOUSE_DATABASE: config.CLICKHOUSE_DATABASE,
      ROLES: 'control,data,worker',
      FLAGD_ENABLED: 'false',
      SCRYPT_COST_LOG2: '12',
      LOG_LEVEL: 'error',
      ALLOW_PRIVATE_WEBHOOK_TARGETS: 'true',
      // Not the test run's plain bundle: api/main.ts picks dist/'s traced one when tracing is on
      // (after `npm run build`), or the worker bundles at start with the tracing interceptors.
      WORKFLOW_BUNDLE_PATH: '',
    },
  };
  databaseUrl = app.databaseUrl;
  await app.stop({ keepDatabase: true });
});

afterAll(async () => {
  for (const app of apps) await app.stop();
  await receiver?.close();
  await collector?.close();
  if (databaseUrl) {
    const admin = postgres(requireInfra().databaseUrl, { max: 1, onnotice: () => undefined });
    await admin.unsafe(`DROP DATABASE IF EXISTS ${new URL(databaseUrl).pathname.slice(1)} WITH (FORCE)`).catch(() => undefined);
    await admin.end();
  }
  fs.rmSync(loadedModulesProbe, { force: true });
});

describe('with OTEL_EXPORTER_OTLP_ENDPOINT set', () => {
  let app: App;
  beforeAll(async () => {
    app = await spawnApp({
      ...setup.env,
      TEMPORAL_TASK_QUEUE: `tracing-on-${process.pid}`,
      OTEL_EXPORTER_OTLP_ENDPOINT: collector.url,
      OTEL_SERVICE_NAME: 'flagship-under-test',
      // The documented default sampler (parent-based, 1% of new traces): the callers below send
      // sampled trace contexts, which are always continued.
      OTEL_BSP_SCHEDULE_DELAY: '200',
    });
    apps.push(app);
  });

  it('continues the caller trace of a flag write: server span by route template, Postgres and Redis spans under it', async () => {
    const caller = traceparent();
    const key = `traced-${randomBytes(3).toString('hex')}`;
    const res = await fetch(`${app.control}/api/flags`, {
      method: 'POST',
      headers: { authorization: `Bearer ${setup.writeToken}`, 'content-type': 'application/json', traceparent: caller.header },
      body: JSON.stringify({ key, name: key, type: 'boolean', serviceId: setup.serviceId, environment: 'production', defaultValue: false }),
    });
    expect(res.status).toBe(201);

    const server = await eventually(async () => collector.inTrace(caller.traceId).find((s) => s.kind === 2 && s.attributes['http.route'] === '/api/flags'), 30_000);
    expect(server).toMatchObject({ name: 'POST /api/flags', parentSpanId: caller.parentId, service: 'flagship-under-test' });
    expect(server.attributes['http.response.status_code']).toBe(201);
    const spans = await eventually(async () => {
      const found = collector.inTrace(caller.traceId);
      return found.some((s) => s.attributes['db.system.name'] === 'postgresql') && found.some((s) => s.attributes['db.system.name'] === 'redis') && found;
    }, 30_000);
    const insert = spans.find((s) => s.attributes['db.system.name'] === 'postgresql' && String(s.attributes['db.query.text']).startsWith('INSERT'));
    expect(insert).toMatchObject({ kind: 3, attributes: { 'db.operation.name': 'INSERT' } });
    // Parameters never reach a span: the flag key was one.
    for (const span of spans) expect(JSON.stringify(span.attributes)).not.toContain(key);
    // Redis spans name the command only; keys carry token and user ids.
    for (const span of spans.filter((s) => s.attributes['db.system.name'] === 'redis')) expect(String(span.attributes['db.query.text'])).toMatch(/^[a-z]+$/);
  });

  it('continues the caller trace on the lean evaluation path, which answers before Express', async () => {
    const caller = traceparent();
    const res = await fetch(`${app.data}/api/flags/evaluate`, {
      method: 'POST',
      headers: { authorization: `Bearer ${setup.readToken}`, 'content-type': 'application/json', traceparent: caller.header },
      body: JSON.stringify({ flagKey: 'absent', serviceId: setup.serviceId, environment: 'production', context: { targetingKey: 'user-1' } }),
    });
    await res.text();
    const server = await eventually(async () => collector.inTrace(caller.traceId).find((s) => s.kind === 2), 30_000);
    expect(server).toMatchObject({ parentSpanId: caller.parentId, attributes: { 'url.path': '/api/flags/evaluate', 'http.request.method': 'POST' } });
  });

  it('answers requests without a trace context past the instrumentation, tracing only the sampled 1%', async () => {
    const rootsBefore = collector.spans.filter((s) => s.kind === 2 && !s.parentSpanId && s.attributes['url.path'] === '/api/flags/evaluate').length;
    for (let i = 0; i < 300; i++) {
      const res = await fetch(`${app.data}/api/flags/evaluate`, {
        method: 'POST',
        headers: { authorization: `Bearer ${setup.readToken}`, 'content-type': 'application/json' },
        body: JSON.stringify({ flagKey: 'absent', serviceId: setup.serviceId, environment: 'production', context: { targetingKey: `user-${i}` } }),
      });
      await res.text();
      expect(res.status).toBe(200);
    }
    // About 3 expected; every one of the 300 would be a root span if untraced requests were not skipped.
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    const roots = collector.spans.filter((s) => s.kind === 2 && !s.parentSpanId && s.attributes['url.path'] === '/api/flags/evaluate').length - rootsBefore;
    expect(roots).toBeLessThan(30);
  });

  it('carries the caller trace into the workflow it starts and the activity that calls out with undici', async () => {
    const hookPath = uniquePath('traced-alert');
    const channel = await fetch(`${app.control}/api/orgs/${setup.orgId}/alert-channels`, {
      method: 'POST',
      headers: { authorization: `Bearer ${setup.adminToken}`, 'content-type': 'application/json' },
      body: JSON.stringify({ type: 'webhook', name: 'Traced', url: receiver.url(hookPath) }),
    });
    const created = (await channel.json()) as { id: string };
    expectStatus({ status: channel.status, text: JSON.stringify(created) }, 201, 'create alert channel');

    const caller = traceparent();
    const sent = await fetch(`${app.control}/api/orgs/${setup.orgId}/alert-channels/${created.id}/test`, {
      method: 'POST',
      headers: { authorization: `Bearer ${setup.adminToken}`, traceparent: caller.header },
    });
    expect(await sent.json()).toMatchObject({ ok: true, status: 'delivered' });
    expect(receiver.received(hookPath)).toHaveLength(1);
    // The receiver saw the trace too: undici's instrumentation sent it on.
    expect(receiver.received(hookPath)[0].headers.traceparent).toContain(caller.traceId);

    const spans = await eventually(async () => {
      const found = collector.inTrace(caller.traceId);
      const names = found.map((s) => s.name);
      const wanted = ['POST /api/orgs/:orgId/alert-channels/:channelId/test', 'SignalWithStartWorkflow:deliveryLane', 'StartActivity:', 'RunActivity:'];
      return wanted.every((prefix) => names.some((n) => n.startsWith(prefix))) && found.some((s) => s.kind === 3 && s.attributes['url.full'] === receiver.url(hookPath)) && found;
    }, 60_000);
    const byName = (prefix: string) => {
      const span = spans.find((s) => s.name.startsWith(prefix));
      if (!span) throw new Error(`no span ${prefix} among ${spans.map((s) => s.name).join(', ')}`);
      return span;
    };
    expect(byName('POST /api/orgs/:orgId/alert-channels/:channelId/test').parentSpanId).toBe(caller.parentId);
    expect(byName('SignalWithStartWorkflow:deliveryLane')).toBeDefined();
    // Made inside the workflow sandbox and exported through the worker's sink, still in the trace.
    const scheduled = byName('StartActivity:');
    expect(scheduled.parentSpanId).not.toBe('');
    const ran = byName('RunActivity:');
    expect(ran.parentSpanId).toBe(scheduled.spanId);
    const outbound = spans.find((s) => s.kind === 3 && s.attributes['url.full'] === receiver.url(hookPath))!;
    expect(outbound.attributes['http.response.status_code']).toBe(200);
    // Everything arrived as protobuf, the default protocol.
    expect([...collector.contentTypes]).toEqual(['application/x-protobuf']);
  });

  it('loads the SDK and its instrumentations', async () => {
    expect(loadedSdkPackages(await app.loadedModules())).toEqual(SDK_PACKAGES);
  });
});

describe('without an OTLP endpoint', () => {
  it('loads none of the SDK, the instrumentations or the Temporal interceptors', async () => {
    const app = await spawnApp({ ...setup.env, TEMPORAL_TASK_QUEUE: `tracing-off-${process.pid}`, OTEL_EXPORTER_OTLP_ENDPOINT: '', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: '' });
    apps.push(app);
    const res = await fetch(`${app.data}/api/flags/evaluate`, {
      method: 'POST',
      headers: { authorization: `Bearer ${setup.readToken}`, 'content-type': 'application/json', traceparent: traceparent().header },
      body: JSON.stringify({ flagKey: 'absent', serviceId: setup.serviceId, environment: 'production', context: { targetingKey: 'user-1' } }),
    });
    await res.text();
    const loaded = await app.loadedModules();
    // The probe works: the app's own dependencies are listed.
    expect(loaded.some((file) => file.includes('/node_modules/express/'))).toBe(true);
    expect(loadedSdkPackages(loaded)).toEqual([]);
  });
});

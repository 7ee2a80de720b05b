/**
 * Past one machine (docs/kubernetes.md, docs/architecture.md): the roles as separate processes on
 * the production profile, as the Helm chart and docker-compose.yml run them. One control plane, one
 * worker and two data planes (`node dist/api/main.js`, NODE_ENV=production) over one Postgres,
 * Redis, Temporal and ClickHouse (bench/memory-clickhouse.ts, chDB behind ClickHouse's HTTP
 * interface, in a process of its own: there is no ClickHouse server here). A flag changed on the
 * control plane reaches the SSE, OFREP (ETag polling, as the OFREP web provider does) and flagd
 * sync clients of both data planes; a data plane killed outright leaves the other serving.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createClient } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { EventSource } from 'eventsource';
import postgres from 'postgres';
import { FlagSyncService } from '../../api/gen/flagd/sync/v1/sync_pb';
import { listenerUrl, productionBackends, productionEnv, startApp, type Child, type ProductionBackends } from '../../bench/memory-procs';
import { follow } from '../flagd/support';
import { eventually, requireInfra } from '../support/harness';

const START_MS = 180_000;

interface DataPlane {
  child: Child;
  url: string;
  syncUrl: string;
}

let backends: ProductionBackends;
const children: Child[] = [];
const cleanups: (() => Promise<void>)[] = [];
let control: string;
const dataPlanes: DataPlane[] = [];
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'flags-multi-'));

async function start(name: string, roles: string): Promise<Child> {
  const child = startApp(name, productionEnv(backends, roles, path.join(dir, name)));
  children.push(child);
  await listenerUrl(child, 'management', START_MS);
  return child;
}

/** Waits for the process's /readyz (docs/operations.md#readiness): snapshots loaded, listeners open. */
async function ready(child: Child): Promise<void> {
  const management = await listenerUrl(child, 'management', START_MS);
  await eventually(async () => (await fetch(`${management}/readyz`)).status === 200, START_MS);
}

async function api(method: string, url: string, opts: { cookie?: string; csrf?: string; token?: string; body?: unknown; headers?: Record<string, string> } = {}) {
  const res = await fetch(url, {
    method,
    headers: {
      ...(opts.body !== undefined ? { 'content-type': 'application/json' } : {}),
      ...(opts.cookie ? { cookie: opts.cookie } : {}),
      ...(opts.csrf ? { 'x-csrf-token': opts.csrf } : {}),
      ...(opts.token ? { authorization: `Bearer ${opts.token}` } : {}),
      ...opts.headers,
    },
    body: opts.body !== undefined ? JSON.stringify(opts.body) : undefined,
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : undefined };
}

beforeAll(async () => {
  requireInfra();
  ({ backends } = await productionBackends('multi-instance', path.join(dir, 'clickhouse'), {
    track: (child) => {
      children.push(child);
      return child;
    },
    cleanup: (fn) => cleanups.push(fn),
  }));
  // The control plane migrates first, as the Helm chart's migration hook does before the others start.
  const controlChild = await start('control', 'control');
  control = await listenerUrl(controlChild, 'control', START_MS);
  const [worker, ...planes] = await Promise.all([start('worker', 'worker'), start('data-1', 'data'), start('data-2', 'data')]);
  await Promise.all([controlChild, worker!, ...planes].map(ready));
  for (const child of planes) {
    dataPlanes.push({ child, url: await listenerUrl(child, 'data', START_MS), syncUrl: await listenerUrl(child, 'flagd-sync', START_MS) });
  }
}, 6 * 60_000);

afterAll(async () => {
  await Promise.all(children.map((c) => c.stop(10_000)));
  for (const cleanup of cleanups) await cleanup().catch(() => undefined);
  fs.rmSync(dir, { recursive: true, force: true });
}, 120_000);

describe('two data planes, a control plane and a worker as separate processes', () => {
  let projectId: string;
  let serviceId: string;
  let session: { cookie: string; csrf: string };
  let token: string;

  it('sets up through the control plane: a user, a project, a service, a flag and a bound token', async () => {
    const email = `multi-${process.pid}@example.com`;
    const signup = await fetch(`${control}/api/auth/signup`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'Multi', email, password: 'correct horse battery staple' }),
    });
    expect(signup.status).toBe(201);
    // Mail is not sent on this profile without SMTP_URL: the address is verified in the database.
    const sql = postgres(backends.databaseUrl, { max: 1, onnotice: () => undefined });
    await sql`UPDATE users SET email_verified = true WHERE email = ${email}`;
    await sql.end();
    const cookie = signup.headers.getSetCookie().map((c) => c.split(';')[0]).join('; ');
    const csrf = (await api('GET', `${control}/api/csrf-token`, { cookie })).body.token as string;
    session = { cookie, csrf };
    const project = await api('POST', `${control}/api/projects`, { ...session, body: { name: 'Multi' } });
    expect(project.status).toBe(201);
    projectId = project.body.id;
    const service = await api('POST', `${control}/api/services`, { ...session, body: { projectId, name: 'Checkout' } });
    expect(service.status).toBe(201);
    serviceId = service.body.id;
    const flag = await api('POST', `${control}/api/flags`, { ...session, body: { key: 'new-checkout', serviceId, environment: 'production', type: 'boolean', enabled: false, defaultValue: true } });
    expect(flag.status).toBe(201);
    const bound = await api('POST', `${control}/api/projects/${projectId}/tokens`, {
      ...session,
      body: { name: 'sdk', permissions: { read: true }, scope: { serviceId, environment: 'production' } },
    });
    expect(bound.status).toBe(201);
    token = bound.body.value;
  });

  it('a change on the control plane reaches SSE, OFREP and flagd sync clients of both data planes', async () => {
    const streams = dataPlanes.map((plane) => {
      const messages: { type: string; flag?: { key: string; enabled: boolean } }[] = [];
      const source = new EventSource(`${plane.url}/api/flags/stream?serviceId=${serviceId}&environment=production`, {
        fetch: (input, init) => fetch(input, { ...init, headers: { ...(init?.headers ?? {}), authorization: `Bearer ${token}` } }),
      });
      source.onmessage = (event) => messages.push(JSON.parse(event.data));
      return { source, messages };
    });
    const aborts = dataPlanes.map(() => new AbortController());
    const syncs = dataPlanes.map((plane, i) =>
      follow(createClient(FlagSyncService, createGrpcTransport({ baseUrl: plane.syncUrl, idleConnectionTimeoutMs: 500 })).syncFlags({ selector: token }, { signal: aborts[i]!.signal })),
    );
    const ofrep = (plane: DataPlane, etag?: string) =>
      api('POST', `${plane.url}/api/ofrep/v1/evaluate/flags`, { token, body: { context: { targetingKey: 'user-1' } }, headers: etag ? { 'if-none-match': etag } : {} });
    try {
      // Each client has its first state from its data plane: the flag off.
      await eventually(async () => streams.every((s) => s.messages.some((m) => m.type === 'connected')), 30_000);
      await eventually(async () => syncs.every((s) => s.messages.length > 0), 30_000);
      // A disabled flag reaches flagd providers as its single variant `disabled` (docs/flagd.md#disabled-flags).
      const served = (message: { flagConfiguration: string }) => JSON.parse(message.flagConfiguration).flags['new-checkout'].defaultVariant as string;
      for (const sync of syncs) expect(served(sync.messages[0]!)).toBe('disabled');
      const before = await Promise.all(dataPlanes.map((plane) => ofrep(plane)));
      for (const res of before) {
        expect(res.status).toBe(200);
        expect(res.body.flags).toContainEqual(expect.objectContaining({ key: 'new-checkout', reason: 'DISABLED' }));
      }
      const etags = before.map((res) => res.headers.get('etag')!);
      expect((await ofrep(dataPlanes[0]!, etags[0])).status).toBe(304);

      const toggled = await api('POST', `${control}/api/flags/new-checkout/toggle?serviceId=${serviceId}&environment=production`, session);
      expect(toggled.status).toBe(200);
      expect(toggled.body.enabled).toBe(true);

      await eventually(async () => streams.every((s) => s.messages.some((m) => m.type === 'flag-update' && m.flag?.key === 'new-checkout' && m.flag.enabled)), 30_000);
      await eventually(
        async () => syncs.every((s) => s.messages.length > 1 && served(s.messages.at(-1)!) !== 'disabled'),
        30_000,
      );
      for (const [i, plane] of dataPlanes.entries()) {
        const after = await eventually(async () => {
          const res = await ofrep(plane, etags[i]);
          return res.status === 200 ? res : undefined;
        });
        expect(after.body.flags).toContainEqual(expect.objectContaining({ key: 'new-checkout', value: true }));
        expect(after.body.flags.find((f: { key: string }) => f.key === 'new-checkout').reason).not.toBe('DISABLED');
      }
      for (const sync of syncs) expect(sync.ended).toBeUndefined();
    } finally {
      for (const s of streams) s.source.close();
      for (const a of aborts) a.abort();
    }
  }, 120_000);

  it('a data plane killed outright leaves the other serving, and changes still reach it', async () => {
    const [killed, survivor] = dataPlanes as [DataPlane, DataPlane];
    killed.child.killGroup();
    await eventually(async () => !killed.child.running, 30_000);
    await expect(fetch(`${killed.url}/api/ofrep/v1/evaluate/flags/new-checkout`, { method: 'POST' })).rejects.toThrow();
    const evaluate = () => api('POST', `${survivor.url}/api/ofrep/v1/evaluate/flags/new-checkout`, { token, body: { context: { targetingKey: 'user-2' } } });
    expect((await evaluate()).body).toMatchObject({ key: 'new-checkout', value: true });
    const toggled = await api('POST', `${control}/api/flags/new-checkout/toggle?serviceId=${serviceId}&environment=production`, session);
    expect(toggled.body.enabled).toBe(false);
    await eventually(async () => (await evaluate()).body.reason === 'DISABLED', 30_000);
  }, 120_000);
});

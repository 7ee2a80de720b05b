import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import postgres from 'postgres';
import { projectPath } from '../../api/infra/paths';
import { freePort } from '../../api/infra/temporal';
import { eventually, requireInfra, startTestApp } from '../support/harness';
import { createFlag, createProject, createWebhook, personalToken, qs, startReceiver, uniquePath, type Receiver } from '../webhooks/support';

/**
 * The app is killed with SIGKILL (its whole process group: listeners, relay, Temporal
 * worker and its embedded Temporal dev server) in the middle of a burst of toggles, then restarted
 * on the same Postgres, Redis and Temporal data directory. Every change that committed reaches the
 * webhook at least once, and a change delivered more than once carries the same delivery id each time.
 */
const TOGGLES = 150;
const IN_FLIGHT = 8;
const KILL_AFTER = 50;

jest.setTimeout(300_000);

let receiver: Receiver;
let child: ChildProcess | undefined;
let db: postgres.Sql | undefined;
let databaseName = '';
const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'flags-crash-'));

afterAll(async () => {
  if (child?.pid) killGroup(child);
  await receiver?.close();
  await db?.end();
  if (databaseName) {
    const admin = postgres(requireInfra().databaseUrl, { max: 1, onnotice: () => undefined });
    await admin.unsafe(`DROP DATABASE IF EXISTS ${databaseName} WITH (FORCE)`).catch(() => undefined);
    await admin.end();
  }
  fs.rmSync(dataDir, { recursive: true, force: true });
});

function killGroup(proc: ChildProcess) {
  try {
    process.kill(-proc.pid!, 'SIGKILL');
  } catch {
    // Already gone.
  }
}

/** The app as its own process group (tsx and the app it runs), as `npm run dev` starts it, with every role. */
function spawnApp(env: Record<string, string>): ChildProcess {
  // No TEMPORAL_ADDRESS: the app starts its own Temporal dev server (SQLite under DATA_DIR) as
  // a child in its process group, so the SIGKILL takes Temporal down with it.
  const { TEMPORAL_ADDRESS: _shared, ...inherited } = process.env;
  const proc = spawn(process.execPath, [projectPath('node_modules/tsx/dist/cli.mjs'), projectPath('api/main.ts')], {
    env: { ...inherited, ...env },
    detached: true,
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  const stderr: string[] = [];
  proc.stderr?.on('data', (chunk: Buffer) => stderr.push(chunk.toString()));
  proc.on('exit', (code, signal) => {
    if (signal !== 'SIGKILL' && code !== 0) console.error(`app exited with ${code}:\n${stderr.join('').slice(-4000)}`);
  });
  return proc;
}

it('delivers every committed toggle at least once across a SIGKILL of the app, duplicates sharing their delivery id', async () => {
  // Users, project, webhook and flag through the API of an in-process app, which then stops and
  // leaves its database to the spawned one.
  const setup = await startTestApp();
  const p = await createProject(setup);
  receiver = await startReceiver();
  const hookPath = uniquePath('crash');
  const webhook = await createWebhook(p.owner, { projectId: p.projectId, url: receiver.url(hookPath), events: ['flag.toggled'] });
  receiver.expectSecret(hookPath, webhook.secret);
  const key = `crash-${Date.now().toString(36)}`;
  await createFlag(p.owner, p.serviceId, key);
  const token = await personalToken(p.owner, 'write');
  const { config } = setup.platform;
  databaseName = new URL(setup.databaseUrl).pathname.slice(1);
  await setup.stop({ keepDatabase: true });
  db = postgres(setup.databaseUrl, { max: 2, onnotice: () => undefined });

  const [port, dataPort, ingestPort] = [await freePort(), await freePort(), await freePort()];
  const env = {
    NODE_ENV: 'test',
    PORT: String(port),
    DATA_PORT: String(dataPort),
    INGEST_PORT: String(ingestPort),
    MANAGEMENT_PORT: '0',
    FLAGD_PORT: '0',
    FLAGD_SYNC_PORT: '0',
    DATA_DIR: dataDir,
    DATABASE_URL: setup.databaseUrl,
    REDIS_URL: config.REDIS_URL ?? '',
    REDIS_KEY_PREFIX: config.REDIS_KEY_PREFIX,
    TEMPORAL_CLI_PATH: process.env.TEMPORAL_CLI_PATH ?? 'temporal',
    TEMPORAL_TASK_QUEUE: config.TEMPORAL_TASK_QUEUE,
    CLICKHOUSE_DATABASE: config.CLICKHOUSE_DATABASE,
    CHDB_PATH: path.join(dataDir, 'chdb'),
    WORKFLOW_BUNDLE_PATH: process.env.WORKFLOW_BUNDLE_PATH ?? '',
    SCRYPT_COST_LOG2: '12',
    LOG_LEVEL: 'error',
    ALLOW_PRIVATE_WEBHOOK_TARGETS: 'true',
  };
  const base = `http://127.0.0.1:${port}`;
  const start = async () => {
    child = spawnApp(env);
    const proc = child;
    await eventually(async () => {
      if (proc.exitCode !== null) throw new Error(`the app exited with ${proc.exitCode}`);
      return (await fetch(`${base}/api/health`).catch(() => undefined))?.ok;
    }, 120_000, 250);
  };

  // Toggles, IN_FLIGHT at a time; the versions of those answered 200 (committed for sure).
  const acknowledged: number[] = [];
  let sent = 0;
  const burst = async (until: number, onAck?: () => void) => {
    await Promise.all(
      Array.from({ length: IN_FLIGHT }, async () => {
        while (sent < until) {
          sent++;
          const res = await fetch(`${base}/api/flags/${key}/toggle${qs({ serviceId: p.serviceId, environment: 'production' })}`, {
            method: 'POST',
            headers: { authorization: `Bearer ${token}` },
          }).catch(() => undefined);
          if (res?.status === 200) {
            acknowledged.push(((await res.json()) as { version: number }).version);
            onAck?.();
          } else if (res) await res.text();
        }
      }),
    );
  };

  await start();
  const first = child!;
  // Killed from inside the burst, with requests in flight, once KILL_AFTER toggles were acknowledged.
  await burst(TOGGLES, () => {
    if (acknowledged.length === KILL_AFTER) killGroup(first);
  }).catch(() => undefined);
  await new Promise((resolve) => (first.exitCode !== null || first.signalCode !== null ? resolve(undefined) : first.once('exit', resolve)));
  const beforeRestart = acknowledged.length;
  expect(beforeRestart).toBeGreaterThanOrEqual(KILL_AFTER);
  expect(beforeRestart).toBeLessThan(TOGGLES);

  await start();
  sent = 0;
  await burst(TOGGLES - beforeRestart);
  expect(acknowledged.length).toBe(TOGGLES);

  // Every committed toggle (its outbox event), delivered at least once.
  const committed = await db<{ timestamp: string; version: number }[]>`
    SELECT payload->>'timestamp' AS timestamp, (payload->'flag'->>'version')::int AS version
    FROM flag_outbox WHERE flag_key = ${key} AND event = 'flag.toggled' ORDER BY seq`;
  const committedVersions = new Set(committed.map((c) => c.version));
  for (const version of acknowledged) expect(committedVersions.has(version)).toBe(true);

  const byTimestamp = () => {
    const groups = new Map<string, string[]>();
    for (const d of receiver.received(hookPath)) {
      const list = groups.get(d.body.timestamp) ?? [];
      list.push(d.headers['webhook-id'] as string);
      groups.set(d.body.timestamp, list);
    }
    return groups;
  };
  await eventually(async () => committed.every((c) => byTimestamp().has(c.timestamp)), 180_000, 500).catch(async (error) => {
    // What a failure needs to be understood: the undelivered changes and where their work stands.
    const missing = committed.filter((c) => !byTimestamp().has(c.timestamp)).map((c) => c.version);
    const pending = await db!`SELECT consumer, attempts, last_error FROM flag_outbox_pending WHERE flag_key = ${key} ORDER BY seq LIMIT 5`;
    const deliveries = await db!`SELECT status, last_error, count(*)::int AS n FROM outbound_deliveries WHERE flag_key = ${key} GROUP BY status, last_error`;
    throw new Error(`${(error as Error).message}; versions not delivered: ${missing.join(',')}; pending: ${JSON.stringify(pending)}; deliveries: ${JSON.stringify(deliveries)}`);
  });

  const groups = byTimestamp();
  expect([...groups.keys()].sort()).toEqual(committed.map((c) => c.timestamp).sort());
  const ids = new Set<string>();
  for (const deliveryIds of groups.values()) {
    // Duplicates of one change share its delivery id; different changes never do.
    expect(new Set(deliveryIds).size).toBe(1);
    expect(ids.has(deliveryIds[0])).toBe(false);
    ids.add(deliveryIds[0]);
  }
  expect(receiver.received(hookPath).every((d) => d.svcSignatureValid && d.standardSignatureValid)).toBe(true);
});

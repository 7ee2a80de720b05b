/**
 * The server side of `npm run bench:eval` (started by bench/eval.ts as a child process, pinned
 * to its own core). One Node process hosts, side by side:
 *   - the platform's control and data listeners (the real data plane, lean path included),
 *   - a bare node:http route and a bare Express 5 route answering a constant JSON body,
 * so every variant runs in the same process model. Talks to its parent over IPC.
 *
 * Backends: the ones named by DATABASE_URL / REDIS_URL / TEMPORAL_ADDRESS / CLICKHOUSE_URL (a
 * fresh database `bench_<pid>` is created on the Postgres server and dropped at the end), or the
 * embedded profile when none is set. For the split run (bench/eval.ts) the parent passes
 * BENCH_SERVER_ROLES, BENCH_DATABASE_URL and BENCH_SHARED_ID (one key prefix for both servers). Rate limits are raised far above the load (the documented
 * way to benchmark: RATE_LIMIT_PER_IP, RATE_LIMIT_PER_TOKEN, RATE_LIMIT_PER_SERVICE).
 */
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import diagnostics from 'node:diagnostics_channel';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import postgres from 'postgres';

type ConfigModule = typeof import('../api/config');
type LoggerModule = typeof import('../api/infra/logger');
type TracingModule = typeof import('../api/infra/tracing');
type ServerModule = typeof import('../api/server');

/**
 * The platform as `npm start` runs it: tsc's build in dist/ (the bench scripts build it first).
 * BENCH_SOURCE=ts loads the TypeScript sources through tsx instead, whose esbuild output names
 * every closure at run time and turns imported bindings into getters: a few percent slower on
 * the hot path than what is deployed.
 */
const PLATFORM_BASE = process.env.BENCH_SOURCE === 'ts' ? '../api' : '../dist/api';

/** What runs before the instrumented modules load (as in api/main.ts): config, logger, tracing. */
async function loadStart(): Promise<ConfigModule & LoggerModule & TracingModule> {
  const [config, logger, tracing] = await Promise.all([
    import(`${PLATFORM_BASE}/config`) as Promise<ConfigModule>,
    import(`${PLATFORM_BASE}/infra/logger`) as Promise<LoggerModule>,
    import(`${PLATFORM_BASE}/infra/tracing`) as Promise<TracingModule>,
  ]);
  return { ...config, ...logger, ...tracing };
}

const RAISED_LIMIT = String(1_000_000_000);

async function listen(server: http.Server): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as AddressInfo).port;
}

async function main() {
  const { parseConfig, ANY_FREE_PORTS, createLogger, startTracing, builtWorkflowBundle } = await loadStart();
  let body = Buffer.from('{}');
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'flags-bench-'));
  // BENCH_DATABASE_URL: a database the parent made for several servers (the split run);
  // otherwise a database of our own on DATABASE_URL's server, or the embedded profile.
  let benchDatabase: string | undefined;
  let databaseUrl = process.env.BENCH_DATABASE_URL ?? process.env.DATABASE_URL;
  if (!process.env.BENCH_DATABASE_URL && databaseUrl) {
    benchDatabase = `bench_${process.pid}`;
    const admin = postgres(databaseUrl, { max: 1, onnotice: () => undefined });
    await admin.unsafe(`CREATE DATABASE ${benchDatabase}`);
    await admin.end();
    const u = new URL(databaseUrl);
    u.pathname = `/${benchDatabase}`;
    databaseUrl = u.toString();
  }
  const shared = process.env.BENCH_SHARED_ID ?? String(process.pid);
  const config = parseConfig({
    ...process.env,
    NODE_ENV: 'test',
    ...(databaseUrl ? { DATABASE_URL: databaseUrl } : {}),
    REDIS_KEY_PREFIX: `bench:${shared}:`,
    CLICKHOUSE_DATABASE: `bench_${shared}`,
    TEMPORAL_TASK_QUEUE: `bench-${shared}`,
    ...ANY_FREE_PORTS,
    ROLES: process.env.BENCH_SERVER_ROLES ?? 'control,data',
    DATA_DIR: dataDir,
    LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'warn',
    SCRYPT_COST_LOG2: '12',
    DEMO_SEED: process.env.BENCH_DEMO_SEED ?? 'true',
    RATE_LIMIT_PER_IP: RAISED_LIMIT,
    RATE_LIMIT_PER_TOKEN: RAISED_LIMIT,
    RATE_LIMIT_PER_SERVICE: RAISED_LIMIT,
    // BENCH_EVENTS=off: the writer's buffer holds one event, so every other evaluation event is
    // dropped (and counted) instead of inserted into the in-process chDB. That measures the request
    // path alone, as on the production profile where ClickHouse runs on another machine (chDB's
    // insert and merge threads otherwise share the server's pinned core).
    ...(process.env.BENCH_EVENTS === 'off' ? { EVAL_EVENTS_FLUSH_MS: '3600000', EVAL_EVENTS_MAX_BUFFERED: '1' } : {}),
  });
  const logger = createLogger(config.LOG_LEVEL);
  // OTEL_EXPORTER_OTLP_ENDPOINT from the parent (bench/eval.ts, tracing on): started first, so
  // http, express, ioredis and undici load instrumented, as in api/main.ts.
  const tracing = await startTracing(config, logger);
  // As api/main.ts: the built workflow bundle, so webpack's modules are not on the measured heap.
  if (!config.WORKFLOW_BUNDLE_PATH) config.WORKFLOW_BUNDLE_PATH = builtWorkflowBundle(Boolean(tracing));
  const { createPlatform, startRoles } = (await import(`${PLATFORM_BASE}/server`)) as ServerModule;
  const { default: express } = await import('express');
  const platform = await createPlatform(config, logger, tracing);
  const running = await startRoles(platform, config.ROLES);

  // Bare node:http: read the body, answer the constant.
  const bare = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': body.length });
      res.end(body);
    });
  });
  bare.keepAliveTimeout = 5_000;
  // Bare Express 5: one route, default settings, no body parser.
  const app = express();
  app.post('/bare', (req, res) => {
    req.resume();
    req.on('end', () => {
      res.type('application/json').send(body);
    });
  });
  const expressServer = http.createServer(app);
  expressServer.keepAliveTimeout = 5_000;
  const barePort = await listen(bare);
  const expressPort = await listen(expressServer);

  const stop = async () => {
    bare.closeAllConnections();
    expressServer.closeAllConnections();
    await new Promise((r) => bare.close(r));
    await new Promise((r) => expressServer.close(r));
    await running.stop();
    await tracing?.shutdown();
    if (benchDatabase && process.env.DATABASE_URL) {
      const admin = postgres(process.env.DATABASE_URL, { max: 1, onnotice: () => undefined });
      await admin.unsafe(`DROP DATABASE IF EXISTS ${benchDatabase} WITH (FORCE)`).catch(() => undefined);
      await admin.end();
    }
    fs.rmSync(dataDir, { recursive: true, force: true });
  };

  // Whole server time of each request (headers parsed -> last byte handed to the socket), for
  // the bar that speaks of server time: body read and parse, validation, handler, JSON answer.
  // Subscribed only while the parent measures it, so no other run pays for it.
  const arrivals = new WeakMap<object, number>();
  let serverTimes: number[] = [];
  // From the request's last body byte: what the server spent once the client had sent it all.
  let afterBodyTimes: number[] = [];
  const bodyArrivals = new WeakMap<object, number>();
  // Where each request's time went, to tell a slow request from a busy core: the scheduler's
  // counters of every thread, read when its headers arrive (before the timed span starts) and
  // when it is answered (after the span is timed).
  const schedulerAtStart = new WeakMap<object, ThreadTimes>();
  let threadTimes: ThreadTimes[] = [];
  const onStart = (message: unknown) => {
    const { request } = message as { request: import('node:http').IncomingMessage };
    schedulerAtStart.set(request, readThreadTimes());
    arrivals.set(request, performance.now());
    request.once('end', () => bodyArrivals.set(request, performance.now()));
  };
  const onFinish = (message: unknown) => {
    const { request } = message as { request: object };
    const finished = performance.now();
    const started = arrivals.get(request);
    if (started !== undefined) serverTimes.push(finished - started);
    const bodyArrived = bodyArrivals.get(request);
    const atStart = schedulerAtStart.get(request);
    if (bodyArrived !== undefined && atStart !== undefined) {
      afterBodyTimes.push(finished - bodyArrived);
      threadTimes.push(threadTimesSince(atStart));
    }
  };
  // Event-loop stalls in the server during a run: tells a slow tail caused here from one caused by the generator or the machine.
  const loopDelay = monitorEventLoopDelay({ resolution: 1 });
  loopDelay.enable();
  process.on('message', (message: { type: string; body?: string; gc?: boolean }) => {
    if (message.type === 'body') {
      body = Buffer.from(message.body ?? '{}');
      process.send!({ type: 'body-set' });
    } else if (message.type === 'cpu') {
      process.send!({ type: 'cpu', usage: process.cpuUsage(), at: performance.now() });
    } else if (message.type === 'server-times-start') {
      serverTimes = [];
      afterBodyTimes = [];
      threadTimes = [];
      diagnostics.subscribe('http.server.request.start', onStart);
      diagnostics.subscribe('http.server.response.finish', onFinish);
      process.send!({ type: 'server-times-started' });
    } else if (message.type === 'server-times') {
      diagnostics.unsubscribe('http.server.request.start', onStart);
      diagnostics.unsubscribe('http.server.response.finish', onFinish);
      process.send!({ type: 'server-times', times: serverTimes, afterBody: afterBodyTimes, threads: threadTimes });
    } else if (message.type === 'loop-delay') {
      process.send!({ type: 'loop-delay', p99: loopDelay.percentile(99) / 1e6, max: loopDelay.max / 1e6 });
      loopDelay.reset();
    } else if (message.type === 'memory') {
      // Asked with gc (the server started with --expose-gc): what stays allocated, not garbage.
      if (message.gc) global.gc?.();
      process.send!({ type: 'memory', usage: process.memoryUsage(), streams: platform.evaluation?.hub.size ?? 0 });
    } else if (message.type === 'stop') {
      stop().then(
        () => process.exit(0),
        () => process.exit(1),
      );
    }
  });
  process.send!({
    type: 'ready',
    control: running.urls.control,
    data: running.urls.data,
    flagd: running.urls.flagd,
    flagdSync: running.urls.flagdSync,
    bare: `http://127.0.0.1:${barePort}`,
    express: `http://127.0.0.1:${expressPort}`,
  });
}

/**
 * Milliseconds of a request from the kernel's scheduler statistics (/proc/self/task/<tid>/schedstat):
 * how long the JavaScript thread was ready but waiting for its core, and how long the process's
 * other threads (V8's compiler and collector helpers, libuv's pool) ran. Both are exact when read
 * from the JavaScript thread (the kernel settles a wait when the thread gets the core back, and
 * the other threads' time when they leave it); its own time on the core is not, being settled
 * only at the next tick. The server is pinned to one core: waiting beyond the other threads' time is another
 * process on that core.
 */
export interface ThreadTimes {
  waiting: number;
  otherThreads: number;
}

const JS_THREAD = String(process.pid);

function readThreadTimes(): ThreadTimes {
  const times: ThreadTimes = { waiting: 0, otherThreads: 0 };
  let tasks: string[];
  try {
    tasks = fs.readdirSync('/proc/self/task');
  } catch {
    return times;
  }
  for (const tid of tasks) {
    let fields: string[];
    try {
      fields = fs.readFileSync(`/proc/self/task/${tid}/schedstat`, 'utf8').split(' ');
    } catch {
      continue; // the thread ended meanwhile
    }
    if (tid === JS_THREAD) times.waiting = Number(fields[1]) / 1e6;
    else times.otherThreads += Number(fields[0]) / 1e6;
  }
  return times;
}

function threadTimesSince(start: ThreadTimes): ThreadTimes {
  const now = readThreadTimes();
  // A thread that ended during the request takes its time with it: never below zero.
  return { waiting: now.waiting - start.waiting, otherThreads: Math.max(0, now.otherThreads - start.otherThreads) };
}

main().catch((error) => {
  console.error('bench server failed:', error);
  process.exit(1);
});

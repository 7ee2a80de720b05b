import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import postgres from 'postgres';
import { ANY_FREE_PORTS, DEFAULT_REQUEST_DEADLINE_MS, parseConfig } from '../../api/config';
import { createLogger, type Logger } from '../../api/infra/logger';
import { openAnalytics } from '../../analytics/client';
import { createPlatform, startRoles, type Platform, type RunningListeners } from '../../api/server';
import { templateDatabase, withDatabase } from './global-setup';
import { workerChdbPath } from './chdb-path';

export interface TestResponse<T = any> {
  status: number;
  body: T;
  headers: Headers;
  text: string;
}

export interface RequestOptions {
  body?: unknown;
  /** Raw body string (sent as-is with the given content type). */
  rawBody?: string;
  token?: string;
  cookie?: string;
  csrf?: string;
  headers?: Record<string, string>;
  /** Which listener: control (default), data or ingest. */
  listener?: 'control' | 'data' | 'ingest';
}

export interface TestApp {
  platform: Platform;
  running: RunningListeners;
  /** flagd and flagdSync: the flagd listeners (FLAGD_PORT, FLAGD_SYNC_PORT), absent with FLAGD_ENABLED=false. */
  urls: { control: string; data: string; ingest: string; flagd?: string; flagdSync?: string };
  databaseUrl: string;
  request<T = any>(method: string, urlPath: string, opts?: RequestOptions): Promise<TestResponse<T>>;
  signup(opts?: { name?: string; email?: string; verified?: boolean }): Promise<TestUser>;
  /** The server's last error-level log lines (when no logger was passed): what a failing test should print. */
  errorLog(): string[];
  /**
   * keepDatabase: leaves its Postgres and ClickHouse databases to another app or process;
   * keepAnalytics: leaves only the ClickHouse one, for a test reading what the app wrote.
   */
  stop(opts?: { keepDatabase?: boolean; keepAnalytics?: boolean }): Promise<void>;
}

export interface TestUser {
  id: string;
  email: string;
  password: string;
  cookie: string;
  csrf: string;
  /** A request with this user's session cookie and CSRF header. */
  request<T = any>(method: string, urlPath: string, body?: unknown, opts?: RequestOptions): Promise<TestResponse<T>>;
}

export function requireInfra(): { databaseUrl: string; redisUrl: string; temporalAddress: string } {
  const { DATABASE_URL, REDIS_URL, TEMPORAL_ADDRESS } = process.env;
  if (!DATABASE_URL || !REDIS_URL || !TEMPORAL_ADDRESS) {
    throw new Error('Integration tests need the real servers: run `npm test`, or `source scripts/test-infra.sh up` first.');
  }
  return { databaseUrl: DATABASE_URL, redisUrl: REDIS_URL, temporalAddress: TEMPORAL_ADDRESS };
}

let counter = 0;

/** Keeps the last error lines in memory instead of printing them between jest's output. */
function errorSink() {
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk, _enc, done) {
      lines.push(...chunk.toString().split('\n').filter(Boolean));
      lines.splice(0, Math.max(0, lines.length - 50));
      done();
    },
  });
  return { lines, stream };
}

/** The production request deadline, for the tests whose bars rest on it (the harness's own is long). */
export const PRODUCTION_DEADLINE = { REQUEST_DEADLINE_MS: String(DEFAULT_REQUEST_DEADLINE_MS) };

/**
 * A full platform on ephemeral ports against the real Postgres (a fresh clone of the migrated
 * template), Redis (own key prefix), Temporal (own task queue) and chDB (own data dir).
 */
/** `databaseAddress` (host:port) reaches the app's database through another address, e.g. a test's TCP proxy. */
export async function startTestApp(
  env: Record<string, string> = {},
  opts: { logger?: Logger; databaseAddress?: string; /** Reads through the test Postgres' streaming replica (DATABASE_READ_URL). */ readReplica?: boolean } = {},
): Promise<TestApp> {
  const infra = requireInfra();
  const suffix = `${process.pid}_${++counter}_${randomBytes(3).toString('hex')}`;
  // A replica of another app passes that app's DATABASE_URL (and CLICKHOUSE_DATABASE): nothing to
  // create or drop then.
  const ownsDatabase = !env.DATABASE_URL;
  const ownsAnalyticsDatabase = !env.CLICKHOUSE_DATABASE && !env.CLICKHOUSE_URL;
  const dbName = `t_${suffix}`;
  if (ownsDatabase) {
    const admin = postgres(infra.databaseUrl, { max: 1, onnotice: () => undefined });
    await admin.unsafe(`CREATE DATABASE ${dbName} TEMPLATE ${templateDatabase()}`);
    await admin.end();
  }
  const databaseUrl = env.DATABASE_URL ?? withDatabase(infra.databaseUrl, dbName);
  const readUrl = opts.readReplica ? await replicaOf(dbName) : undefined;
  const connectUrl = new URL(databaseUrl);
  if (opts.databaseAddress) connectUrl.host = opts.databaseAddress;
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'flags-test-'));

  const config = parseConfig({
    NODE_ENV: 'test',
    ...ANY_FREE_PORTS,
    DATA_DIR: dataDir,
    DATABASE_URL: connectUrl.toString(),
    REDIS_URL: infra.redisUrl,
    REDIS_KEY_PREFIX: `t:${suffix}:`,
    TEMPORAL_ADDRESS: infra.temporalAddress,
    TEMPORAL_TASK_QUEUE: `test-${suffix}`,
    CLICKHOUSE_DATABASE: `t_${suffix}`,
    CHDB_PATH: workerChdbPath(),
    WORKFLOW_BUNDLE_PATH: process.env.WORKFLOW_BUNDLE_PATH ?? '',
    SCRYPT_COST_LOG2: '12',
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
    // Development conveniences the tests rely on (receivers on 127.0.0.1, reading mail).
    ALLOW_PRIVATE_WEBHOOK_TARGETS: 'true',
    DEV_MAILBOX: 'true',
    // Every test signs its users up from 127.0.0.1; the throttle tests set their own budgets.
    AUTH_RATE_LIMIT_PER_IP: '100000',
    SEND_LIMIT_PER_USER: '1000',
    SEND_LIMIT_PER_RECIPIENT: '1000',
    // A loaded 2-core CI machine must not turn a slow answer into the deadline's 503; the
    // deadline and outage tests pass PRODUCTION_DEADLINE.
    REQUEST_DEADLINE_MS: '30000',
    ...(readUrl ? { DATABASE_READ_URL: readUrl } : {}),
    ...env,
  });
  const errors = errorSink();
  const logger = opts.logger ?? (process.env.TEST_LOG_LEVEL ? createLogger(config.LOG_LEVEL) : createLogger('error', errors.stream));
  const platform = await createPlatform(config, logger);
  const running = await startRoles(platform, config.ROLES);
  const urls = running.urls as TestApp['urls'];

  const request = async <T = any>(method: string, urlPath: string, opts: RequestOptions = {}): Promise<TestResponse<T>> => {
    const headers: Record<string, string> = { ...(opts.headers ?? {}) };
    let body: string | undefined;
    if (opts.rawBody !== undefined) body = opts.rawBody;
    else if (opts.body !== undefined) {
      body = JSON.stringify(opts.body);
      headers['content-type'] ??= 'application/json';
    }
    if (opts.token) headers.authorization = `Bearer ${opts.token}`;
    if (opts.cookie) headers.cookie = opts.cookie;
    if (opts.csrf) headers['x-csrf-token'] = opts.csrf;
    const res = await fetch(urls[opts.listener ?? 'control'] + urlPath, { method, headers, body });
    const text = await res.text();
    let parsed: unknown = text;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      // Non-JSON bodies (SSE, 304) stay as text.
    }
    return { status: res.status, body: parsed as T, headers: res.headers, text };
  };

  const signup: TestApp['signup'] = async (opts = {}) => {
    const n = ++counter;
    const email = opts.email ?? `user${n}-${randomBytes(3).toString('hex')}@example.com`;
    const password = 'correct horse battery';
    const res = await request('POST', '/api/auth/signup', { body: { email, password, name: opts.name ?? `User ${n}` } });
    if (res.status !== 201) throw new Error(`signup failed: ${res.status} ${res.text}`);
    const cookie = (res.headers.get('set-cookie') ?? '').split(';')[0];
    const csrfRes = await request('GET', '/api/csrf-token', { cookie });
    const csrf = csrfRes.body.token as string;
    if (opts.verified) await platform.db.sql`UPDATE users SET email_verified = true WHERE id = ${res.body.user.id}`;
    return {
      id: res.body.user.id,
      email,
      password,
      cookie,
      csrf,
      request: (method, urlPath, body, extra = {}) => request(method, urlPath, { cookie, csrf, body, ...extra }),
    };
  };

  return {
    platform,
    running,
    urls,
    databaseUrl,
    request,
    signup,
    errorLog: () => [...errors.lines],
    async stop(opts = {}) {
      await running.stop();
      fs.rmSync(dataDir, { recursive: true, force: true });
      if (opts.keepDatabase) return;
      if (ownsAnalyticsDatabase && !opts.keepAnalytics) await dropAnalyticsDatabase(config.CLICKHOUSE_DATABASE, config.CHDB_PATH!);
      if (!ownsDatabase) return;
      const cleanup = postgres(infra.databaseUrl, { max: 1, onnotice: () => undefined });
      await cleanup.unsafe(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`).catch(() => undefined);
      await cleanup.end();
    },
  };
}

/**
 * Every app of a jest worker shares one chDB path (one engine per process), and the engine loads
 * and schedules background work for every database at its path: left there, a late suite's app took
 * ten times as long to start as the first. Dropped once its app (and its writers' last flush) stopped.
 */
async function dropAnalyticsDatabase(database: string, chdbPath: string): Promise<void> {
  const analytics = await openAnalytics({ database, chdbPath });
  try {
    await analytics.client.command({ query: `DROP DATABASE IF EXISTS ${database} SYNC` });
  } finally {
    await analytics.close();
  }
}

/** Polls until `check` returns a truthy value or the timeout passes. */
export async function eventually<T>(check: () => Promise<T | undefined | null | false>, timeoutMs = 15_000, intervalMs = 100): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value) return value;
    } catch (error) {
      last = error;
    }
    if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms${last ? `: ${(last as Error).message}` : ''}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

/**
 * The URL of database `dbName` on the test Postgres' streaming replica (scripts/test-infra.sh),
 * once the replica has replayed its creation.
 */
async function replicaOf(dbName: string): Promise<string> {
  const replicaUrl = process.env.TEST_DATABASE_REPLICA_URL;
  if (!replicaUrl) throw new Error('TEST_DATABASE_REPLICA_URL is not set: eval "$(bash scripts/test-infra.sh env)" first');
  const replica = postgres(replicaUrl, { max: 1, onnotice: () => undefined });
  try {
    await eventually(async () => (await replica`SELECT 1 FROM pg_database WHERE datname = ${dbName}`).length > 0, 30_000);
  } finally {
    await replica.end();
  }
  return withDatabase(replicaUrl, dbName);
}

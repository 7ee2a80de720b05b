/**
 * The fault matrix of `npm run bench:faults` (bench/faults.ts) and of its short version in the
 * suite (test/platform/faults.test.ts): a steady mixed load on two app instances while one
 * backend at a time is taken away and brought back, and what each outage cost.
 *
 * Load, through the public API only: REST evaluations on both data planes, flag creations on
 * both control planes (each a new key, so an acknowledged write can be looked up afterwards),
 * outcome events (`/api/analytics/track`), SSE clients and flagd sync clients on both data
 * planes and a webhook receiving every flag change. Bars (docs/quality-bars.md): every evaluation
 * during the outage answers, every write is acknowledged or refused within 5 s, no acknowledged
 * write is lost, every acknowledged change reaches every SSE client, every flagd sync client and
 * the webhook, recovery within 30 s.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { createClient } from '@connectrpc/connect';
import { createGrpcTransport, Http2SessionManager } from '@connectrpc/connect-node';
import { FlagSyncService } from '../api/gen/flagd/sync/v1/sync_pb';
import { createProject, createReadToken, createService, signUp, call, type Session } from './memory-setup';

export type BackendName = 'postgres' | 'redis' | 'temporal' | 'clickhouse';

/** A backend the matrix can take away (`stop`: a stopped server or a cut network) and bring back. */
export interface FaultTarget {
  name: BackendName;
  /** How it is taken away, for the report ("stopped", "unreachable"). */
  how: string;
  stop(): Promise<void>;
  start(): Promise<void>;
}

export interface AppUrls {
  control: string;
  data: string;
  /** The data plane's flagd sync listener (FLAGD_SYNC_PORT). */
  flagdSync: string;
}

export interface MatrixOptions {
  apps: AppUrls[];
  faults: FaultTarget[];
  outageMs: number;
  /** Concurrent evaluation loops per data plane, write loops per control plane. */
  evaluationLoops: number;
  writeLoops: number;
  /** Pause between two requests of one write or track loop. */
  writePauseMs: number;
  /** How long acknowledged changes may take to reach the streams and the webhook after recovery. */
  deliveryWaitMs: number;
  log(line: string): void;
}

export interface FaultResult {
  fault: BackendName;
  how: string;
  outageSeconds: number;
  /** `failures`: the first few failed answers, for the report. */
  evaluations: { total: number; ok: number; failures: string[] };
  writes: { total: number; acknowledged: number; refused: number; slowest: number; overBound: number; hanging: number };
  track: { total: number; accepted: number; refused: number };
  acknowledgedLost: number;
  /** Acknowledged creates missing at some SSE client, some flagd sync client, the webhook. */
  eventsLost: { sse: number; flagdSync: number; webhook: number };
  recoverSeconds: number | null;
  /** From the backend's return until every acknowledged change had reached the streams and the webhook. */
  deliveredSeconds: number | null;
}

/** A write answered (either way) within this bound meets the bar. */
export const WRITE_ANSWER_BOUND_MS = 5_000;
/** Recovery bar: service resumes within this long of the backend's return. */
export const RECOVERY_BOUND_MS = 30_000;
/** A client gives a request up after this long and counts it as hanging. */
const HANGING_MS = 30_000;

interface Setup {
  session: Session;
  projectId: string;
  serviceId: string;
  token: string;
  /** Bound to the service's development environment: the flagd sync clients' selector. */
  boundToken: string;
  evalKey: string;
}

interface Answer {
  status: number;
  ms: number;
  body?: unknown;
}

async function request(method: string, url: string, opts: { body?: unknown; session?: Session; token?: string } = {}): Promise<Answer> {
  const headers: Record<string, string> = {};
  if (opts.body !== undefined) headers['content-type'] = 'application/json';
  if (opts.session) {
    headers.cookie = opts.session.cookie;
    headers['x-csrf-token'] = opts.session.csrf;
  }
  if (opts.token) headers.authorization = `Bearer ${opts.token}`;
  const started = performance.now();
  try {
    const res = await fetch(url, { method, headers, body: opts.body === undefined ? undefined : JSON.stringify(opts.body), signal: AbortSignal.timeout(HANGING_MS) });
    const text = await res.text();
    let body: unknown;
    try {
      body = text ? JSON.parse(text) : undefined;
    } catch {
      body = text;
    }
    return { status: res.status, ms: performance.now() - started, body };
  } catch (error) {
    // 0: no answer at all (refused connection, or given up after HANGING_MS).
    return { status: (error as Error).name === 'TimeoutError' ? -1 : 0, ms: performance.now() - started };
  }
}

/** An SSE client that reconnects with Last-Event-ID, keeping everything it received. */
class StreamClient {
  text = '';
  private lastEventId?: string;
  private req?: http.ClientRequest;
  private stopped = false;

  constructor(private readonly url: string, private readonly token: string) {
    this.open();
  }

  private open() {
    if (this.stopped) return;
    const headers: Record<string, string> = { accept: 'text/event-stream', authorization: `Bearer ${this.token}` };
    if (this.lastEventId) headers['last-event-id'] = this.lastEventId;
    const again = () => {
      if (!this.stopped) setTimeout(() => this.open(), 500).unref();
    };
    this.req = http.get(this.url, { agent: false, headers }, (res) => {
      if (res.statusCode !== 200) {
        res.resume();
        return again();
      }
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        this.text += chunk;
        for (const m of chunk.matchAll(/^id: ?(.+)$/gm)) this.lastEventId = m[1].trim();
      });
      res.on('end', again);
      res.on('error', again);
    });
    this.req.on('error', again);
  }

  close() {
    this.stopped = true;
    this.req?.destroy();
  }
}

/**
 * A flagd sync client (docs/local-evaluation.md#streams): SyncFlags with the bound token as
 * selector, opened again 500 ms after its stream ends or fails, keeping the key of every flag any
 * of its documents held (each document is the flag set's whole configuration).
 */
class SyncClient {
  readonly keys = new Set<string>();
  private readonly sessions: Http2SessionManager;
  private readonly stopped = new AbortController();
  private readonly running: Promise<void>;

  constructor(url: string, token: string) {
    this.sessions = new Http2SessionManager(url);
    this.running = this.run(url, token);
  }

  private async run(url: string, token: string) {
    const client = createClient(FlagSyncService, createGrpcTransport({ baseUrl: url, sessionManager: this.sessions }));
    const { signal } = this.stopped;
    while (!signal.aborted) {
      try {
        for await (const message of client.syncFlags({ selector: token }, { signal, headers: { 'flagd-selector': token } })) this.receive(message.flagConfiguration);
      } catch {
        // Ended by the server or the network: opened again below.
      }
      await sleep(500, undefined, { signal }).catch(() => undefined);
    }
  }

  private receive(configuration: string) {
    try {
      for (const key of Object.keys((JSON.parse(configuration) as { flags?: object }).flags ?? {})) this.keys.add(key);
    } catch {
      // Not JSON: it holds no key, so whatever it should have carried counts as lost.
    }
  }

  async close() {
    this.stopped.abort();
    await this.running;
    this.sessions.abort();
  }
}

interface Receiver {
  url: string;
  bodies: string[];
  close(): Promise<void>;
}

async function startReceiver(): Promise<Receiver> {
  const bodies: string[] = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (c: string) => (body += c));
    req.on('end', () => {
      bodies.push(body);
      res.writeHead(200).end('ok');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    bodies,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

async function setUp(apps: AppUrls[], receiverUrl: string): Promise<Setup> {
  const api = apps[0].control;
  const session = await signUp(api, `bench-faults-${process.pid}-${Date.now()}@example.com`);
  const projectId = await createProject(session, 'Fault matrix');
  const serviceId = await createService(session, projectId, 'checkout');
  const token = await createReadToken(session, projectId);
  const boundToken = await createReadToken(session, projectId, { serviceId, environment: 'development' });
  const evalKey = 'fault-eval';
  await call('POST', `${api}/api/flags`, { session, body: { key: evalKey, serviceId, environment: 'development', type: 'boolean', enabled: true, defaultValue: true } });
  await call('POST', `${api}/api/webhooks`, { session, body: { projectId, url: receiverUrl, events: ['flag.created'] } });
  // Both data planes serve the flag before the load starts.
  for (const app of apps) {
    await until(30_000, async () => {
      const a = await request('POST', `${app.data}/api/flags/evaluate`, { token, body: { flagKey: evalKey, serviceId, environment: 'development' } });
      return a.status === 200 && (a.body as { value?: unknown }).value === true;
    });
  }
  return { session, projectId, serviceId, token, boundToken, evalKey };
}

async function until(timeoutMs: number, check: () => Promise<boolean>): Promise<boolean> {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    if (await check()) return true;
    await sleep(200);
  }
  return false;
}

let keyCounter = 0;
const newKey = (fault: string) => `${fault}-${process.pid}-${++keyCounter}`;

/** Runs every fault in turn and returns what each cost. */
export async function runFaultMatrix(opts: MatrixOptions): Promise<FaultResult[]> {
  const receiver = await startReceiver();
  const setup = await setUp(opts.apps, receiver.url);
  const streams = opts.apps.map((app) => new StreamClient(`${app.data}/api/flags/stream?serviceId=${setup.serviceId}&environment=development`, setup.token));
  const syncClients = opts.apps.map((app) => new SyncClient(app.flagdSync, setup.boundToken));
  const results: FaultResult[] = [];
  try {
    for (const fault of opts.faults) results.push(await runFault(opts, fault, setup, { streams, syncClients }, receiver));
  } finally {
    for (const s of streams) s.close();
    await Promise.all(syncClients.map((c) => c.close()));
    await receiver.close();
  }
  return results;
}

interface Clients {
  streams: StreamClient[];
  syncClients: SyncClient[];
}

async function runFault(opts: MatrixOptions, fault: FaultTarget, setup: Setup, { streams, syncClients }: Clients, receiver: Receiver): Promise<FaultResult> {
  const { apps } = opts;
  let running = true;
  const evaluations: { at: number; ok: boolean; answer: string }[] = [];
  const writes: { key: string; status: number; ms: number }[] = [];
  const track: Answer[] = [];

  const evaluationLoop = async (app: AppUrls) => {
    while (running) {
      const at = Date.now();
      const a = await request('POST', `${app.data}/api/flags/evaluate`, { token: setup.token, body: { flagKey: setup.evalKey, serviceId: setup.serviceId, environment: 'development', context: { targetingKey: `u-${at % 1000}` } } });
      const body = a.body as { value?: unknown; reason?: string } | undefined;
      evaluations.push({ at, ok: a.status === 200 && body?.value === true && body.reason !== 'ERROR', answer: `${a.status} ${JSON.stringify(a.body)}`.slice(0, 300) });
      await sleep(5);
    }
  };
  const writeLoop = async (app: AppUrls) => {
    while (running) {
      const key = newKey(fault.name);
      const a = await request('POST', `${app.control}/api/flags`, { session: setup.session, body: { key, serviceId: setup.serviceId, environment: 'development', type: 'boolean', enabled: true, defaultValue: false } });
      writes.push({ key, status: a.status, ms: a.ms });
      await sleep(opts.writePauseMs);
    }
  };
  const trackLoop = async (app: AppUrls) => {
    while (running) {
      track.push(await request('POST', `${app.data}/api/analytics/track`, { token: setup.token, body: { serviceId: setup.serviceId, environment: 'development', events: [{ event: 'checkout', targetingKey: 'u-1', value: 1 }] } }));
      await sleep(opts.writePauseMs);
    }
  };
  const loops = apps.flatMap((app) => [
    ...Array.from({ length: opts.evaluationLoops }, () => evaluationLoop(app)),
    ...Array.from({ length: opts.writeLoops }, () => writeLoop(app)),
    trackLoop(app),
  ]);

  opts.log(`${fault.name}: load running; taking it away (${fault.how}) for ${opts.outageMs / 1000} s`);
  await sleep(1_000);
  const from = Date.now();
  await fault.stop();
  await sleep(opts.outageMs);
  await fault.start();
  const to = Date.now();
  opts.log(`${fault.name}: back; waiting for service to resume`);

  // Recovered: a new flag is acknowledged by every control plane and served by every data plane.
  let recoverSeconds: number | null = null;
  await until(RECOVERY_BOUND_MS * 2, async () => {
    for (const app of apps) {
      const key = newKey(`${fault.name}-probe`);
      const created = await request('POST', `${app.control}/api/flags`, { session: setup.session, body: { key, serviceId: setup.serviceId, environment: 'development', type: 'boolean', enabled: true, defaultValue: true } });
      if (created.status !== 201) return false;
      for (const plane of apps) {
        const served = await until(5_000, async () => {
          const a = await request('POST', `${plane.data}/api/flags/evaluate`, { token: setup.token, body: { flagKey: key, serviceId: setup.serviceId, environment: 'development' } });
          return a.status === 200 && (a.body as { value?: unknown }).value === true;
        });
        if (!served) return false;
      }
    }
    recoverSeconds = (Date.now() - to) / 1000;
    return true;
  });
  await sleep(1_000);
  running = false;
  await Promise.all(loops);

  const during = evaluations.filter((e) => e.at >= from && e.at <= to);
  const acknowledged = writes.filter((w) => w.status === 201);
  const answered = writes.filter((w) => w.status > 0);

  // Every acknowledged create is stored.
  let acknowledgedLost = 0;
  for (const w of acknowledged) {
    const read = await request('GET', `${apps[0].control}/api/flags/${w.key}?serviceId=${setup.serviceId}&environment=development`, { session: setup.session });
    if (read.status !== 200) acknowledgedLost++;
  }
  // Every acknowledged create reaches every stream and the webhook.
  const missing = () => ({
    sse: acknowledged.filter((w) => streams.some((s) => !s.text.includes(`"${w.key}"`))).length,
    flagdSync: acknowledged.filter((w) => syncClients.some((c) => !c.keys.has(w.key))).length,
    webhook: acknowledged.filter((w) => !receiver.bodies.some((b) => b.includes(`"${w.key}"`))).length,
  });
  let deliveredSeconds: number | null = null;
  await until(opts.deliveryWaitMs, async () => {
    const m = missing();
    if (m.sse || m.flagdSync || m.webhook) return false;
    deliveredSeconds = (Date.now() - to) / 1000;
    return true;
  });

  const result: FaultResult = {
    fault: fault.name,
    how: fault.how,
    outageSeconds: (to - from) / 1000,
    evaluations: { total: during.length, ok: during.filter((e) => e.ok).length, failures: during.filter((e) => !e.ok).slice(0, 3).map((e) => e.answer) },
    writes: {
      total: writes.length,
      acknowledged: acknowledged.length,
      refused: answered.length - acknowledged.length,
      slowest: Math.round(Math.max(0, ...answered.map((w) => w.ms))),
      overBound: writes.filter((w) => w.ms > WRITE_ANSWER_BOUND_MS).length,
      hanging: writes.filter((w) => w.status <= 0).length,
    },
    track: { total: track.length, accepted: track.filter((t) => t.status === 202).length, refused: track.filter((t) => t.status !== 202).length },
    acknowledgedLost,
    eventsLost: missing(),
    recoverSeconds,
    deliveredSeconds,
  };
  opts.log(`${fault.name}: ${JSON.stringify(result)}`);
  return result;
}

/** Whether a fault's result meets every bar. */
export function meetsBars(r: FaultResult): boolean {
  return (
    r.evaluations.total > 0 &&
    r.evaluations.ok === r.evaluations.total &&
    r.writes.overBound === 0 &&
    r.writes.hanging === 0 &&
    r.acknowledgedLost === 0 &&
    r.eventsLost.sse === 0 &&
    r.eventsLost.flagdSync === 0 &&
    r.eventsLost.webhook === 0 &&
    r.recoverSeconds !== null &&
    r.recoverSeconds * 1000 <= RECOVERY_BOUND_MS
  );
}

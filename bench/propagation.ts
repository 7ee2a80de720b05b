/**
 * `npm run bench:propagation` (docs/quality-bars.md#propagation-and-streams): how fast a flag
 * change reaches SDKs and webhooks. Starts bench/eval-server.ts on the embedded profile with every
 * role `npm start` runs here (control, data, worker: PGlite, in-memory cache, the local Temporal
 * dev server), an SSE client on the data plane and a webhook receiver on 127.0.0.1 that answers
 * after 50 ms. Then four bursts of BENCH_TOGGLES (300) toggles, BENCH_IN_FLIGHT (8) requests in
 * flight: one flag, and across 100 flags, without and then with one webhook subscribed; last, a
 * fan-out burst (100 toggles, 10 webhooks) for deliveries per second beyond the toggle rate.
 * Reports the SSE lag (the toggle's 200 to its flag-update), webhook deliveries per second and the
 * time from the last toggle's 200 to the burst's last delivery, against the bars of
 * docs/quality-bars.md.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { call, signUp, startEvalServer, stopServer, type ServerUrls } from './server-process';

const TOGGLES = Number(process.env.BENCH_TOGGLES ?? 300);
const IN_FLIGHT = Number(process.env.BENCH_IN_FLIGHT ?? 8);
const FLAGS = 100;
/** The fan-out burst: webhooks subscribed, and toggles (across the flags) each delivered to all of them. */
const FANOUT_HOOKS = Number(process.env.BENCH_FANOUT_HOOKS ?? 10);
const FANOUT_TOGGLES = Number(process.env.BENCH_FANOUT_TOGGLES ?? 100);
const RECEIVER_DELAY_MS = 50;
/** Per burst: how long to wait for the last SSE update and the last delivery. */
const DRAIN_TIMEOUT_MS = 120_000;
const BARS = { sseP99Ms: 1_000, deliveriesPerSecond: 100, lastDeliveryMs: 10_000 };

/** Starts the server on the embedded profile, with the roles `npm start` runs here. */
function startServer() {
  // No external backend, whatever the shell has set (the child inherits this environment).
  for (const name of ['DATABASE_URL', 'REDIS_URL', 'TEMPORAL_ADDRESS', 'CLICKHOUSE_URL', 'BENCH_DATABASE_URL']) delete process.env[name];
  // BENCH_CPU_PROF=<dir>: the server writes a V8 CPU profile there when it stops (where the time goes).
  const profile = process.env.BENCH_CPU_PROF;
  return startEvalServer({
    env: { BENCH_SERVER_ROLES: 'control,data,worker', BENCH_DEMO_SEED: 'false' },
    nodeArgs: profile ? ['--cpu-prof', `--cpu-prof-dir=${profile}`] : [],
  });
}

/** The receiver: answers every delivery 200 after 50 ms, remembering when each arrived. */
async function startReceiver() {
  const arrivals: { at: number; id: string }[] = [];
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      arrivals.push({ at: performance.now(), id: String(req.headers['webhook-id']) });
      setTimeout(() => res.writeHead(200).end('ok'), RECEIVER_DELAY_MS);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, arrivals, close: () => server.close() };
}

/** One SSE stream on the data plane; every flag-update's arrival, by flag key and version. */
function openStream(urls: ServerUrls, serviceId: string, token: string): Promise<{ seen: Map<string, number>; close: () => void }> {
  const seen = new Map<string, number>();
  return new Promise((resolve, reject) => {
    const url = `${urls.data}/api/flags/stream?serviceId=${serviceId}&environment=production`;
    const req = http.get(url, { headers: { authorization: `Bearer ${token}`, accept: 'text/event-stream' } }, (res) => {
      if (res.statusCode !== 200) return reject(new Error(`stream: ${res.statusCode}`));
      let buffer = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        const at = performance.now();
        buffer += chunk;
        let end;
        while ((end = buffer.indexOf('\n\n')) >= 0) {
          const message = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          for (const line of message.split('\n')) {
            if (!line.startsWith('data:')) continue;
            const data = JSON.parse(line.slice(5));
            if (data.type === 'connected') resolve({ seen, close: () => req.destroy() });
            if (data.type === 'flag-update') seen.set(`${data.flagKey}@${data.flag.version}`, at);
          }
        }
      });
    });
    req.on('error', reject);
  });
}

const percentile = (sorted: number[], p: number) => (sorted.length ? sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] : NaN);

async function waitFor(check: () => boolean, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 20));
  }
  return true;
}

interface BurstResult {
  name: string;
  togglesPerSecond: number;
  sse: { p50: number; p99: number; max: number; missing: number };
  deliveries?: { expected: number; count: number; perSecond: number; lastAfterLastToggleMs: number };
}

async function main() {
  const started = Date.now();
  console.log(`starting the embedded profile (control, data, worker) ...`);
  const { child, urls } = await startServer();
  const receiver = await startReceiver();
  try {
    const api = urls.control;
    const as = await signUp(api);
    const project = (await call('POST', `${api}/api/projects`, { ...as, body: { name: 'Propagation' } })).body;
    const service = (await call('POST', `${api}/api/services`, { ...as, body: { projectId: project.id, name: 'propagation' } })).body;
    const keys = Array.from({ length: FLAGS }, (_, i) => `prop-${i}`);
    for (const key of keys) await call('POST', `${api}/api/flags`, { ...as, body: { key, serviceId: service.id, environment: 'production', type: 'boolean', enabled: false } });
    const token = (await call('POST', `${api}/api/projects/${project.id}/tokens`, { ...as, body: { name: 'bench', permissions: { read: true } } })).body.value as string;
    const stream = await openStream(urls, service.id, token);

    async function burst(name: string, keyOf: (i: number) => string, hooks: number, toggles = TOGGLES): Promise<BurstResult> {
      const sent: { key: string; version: number; at: number }[] = [];
      const deliveredBefore = receiver.arrivals.length;
      const firstToggle = performance.now();
      let next = 0;
      await Promise.all(
        Array.from({ length: IN_FLIGHT }, async () => {
          while (next < toggles) {
            const key = keyOf(next++);
            const { body } = await call('POST', `${api}/api/flags/${key}/toggle?serviceId=${service.id}&environment=production`, as);
            sent.push({ key, version: body.version, at: performance.now() });
          }
        }),
      );
      const lastToggle = Math.max(...sent.map((s) => s.at));
      await waitFor(() => sent.every((s) => stream.seen.has(`${s.key}@${s.version}`)), DRAIN_TIMEOUT_MS);
      const lags = sent.filter((s) => stream.seen.has(`${s.key}@${s.version}`)).map((s) => stream.seen.get(`${s.key}@${s.version}`)! - s.at).sort((a, b) => a - b);
      const result: BurstResult = { name, togglesPerSecond: (toggles / (lastToggle - firstToggle)) * 1000, sse: { p50: percentile(lags, 50), p99: percentile(lags, 99), max: lags[lags.length - 1], missing: sent.length - lags.length } };
      if (hooks) {
        const expected = toggles * hooks;
        await waitFor(() => receiver.arrivals.length - deliveredBefore >= expected, DRAIN_TIMEOUT_MS);
        const mine = receiver.arrivals.slice(deliveredBefore);
        const first = mine[0]?.at ?? NaN;
        const last = mine[mine.length - 1]?.at ?? NaN;
        result.deliveries = { expected, count: new Set(mine.map((a) => a.id)).size, perSecond: (mine.length / (last - first)) * 1000, lastAfterLastToggleMs: last - lastToggle };
      }
      return result;
    }

    const results: BurstResult[] = [];
    const oneFlag = () => keys[0];
    const acrossFlags = (i: number) => keys[i % FLAGS];
    const subscribe = () => call('POST', `${api}/api/webhooks`, { ...as, body: { projectId: project.id, url: receiver.url, events: ['flag.toggled'] } });
    results.push(await burst('one flag, no webhook', oneFlag, 0));
    results.push(await burst(`${FLAGS} flags, no webhook`, acrossFlags, 0));
    await subscribe();
    results.push(await burst('one flag, one webhook', oneFlag, 1));
    results.push(await burst(`${FLAGS} flags, one webhook`, acrossFlags, 1));
    // Deliveries per second beyond the toggle rate: every toggle fans out to FANOUT_HOOKS webhooks.
    for (let i = 1; i < FANOUT_HOOKS; i++) await subscribe();
    results.push(await burst(`fan-out: ${FANOUT_TOGGLES} toggles x ${FANOUT_HOOKS} webhooks`, acrossFlags, FANOUT_HOOKS, FANOUT_TOGGLES));
    stream.close();

    const ms = (n: number | undefined) => (n === undefined || Number.isNaN(n) ? '-' : `${Math.round(n)} ms`);
    console.log(`\n${TOGGLES} toggles per burst, ${IN_FLIGHT} in flight; receiver answers in ${RECEIVER_DELAY_MS} ms\n`);
    console.log('| burst | toggles/s | SSE lag p50 | p99 | max | missing | deliveries | deliveries/s | last toggle -> last delivery |');
    console.log('|---|---|---|---|---|---|---|---|---|');
    for (const r of results) {
      const d = r.deliveries;
      console.log(`| ${r.name} | ${r.togglesPerSecond.toFixed(0)} | ${ms(r.sse.p50)} | ${ms(r.sse.p99)} | ${ms(r.sse.max)} | ${r.sse.missing} | ${d ? `${d.count}/${d.expected}` : '-'} | ${d ? d.perSecond.toFixed(0) : '-'} | ${ms(d?.lastAfterLastToggleMs)} |`);
    }
    const burstsWithHook = results.slice(2, 4);
    const fanOut = results[4].deliveries!;
    const bars = [
      [`SSE p99 < ${BARS.sseP99Ms} ms in every burst`, results.every((r) => r.sse.p99 < BARS.sseP99Ms && r.sse.missing === 0)],
      [`>= ${BARS.deliveriesPerSecond} deliveries/s (fan-out)`, fanOut.count === fanOut.expected && fanOut.perSecond >= BARS.deliveriesPerSecond],
      [`last toggle -> its delivery < ${BARS.lastDeliveryMs / 1000} s (${TOGGLES}-toggle bursts)`, burstsWithHook.every((r) => r.deliveries!.count === TOGGLES && r.deliveries!.lastAfterLastToggleMs < BARS.lastDeliveryMs)],
    ] as const;
    console.log('\n| bar | met |\n|---|---|');
    for (const [bar, met] of bars) console.log(`| ${bar} | ${met ? 'yes' : 'NO'} |`);
    console.log(`\n(deliveries/s: the burst's deliveries over its first -> last arrival, so with one webhook it cannot exceed toggles/s; last delivery: the burst's, at or after the last toggle's own; total run ${Math.round((Date.now() - started) / 1000)} s)`);
  } finally {
    receiver.close();
    child.removeAllListeners('exit');
    await stopServer(child);
  }
}

main().then(
  () => process.exit(0),
  (error) => {
    console.error(error);
    process.exit(1);
  },
);

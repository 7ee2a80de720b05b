import { startScript, type Child } from '../../bench/memory-procs';
import { meetsBars, runFaultMatrix, type FaultResult, type FaultTarget } from '../../bench/fault-matrix';
import { PRODUCTION_DEADLINE, requireInfra, startTestApp, type TestApp } from '../support/harness';
import { startTcpProxy, type TcpProxy } from '../support/tcp-proxy';

// The short version of `npm run bench:faults` (docs/operations.md#faults-and-recovery): two app
// instances under a light mixed load while Postgres, Redis and Temporal are each "stopped" for
// 5 s (their proxy resets every connection and refuses new ones) and ClickHouse is unreachable
// for 5 s (its proxy stops answering). Every bar of the bench must hold.
jest.setTimeout(300_000);

const OUTAGE_MS = 5_000;

let proxies: Record<'postgres' | 'redis' | 'temporal' | 'clickhouse', TcpProxy>;
let shim: Child;
const apps: TestApp[] = [];

function hostPort(url: string): { host: string; port: number } {
  const u = new URL(url);
  return { host: u.hostname, port: Number(u.port) };
}

beforeAll(async () => {
  const infra = requireInfra();
  shim = startScript('clickhouse-shim', 'memory-clickhouse.ts', { ...process.env });
  const shimUrl = await new Promise<string>((resolve, reject) => {
    shim.proc.on('message', (m: { type?: string; url?: string }) => m?.type === 'ready' && m.url && resolve(m.url));
    shim.proc.once('exit', (code) => reject(shim.failure(`exited with ${code}`)));
  });
  const [temporalHost, temporalPort] = infra.temporalAddress.split(':');
  proxies = {
    postgres: await startTcpProxy(hostPort(infra.databaseUrl)),
    redis: await startTcpProxy(hostPort(infra.redisUrl)),
    temporal: await startTcpProxy({ host: temporalHost, port: Number(temporalPort) }),
    clickhouse: await startTcpProxy(hostPort(shimUrl)),
  };
  const env = {
    REDIS_URL: `redis://${proxies.redis.address}`,
    TEMPORAL_ADDRESS: proxies.temporal.address,
    CLICKHOUSE_URL: `http://${proxies.clickhouse.address}`,
    // The load is far over the default budgets; the rate limiter is not what is tested.
    RATE_LIMIT_PER_IP: '1000000',
    RATE_LIMIT_PER_TOKEN: '1000000',
    RATE_LIMIT_PER_SERVICE: '1000000',
    EVAL_EVENTS_FLUSH_MS: '500',
    ANALYTICS_FLUSH_MS: '500',
    // The 5 s answer bar rests on the production deadline.
    ...PRODUCTION_DEADLINE,
  };
  const first = await startTestApp(env, { databaseAddress: proxies.postgres.address });
  apps.push(first);
  apps.push(
    await startTestApp({
      ...env,
      DATABASE_URL: first.platform.config.DATABASE_URL!,
      REDIS_KEY_PREFIX: first.platform.config.REDIS_KEY_PREFIX,
      TEMPORAL_TASK_QUEUE: first.platform.config.TEMPORAL_TASK_QUEUE,
      CLICKHOUSE_DATABASE: first.platform.config.CLICKHOUSE_DATABASE,
    }),
  );
});

afterAll(async () => {
  for (const proxy of Object.values(proxies ?? {})) proxy.restore();
  for (const app of apps.reverse()) await app.stop();
  for (const proxy of Object.values(proxies ?? {})) await proxy.close();
  await shim?.stop();
});

it('evaluates throughout, answers every write within 5 s, loses nothing and recovers after each backend outage', async () => {
  const stopped = (name: 'postgres' | 'redis' | 'temporal'): FaultTarget => ({
    name,
    how: 'stopped (connections reset, new ones refused)',
    stop: async () => proxies[name].refuse(),
    start: async () => proxies[name].restore(),
  });
  const results: FaultResult[] = await runFaultMatrix({
    apps: apps.map((a) => ({ control: a.urls.control, data: a.urls.data, flagdSync: a.urls.flagdSync! })),
    faults: [
      stopped('postgres'),
      stopped('redis'),
      stopped('temporal'),
      { name: 'clickhouse', how: 'unreachable (no answer)', stop: async () => proxies.clickhouse.blackhole(), start: async () => proxies.clickhouse.restore() },
    ],
    outageMs: OUTAGE_MS,
    evaluationLoops: 1,
    writeLoops: 1,
    writePauseMs: 100,
    deliveryWaitMs: 30_000,
    log: (line) => process.env.BENCH_VERBOSE && console.log(line),
  });
  if (process.env.BENCH_VERBOSE) for (const app of apps) console.log(app.errorLog().filter((l) => l.includes('request failed')).slice(-4).join('\n'));
  for (const r of results) {
    expect({ fault: r.fault, result: r, meetsBars: meetsBars(r) }).toEqual({ fault: r.fault, result: r, meetsBars: true });
    expect(r.writes.acknowledged).toBeGreaterThan(0);
  }
});

import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { compileFlag, evaluate, type FlagDefinition } from '../../api/features/evaluation/engine/index';
import { freePort } from '../../api/infra/temporal';
import cases from '../evaluation/cases.json';
import { createFixture, createFlag, storeFlag, untilEvaluated, type DataPlaneFixture } from '../data-plane/support';
import { eventually, startTestApp, type TestApp } from '../support/harness';
import { APPROXIMATIONS, GO_DIFFERENCES } from './approximations';
import { flagdVariant, isTranslatable } from './providers';
import { boundToken } from './support';

/**
 * A real flagd as our relay (docs/local-evaluation.md#a-real-flagd-as-a-relay): its gRPC sync
 * source points at our FLAGD_SYNC_PORT with a bound token as selector; it serves our flags on its
 * own OFREP port, follows a change, and answers as our OFREP for every case of
 * test/evaluation/cases.json but the documented approximations and flagd's own differences
 * (./approximations.ts). flagd is built from its public source for the test only
 * (docs/data-plane.md#benchmarks says how) and named by FLAGD_BIN, else /tmp/peers/flagd-bin;
 * without the binary these tests are skipped, saying so.
 */

interface Case {
  name: string;
  flag: (FlagDefinition & { type: string }) | null;
  context: unknown;
}

const FLAGD_BIN = process.env.FLAGD_BIN ?? '/tmp/peers/flagd-bin';
const haveFlagd = existsSync(FLAGD_BIN);
const STORABLE_TYPES = new Set(['boolean', 'string', 'number', 'object']);
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * Each case's flag under a key of its own (cases reuse keys with other definitions, and one flagd
 * source holds one flag per key): both sides bucket by the same new key, so they still must agree.
 */
const relayed = (cases as unknown as Case[])
  .filter((c): c is Case & { flag: FlagDefinition } => c.flag !== null && STORABLE_TYPES.has(c.flag.type) && isObject(c.context))
  .map((c, i) => ({ ...c, flag: { ...c.flag, key: `relay-${i}-${c.flag.key}` } }));

let app: TestApp;
let fx: DataPlaneFixture;
let flagd: ChildProcess | undefined;
let flagdLog = '';
let ofrepPort: number;

const flagdOfrep = (key: string, context: unknown) =>
  fetch(`http://127.0.0.1:${ofrepPort}/ofrep/v1/evaluate/flags/${encodeURIComponent(key)}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ context }),
  });

beforeAll(async () => {
  if (!haveFlagd) return;
  app = await startTestApp({ RATE_LIMIT_PER_IP: '1000000', RATE_LIMIT_PER_TOKEN: '1000000', RATE_LIMIT_PER_SERVICE: '1000000' });
  fx = await createFixture(app);
  for (const c of relayed) await storeFlag(app, { projectId: fx.projectId, serviceId: fx.serviceId, environment: 'development' }, c.flag);
  const token = (await boundToken(fx)).value;
  const [rpc, sync, management] = [await freePort(), await freePort(), await freePort()];
  ofrepPort = await freePort();
  // The uri is host:port: the grpc:// prefix is understood by --uri only, not in --sources.
  const sources = JSON.stringify([{ uri: new URL(app.urls.flagdSync!).host, provider: 'grpc', selector: token }]);
  flagd = spawn(FLAGD_BIN, ['start', '-p', String(rpc), '-m', String(management), '-g', String(sync), '-r', String(ofrepPort), '-s', sources], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const keep = (chunk: Buffer) => (flagdLog = (flagdLog + chunk.toString()).slice(-4000));
  flagd.stdout!.on('data', keep);
  flagd.stderr!.on('data', keep);
  // Ready once the first document has arrived: a relayed flag is known.
  await eventually(async () => (await flagdOfrep(relayed[0].flag.key, relayed[0].context)).status !== 404, 30_000).catch((error: Error) => {
    throw new Error(`${error.message}\nflagd's log:\n${flagdLog}`);
  });
}, 120_000);
afterAll(async () => {
  if (flagd && flagd.exitCode === null) {
    const exited = new Promise((r) => flagd!.once('exit', r));
    flagd.kill('SIGTERM');
    await exited;
  }
  await app?.stop();
});

const relayIt = haveFlagd ? it : it.skip;
const title = (what: string) => (haveFlagd ? what : `${what} (skipped: no flagd binary at FLAGD_BIN or /tmp/peers/flagd-bin)`);

relayIt(title('serves our values over its OFREP port and follows a change'), async () => {
  const flag = await createFlag(fx.owner, fx.serviceId, { type: 'string', enabled: true, defaultValue: 'relayed' });
  await untilEvaluated(app, { flagKey: flag.key, serviceId: fx.serviceId }, (r) => r.value === 'relayed', { token: fx.readToken });
  const answer = async () => {
    const res = await flagdOfrep(flag.key, {});
    return res.status === 200 ? ((await res.json()) as { value: unknown; variant: string }) : undefined;
  };
  const first = await eventually(async () => ((await answer())?.value === 'relayed' ? answer() : undefined), 30_000);
  expect(first).toMatchObject({ value: 'relayed', variant: 'default' });
  expect((await fx.owner.request('PATCH', `/api/flags/${flag.key}?serviceId=${fx.serviceId}&environment=development`, { defaultValue: 'relayed-2' })).status).toBe(200);
  await eventually(async () => (await answer())?.value === 'relayed-2', 15_000);
});

relayIt(
  title('answers OFREP as we do for every case of the case file'),
  async () => {
    const mismatches: string[] = [];
    for (const c of relayed) {
      const ours = await app.request('POST', `/api/ofrep/v1/evaluate/flags/${encodeURIComponent(c.flag.key)}`, {
        listener: 'data',
        token: fx.readToken,
        headers: { 'x-service-id': fx.serviceId, 'x-environment': 'development' },
        body: { context: c.context },
      });
      const res = await flagdOfrep(c.flag.key, c.context);
      const theirs = (await res.json()) as { value?: unknown; variant?: string };
      const r = evaluate(compileFlag(c.flag), c.flag.key, c.context as never, undefined);
      const label = `${c.name}: flagd ${res.status} ${JSON.stringify(theirs)}, ours ${ours.status} ${ours.text}`;
      if (c.name in APPROXIMATIONS || c.name in GO_DIFFERENCES) continue;
      if (!isTranslatable(c.flag) || ours.status !== 200) {
        // Untranslatable flags, and our errors: flagd answers an error too, never a value.
        if (res.status === 200) mismatches.push(`${label}: want an error`);
      } else if (res.status !== 200 || JSON.stringify(theirs.value) !== JSON.stringify(ours.body.value) || theirs.variant !== flagdVariant(r)) {
        mismatches.push(`${label}: want value ${JSON.stringify(ours.body.value)}, variant ${flagdVariant(r)}`);
      }
    }
    expect(mismatches).toEqual([]);
    expect(relayed.length).toBeGreaterThan(300);
  },
  120_000,
);

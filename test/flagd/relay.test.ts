import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { compileFlag, evaluate, type FlagDefinition } from '../../api/features/evaluation/engine/index';
import { freePort } from '../../api/infra/temporal';
import cases from '../evaluation/cases.json';
import { createFixture, storeFlag, type DataPlaneFixture } from '../data-plane/support';
import { eventually, startTestApp, type TestApp } from '../support/harness';
import { flagdVariant, isTranslatable } from './providers';

/**
 * A real flagd as our relay (docs/local-evaluation.md#relay): its gRPC sync source points at our
 * FLAGD_SYNC_PORT with a bound token as selector, and its OFREP answers equal ours for every
 * translatable case of test/evaluation/cases.json. flagd is built from its public source for
 * the test only (docs/data-plane.md#benchmarks says how) and named by FLAGD_BIN; without it this
 * test is skipped, saying so.
 */

interface Case {
  name: string;
  flag: (FlagDefinition & { type: string }) | null;
  flagKey: string;
  context: unknown;
}

const FLAGD_BIN = process.env.FLAGD_BIN;
const haveFlagd = Boolean(FLAGD_BIN && existsSync(FLAGD_BIN));
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

beforeAll(async () => {
  if (!haveFlagd) return;
  app = await startTestApp({ RATE_LIMIT_PER_IP: '1000000', RATE_LIMIT_PER_TOKEN: '1000000', RATE_LIMIT_PER_SERVICE: '1000000' });
  fx = await createFixture(app);
  for (const c of relayed) await storeFlag(app, { projectId: fx.projectId, serviceId: fx.serviceId, environment: 'development' }, c.flag);
});
afterAll(async () => {
  if (flagd && flagd.exitCode === null) {
    const exited = new Promise((r) => flagd!.once('exit', r));
    flagd.kill('SIGTERM');
    await exited;
  }
  await app?.stop();
});

(haveFlagd ? it : it.skip)(
  haveFlagd ? 'a real flagd syncing from us answers OFREP as we do' : 'a real flagd syncing from us answers OFREP as we do (skipped: FLAGD_BIN names no flagd binary)',
  async () => {
    const bound = await fx.owner.request('POST', `/api/projects/${fx.projectId}/tokens`, {
      name: 'relay',
      permissions: { read: true },
      scope: { serviceId: fx.serviceId, environment: 'development' },
    });
    expect(bound.status).toBe(201);
    const [rpc, sync, ofrep, management] = [await freePort(), await freePort(), await freePort(), await freePort()];
    const source = { uri: `127.0.0.1:${new URL(app.urls.flagdSync!).port}`, provider: 'grpc', selector: bound.body.value };
    flagd = spawn(
      FLAGD_BIN!,
      ['start', '--sources', JSON.stringify([source]), '--port', String(rpc), '--sync-port', String(sync), '--ofrep-port', String(ofrep), '--management-port', String(management)],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    const keep = (chunk: Buffer) => (flagdLog = (flagdLog + chunk.toString()).slice(-4000));
    flagd.stdout!.on('data', keep);
    flagd.stderr!.on('data', keep);

    const flagdOfrep = (key: string, context: unknown) =>
      fetch(`http://127.0.0.1:${ofrep}/ofrep/v1/evaluate/flags/${encodeURIComponent(key)}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ context }),
      });
    // Ready once the first document has arrived: the first case's flag is known.
    await eventually(async () => {
      const res = await flagdOfrep(relayed[0].flag.key, relayed[0].context);
      return res.status !== 404;
    }, 30_000).catch(
      (error: Error) => {
        throw new Error(`${error.message}\nflagd's log:\n${flagdLog}`);
      },
    );

    const mismatches: string[] = [];
    let compared = 0;
    for (const c of relayed) {
      const ours = await app.request('POST', `/api/ofrep/v1/evaluate/flags/${encodeURIComponent(c.flag.key)}`, {
        listener: 'data',
        token: fx.readToken,
        headers: { 'x-service-id': fx.serviceId, 'x-environment': 'development' },
        body: { context: c.context },
      });
      const res = await flagdOfrep(c.flag.key, c.context);
      const theirs = (await res.json()) as { value?: unknown; variant?: string; errorCode?: string };
      const r = evaluate(compileFlag(c.flag), c.flag.key, c.context as never, undefined);
      const label = `${c.name}: flagd ${res.status} ${JSON.stringify(theirs)}, ours ${ours.status} ${ours.text}`;
      if (!isTranslatable(c.flag) || ours.status !== 200) {
        // Untranslatable flags, and our errors: flagd answers an error too, never a value.
        if (res.status === 200) mismatches.push(`${label}: want an error`);
      } else if (res.status !== 200 || JSON.stringify(theirs.value) !== JSON.stringify(ours.body.value) || theirs.variant !== flagdVariant(r)) {
        mismatches.push(`${label}: want value ${JSON.stringify(ours.body.value)}, variant ${flagdVariant(r)}`);
      }
      compared++;
    }
    expect(mismatches).toEqual([]);
    expect(compared).toBeGreaterThan(300);
  },
  120_000,
);

import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import { freePort } from '../../api/infra/temporal';
import { eventually, startTestApp, type TestApp } from '../support/harness';
import { createFixture, createFlag, untilEvaluated, type DataPlaneFixture } from '../data-plane/support';
import { boundToken } from './support';

// A real flagd as a relay (docs/local-evaluation.md#a-real-flagd-as-a-relay): its gRPC sync
// source points at FLAGD_SYNC_PORT with a bound token as selector, and it serves our flags on
// its own ports. The flagd binary is optional: FLAGD_BIN, else /tmp/peers/flagd-bin.

const FLAGD_BIN = process.env.FLAGD_BIN ?? '/tmp/peers/flagd-bin';
const maybe = fs.existsSync(FLAGD_BIN) ? describe : describe.skip;


maybe('a real flagd syncing from FLAGD_SYNC_PORT', () => {
  let app: TestApp;
  let fx: DataPlaneFixture;
  let flagd: ChildProcess | undefined;

  beforeAll(async () => {
    app = await startTestApp();
    fx = await createFixture(app);
  });
  afterAll(async () => {
    flagd?.kill();
    await app?.stop();
  });

  it('serves our values over its OFREP port and follows a change', async () => {
    const token = (await boundToken(fx)).value;
    const flag = await createFlag(fx.owner, fx.serviceId, { type: 'string', enabled: true, defaultValue: 'relayed' });
    await untilEvaluated(app, { flagKey: flag.key, serviceId: fx.serviceId }, (r) => r.value === 'relayed', { token: fx.readToken });
    const [port, management, sync, ofrep] = [await freePort(), await freePort(), await freePort(), await freePort()];
    const sources = JSON.stringify([{ uri: new URL(app.urls.flagdSync!).host, provider: 'grpc', selector: token }]);
    flagd = spawn(FLAGD_BIN, ['start', '-p', String(port), '-m', String(management), '-g', String(sync), '-r', String(ofrep), '-s', sources], { stdio: 'ignore' });
    const evaluate = async () => {
      const res = await fetch(`http://127.0.0.1:${ofrep}/ofrep/v1/evaluate/flags/${flag.key}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"context":{}}' });
      return res.status === 200 ? ((await res.json()) as { value: unknown; variant: string }) : undefined;
    };
    const first = await eventually(async () => ((await evaluate())?.value === 'relayed' ? evaluate() : undefined), 30_000);
    expect(first).toMatchObject({ value: 'relayed', variant: 'default' });
    expect((await fx.owner.request('PATCH', `/api/flags/${flag.key}?serviceId=${fx.serviceId}&environment=development`, { defaultValue: 'relayed-2' })).status).toBe(200);
    await eventually(async () => (await evaluate())?.value === 'relayed-2', 15_000);
  });
});

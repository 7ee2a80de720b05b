import net from 'node:net';
import { FlagdProvider } from '@openfeature/flagd-provider';
import { OpenFeature } from '@openfeature/server-sdk';
import { eventually, startTestApp, type TestApp } from '../support/harness';
import { createFixture, createFlag, untilEvaluated, type DataPlaneFixture } from '../data-plane/support';
import { boundToken } from './support';

// An in-process provider keeps serving its last flag set while the data plane is down, and
// resumes the sync stream when it returns (docs/local-evaluation.md).

async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

let first: TestApp | undefined;
let second: TestApp | undefined;
let fx: DataPlaneFixture;

afterAll(async () => {
  await OpenFeature.close();
  await first?.stop({ keepDatabase: true });
  await second?.stop();
});

it('serves the last flag set while the data plane is down, then follows changes again', async () => {
  const syncPort = String(await freePort());
  const app = await startTestApp({ FLAGD_SYNC_PORT: syncPort });
  first = app;
  fx = await createFixture(app);
  const token = (await boundToken(fx)).value;
  const flag = await createFlag(fx.owner, fx.serviceId, { type: 'string', enabled: true, defaultValue: 'before' });
  await untilEvaluated(app, { flagKey: flag.key, serviceId: fx.serviceId }, (r) => r.value === 'before', { token: fx.readToken });

  const provider = new FlagdProvider({ host: '127.0.0.1', port: Number(syncPort), resolverType: 'in-process', selector: token, retryBackoffMaxMs: 1000 });
  await OpenFeature.setProviderAndWait('restart', provider);
  const client = OpenFeature.getClient('restart');
  await eventually(async () => (await client.getStringValue(flag.key, 'fallback')) === 'before');

  first = undefined;
  await app.stop({ keepDatabase: true });
  expect(await client.getStringValue(flag.key, 'fallback')).toBe('before');

  second = await startTestApp({ DATABASE_URL: app.databaseUrl, FLAGD_SYNC_PORT: syncPort });
  // The project token lives in Postgres, which the new process shares.
  const change = await second.request('PATCH', `/api/flags/${flag.key}?serviceId=${fx.serviceId}&environment=development`, { token: fx.writeOnlyToken, body: { defaultValue: 'after' } });
  expect(change.status).toBe(200);
  await eventually(async () => (await client.getStringValue(flag.key, 'fallback')) === 'after', 30_000);
}, 90_000);

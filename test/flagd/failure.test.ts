import { OpenFeature } from '@openfeature/server-sdk';
import { freePort } from '../../api/infra/temporal';
import { createFixture, createFlag, type DataPlaneFixture } from '../data-plane/support';
import { eventually, startTestApp, type TestApp } from '../support/harness';
import { connectJsProvider, type ConnectedProvider } from './providers';

/**
 * An in-process provider outlives our data plane (docs/local-evaluation.md): the control plane
 * and the data plane run as separate platforms sharing the backends, as in production; the data
 * plane is stopped under a connected JS provider, which keeps serving its last flag set, and
 * started again on the same ports, where the provider's stream resumes.
 */

let control: TestApp;
let dataPlane: TestApp | undefined;
let fx: DataPlaneFixture;
let provider: ConnectedProvider | undefined;
let ports: { FLAGD_PORT: string; FLAGD_SYNC_PORT: string };

function startDataPlane() {
  return startTestApp({
    ROLES: 'data',
    DATABASE_URL: control.databaseUrl,
    REDIS_KEY_PREFIX: control.platform.config.REDIS_KEY_PREFIX,
    TEMPORAL_TASK_QUEUE: control.platform.config.TEMPORAL_TASK_QUEUE,
    ...ports,
  });
}

beforeAll(async () => {
  control = await startTestApp({ ROLES: 'control,worker' });
  fx = await createFixture(control);
  ports = { FLAGD_PORT: String(await freePort()), FLAGD_SYNC_PORT: String(await freePort()) };
  dataPlane = await startDataPlane();
});
afterAll(async () => {
  await provider?.close();
  await OpenFeature.clearProviders();
  await dataPlane?.stop({ keepDatabase: true });
  await control?.stop();
});

it('keeps serving the last flag set while the data plane is down, and follows changes once it is back', async () => {
  const flag = await createFlag(fx.owner, fx.serviceId, { type: 'string', enabled: true, defaultValue: 'first', environment: 'production' });
  const bound = await fx.owner.request('POST', `/api/projects/${fx.projectId}/tokens`, {
    name: 'in-process',
    permissions: { read: true },
    scope: { serviceId: fx.serviceId, environment: 'production' },
  });
  expect(bound.status).toBe(201);
  provider = await connectJsProvider('in-process', Number(ports.FLAGD_SYNC_PORT), bound.body.value, { retryBackoffMaxMs: 200 });
  const { client } = provider;
  const served = () => client.getStringValue(flag.key, 'caller-default');
  await eventually(async () => (await served()) === 'first');

  await dataPlane!.stop({ keepDatabase: true });
  dataPlane = undefined;
  // Nothing answers on the sync port now.
  await expect(fetch(`http://127.0.0.1:${ports.FLAGD_SYNC_PORT}/`)).rejects.toThrow();
  const patch = (defaultValue: string) => fx.owner.request('PATCH', `/api/flags/${flag.key}?serviceId=${fx.serviceId}&environment=production`, { defaultValue });
  expect((await patch('changed while down')).status).toBe(200);
  // Long enough for the provider to have tried and failed to reconnect several times.
  await new Promise((r) => setTimeout(r, 1_500));
  for (let i = 0; i < 20; i++) expect(await served()).toBe('first');

  dataPlane = await startDataPlane();
  // The new stream's first document holds the change made while the data plane was down.
  await eventually(async () => (await served()) === 'changed while down', 30_000);
  // And the stream is live: a later change arrives too.
  expect((await patch('after the restart')).status).toBe(200);
  await eventually(async () => (await served()) === 'after the restart', 15_000);
});

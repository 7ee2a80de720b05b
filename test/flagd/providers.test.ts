import { FlagdProvider } from '@openfeature/flagd-provider';
import { ErrorCode, OpenFeature, ProviderEvents, type Client } from '@openfeature/server-sdk';
import { eventually, startTestApp, type TestApp } from '../support/harness';
import { createFixture, createFlag, untilEvaluated, type DataPlaneFixture } from '../data-plane/support';
import { boundToken } from './support';

// The published OpenFeature flagd provider for Node (@openfeature/flagd-provider), configured
// only by host, port and selector (docs/local-evaluation.md#node), in RPC mode against
// FLAGD_PORT and in in-process mode against FLAGD_SYNC_PORT.

let app: TestApp;
let fx: DataPlaneFixture;
let token: string;

const portOf = (url: string) => Number(new URL(url).port);
const patch = (key: string, body: Record<string, unknown>) => fx.owner.request('PATCH', `/api/flags/${key}?serviceId=${fx.serviceId}&environment=development`, body);

beforeAll(async () => {
  app = await startTestApp();
  fx = await createFixture(app);
  token = (await boundToken(fx)).value;
});
afterAll(async () => {
  await OpenFeature.close();
  await app?.stop();
});

describe.each([
  ['rpc', () => portOf(app.urls.flagd!)],
  ['in-process', () => portOf(app.urls.flagdSync!)],
] as const)('the JS flagd provider in %s mode', (resolverType, port) => {
  let client: Client;
  const changed: string[][] = [];

  beforeAll(async () => {
    const provider = new FlagdProvider({ host: '127.0.0.1', port: port(), resolverType, selector: token, tls: false });
    await OpenFeature.setProviderAndWait(resolverType, provider);
    client = OpenFeature.getClient(resolverType);
    client.addHandler(ProviderEvents.ConfigurationChanged, (details) => {
      changed.push(details?.flagsChanged ?? []);
    });
  });

  it('gets our values, variants and reasons, and sees a change', async () => {
    const flag = await createFlag(fx.owner, fx.serviceId, { type: 'string', enabled: true, defaultValue: `first-${resolverType}` });
    await untilEvaluated(app, { flagKey: flag.key, serviceId: fx.serviceId }, (r) => r.value === `first-${resolverType}`, { token: fx.readToken });
    const details = await eventually(async () => {
      const d = await client.getStringDetails(flag.key, 'fallback');
      return d.value === `first-${resolverType}` ? d : undefined;
    });
    expect(details).toMatchObject({ variant: 'default', reason: 'STATIC' });

    expect((await patch(flag.key, { defaultValue: `second-${resolverType}` })).status).toBe(200);
    await eventually(async () => (await client.getStringValue(flag.key, 'fallback')) === `second-${resolverType}`);
    await eventually(async () => changed.some((keys) => keys.includes(flag.key)));
  });

  it('answers the caller default with FLAG_NOT_FOUND for a flag outside the set', async () => {
    const details = await client.getBooleanDetails('no-such-flag', true);
    expect(details).toMatchObject({ value: true, errorCode: ErrorCode.FLAG_NOT_FOUND });
  });

  it('serves a disabled flag as our disabled value', async () => {
    const flag = await createFlag(fx.owner, fx.serviceId, { type: 'number', enabled: false, defaultValue: 7 });
    const details = await eventually(async () => {
      const d = await client.getNumberDetails(flag.key, -1);
      return d.value === 7 ? d : undefined;
    });
    expect(details.variant).toBe('disabled');
  });
});

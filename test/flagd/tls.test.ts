import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createClient } from '@connectrpc/connect';
import { createConnectTransport, createGrpcTransport } from '@connectrpc/connect-node';
import { FlagdProvider } from '@openfeature/flagd-provider';
import { OpenFeature } from '@openfeature/server-sdk';
import { Service as EvaluationV1 } from '../../api/gen/flagd/evaluation/v1/evaluation_pb';
import { FlagSyncService } from '../../api/gen/flagd/sync/v1/sync_pb';
import { eventually, startTestApp, type TestApp } from '../support/harness';
import { createFixture, createFlag, untilEvaluated, type DataPlaneFixture } from '../data-plane/support';
import { boundToken, pingOnce, selector } from './support';

// FLAGD_TLS_CERT / FLAGD_TLS_KEY (docs/local-evaluation.md#ports): both flagd ports speak TLS,
// HTTP/2 or HTTP/1.1 by ALPN; and HTTP/2 keepalive pings are answered.

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'flagd-tls-'));
const certPath = path.join(dir, 'cert.pem');
const keyPath = path.join(dir, 'key.pem');
execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', keyPath, '-out', certPath, '-days', '1', '-subj', '/CN=localhost', '-addext', 'subjectAltName=IP:127.0.0.1,DNS:localhost'], { stdio: 'ignore' });
const ca = fs.readFileSync(certPath, 'utf8');

let app: TestApp;
let fx: DataPlaneFixture;
let token: string;
let flagKey: string;

beforeAll(async () => {
  app = await startTestApp({ FLAGD_TLS_CERT: certPath, FLAGD_TLS_KEY: keyPath });
  fx = await createFixture(app);
  token = (await boundToken(fx)).value;
  flagKey = (await createFlag(fx.owner, fx.serviceId, { type: 'string', enabled: true, defaultValue: 'secure' })).key;
  await untilEvaluated(app, { flagKey, serviceId: fx.serviceId }, (r) => r.value === 'secure', { token: fx.readToken });
});
afterAll(async () => {
  await OpenFeature.close();
  await app?.stop();
  fs.rmSync(dir, { recursive: true, force: true });
});

it('serves gRPC and Connect (HTTP/1.1 and HTTP/2) over TLS', async () => {
  expect(app.urls.flagd).toMatch(/^https:/);
  const transports = [
    createGrpcTransport({ baseUrl: app.urls.flagd!, nodeOptions: { ca } }),
    createConnectTransport({ baseUrl: app.urls.flagd!, httpVersion: '1.1', nodeOptions: { ca } }),
    createConnectTransport({ baseUrl: app.urls.flagd!, httpVersion: '2', nodeOptions: { ca } }),
  ];
  for (const transport of transports) {
    const answer = await createClient(EvaluationV1, transport).resolveString({ flagKey }, selector(token));
    expect(answer).toMatchObject({ value: 'secure', variant: 'default' });
  }
  const document = await createClient(FlagSyncService, createGrpcTransport({ baseUrl: app.urls.flagdSync!, nodeOptions: { ca } })).fetchAllFlags({ selector: token });
  expect(JSON.parse(document.flagConfiguration).flags[flagKey]).toBeDefined();
});

it('lets the JS provider sync in-process over TLS', async () => {
  const provider = new FlagdProvider({ host: '127.0.0.1', port: Number(new URL(app.urls.flagdSync!).port), resolverType: 'in-process', tls: true, certPath, selector: token });
  await OpenFeature.setProviderAndWait('tls', provider);
  await eventually(async () => (await OpenFeature.getClient('tls').getStringValue(flagKey, 'fallback')) === 'secure');
});

it('answers HTTP/2 keepalive pings', async () => {
  expect(await pingOnce(app.urls.flagdSync!, { ca, servername: 'localhost' })).toBeGreaterThanOrEqual(0);
});

import { randomBytes } from 'node:crypto';
import { startWorker, type WorkerHandle } from '../../activities/worker';
import { eventually, startTestApp, type TestApp } from '../support/harness';
import { createFlag, createProject, createWebhook, expectStatus, qs, startReceiver, uniquePath, type Receiver } from '../webhooks/support';

/**
 * Why delivery runs on Temporal: the backoff is a durable timer. A worker stopped during the
 * backoff leaves the delivery waiting in Temporal; a new worker (another process in production)
 * makes the next attempt.
 */

let app: TestApp;
let receiver: Receiver;
const workers: WorkerHandle[] = [];

beforeAll(async () => {
  // No in-process worker: this test starts and stops its own.
  app = await startTestApp({ ROLES: 'control,data,ingest' });
  receiver = await startReceiver();
});
afterAll(async () => {
  for (const w of workers) await w.stop().catch(() => undefined);
  await receiver?.close();
  await app?.stop();
});

function newWorker(): Promise<WorkerHandle> {
  const { platform } = app;
  return startWorker({
    address: platform.temporal.address,
    namespace: platform.temporal.namespace,
    taskQueue: platform.temporal.taskQueue,
    bundlePath: platform.config.WORKFLOW_BUNDLE_PATH,
    deps: { sql: platform.db.sql, smtpUrl: undefined, from: platform.config.MAIL_FROM, outbound: platform.outbound },
    logger: platform.logger,
  });
}

it('completes a delivery when the worker is replaced during the backoff', async () => {
  const p = await createProject(app);
  const path = uniquePath('restart');
  const webhook = await createWebhook(p.owner, { projectId: p.projectId, url: receiver.url(path), events: ['flag.toggled'] });
  receiver.expectSecret(path, webhook.secret);
  receiver.behave(path, (n) => ({ status: n === 1 ? 503 : 200 }));

  const first = await newWorker();
  workers.push(first);
  const key = `restart-${randomBytes(3).toString('hex')}`;
  await createFlag(p.owner, p.serviceId, key);
  expectStatus(await p.owner.request('POST', `/api/flags/${key}/toggle${qs({ serviceId: p.serviceId, environment: 'production' })}`), 200, 'toggle');

  // Stop the only worker right after the first (failed) attempt, inside the 1 s backoff.
  await eventually(async () => receiver.received(path).length === 1, 20_000, 10);
  await first.stop();

  // The timer fires with no worker running: nothing is attempted.
  await new Promise((r) => setTimeout(r, 3000));
  expect(receiver.received(path)).toHaveLength(1);

  workers.push(await newWorker());
  await eventually(async () => receiver.received(path).length === 2, 45_000);
  const log = await eventually(async () => {
    const res = await p.owner.request('GET', `/api/webhooks/${webhook.id}/deliveries`);
    const d = res.body.deliveries?.[0];
    return d?.status === 'delivered' ? d : undefined;
  }, 30_000);
  expect(log.attempts.map((a: { outcome: string; statusCode: number }) => [a.outcome, a.statusCode])).toEqual([
    ['retry', 503],
    ['delivered', 200],
  ]);
  const got = receiver.received(path);
  expect(got[0].headers['webhook-id']).toBe(got[1].headers['webhook-id']);
  expect(got.every((d) => d.svcSignatureValid && d.standardSignatureValid)).toBe(true);
});

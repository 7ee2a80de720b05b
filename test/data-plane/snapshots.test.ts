import { FLAG_CHANGES_CHANNEL, type FlagChangeEvent } from '../../api/features/flags/types';
import { startTestApp, type TestApp } from '../support/harness';
import { createFixture, createFlag, untilEvaluated, type DataPlaneFixture } from './support';

let app: TestApp;
let fx: DataPlaneFixture;

beforeAll(async () => {
  // No periodic reconcile: the test drives it.
  app = await startTestApp({ EVAL_SNAPSHOT_RECONCILE_MS: '0' });
  fx = await createFixture(app);
});
afterAll(() => app?.stop());

const evaluate = (flagKey: string, defaultValue: unknown = 'missing') =>
  app.request('POST', '/api/flags/evaluate', { listener: 'data', token: fx.readToken, body: { flagKey, serviceId: fx.serviceId, defaultValue } });

describe('evaluation snapshots', () => {
  it('repairs changes that never reached the bus when reconciling with Postgres', async () => {
    const flag = await createFlag(fx.owner, fx.serviceId, { enabled: true, defaultValue: true });
    await untilEvaluated(app, { flagKey: flag.key, serviceId: fx.serviceId }, (r) => r.value === true, { token: fx.readToken });
    const snapshots = app.platform.evaluation!.snapshots;
    const sql = app.platform.db.sql;
    // Written behind the bus's back: an update, a new flag and a deletion.
    await sql`UPDATE flags SET default_value = 'false'::jsonb, version = version + 1 WHERE id = ${flag.id}`;
    await sql`
      INSERT INTO flags (id, project_id, service_id, environment, key, name, type, enabled, default_value)
      VALUES ('flg_snapshot_test', ${fx.projectId}, ${fx.serviceId}, 'development', 'silent-flag', 'silent-flag', 'string', true, '"quiet"'::jsonb)`;
    const gone = await createFlag(fx.owner, fx.serviceId, { enabled: true, defaultValue: true });
    await untilEvaluated(app, { flagKey: gone.key, serviceId: fx.serviceId }, (r) => r.value === true, { token: fx.readToken });
    await sql`DELETE FROM flags WHERE id = ${gone.id}`;
    expect((await evaluate(flag.key)).body.value).toBe(true);
    expect((await evaluate('silent-flag')).body.errorCode).toBe('FLAG_NOT_FOUND');
    expect((await evaluate(gone.key)).body.value).toBe(true);

    await snapshots.reconcile();
    expect((await evaluate(flag.key)).body.value).toBe(false);
    expect((await evaluate('silent-flag')).body).toMatchObject({ value: 'quiet', reason: 'DEFAULT' });
    expect((await evaluate(gone.key)).body.errorCode).toBe('FLAG_NOT_FOUND');
    expect(snapshots.snapshotStats().lastReconcileAt).not.toBeNull();
  });

  it('keeps what the bus delivers while a reconcile pass is reading Postgres', async () => {
    const snapshots = app.platform.evaluation!.snapshots;
    const store = (snapshots as unknown as { deps: { store: { flagStamps: (db: unknown) => Promise<unknown[]> } } }).deps.store;
    const original = store.flagStamps;
    const existing = await createFlag(fx.owner, fx.serviceId, { type: 'string', enabled: true, defaultValue: 'before' });
    await untilEvaluated(app, { flagKey: existing.key, serviceId: fx.serviceId }, (r) => r.value === 'before', { token: fx.readToken });
    let created: { key: string } | undefined;
    // The pass has read its stamps; then a flag is created and another changed, and both reach
    // this replica over the bus before the pass goes on.
    store.flagStamps = async function (this: unknown, db: unknown) {
      const stamps = await original.call(this, db);
      created = await createFlag(fx.owner, fx.serviceId, { enabled: true, defaultValue: true });
      await untilEvaluated(app, { flagKey: created.key, serviceId: fx.serviceId }, (r) => r.value === true, { token: fx.readToken });
      const patched = await fx.owner.request('PATCH', `/api/flags/${existing.key}?serviceId=${fx.serviceId}&environment=development`, { defaultValue: 'after' });
      expect(patched.status).toBe(200);
      await untilEvaluated(app, { flagKey: existing.key, serviceId: fx.serviceId }, (r) => r.value === 'after', { token: fx.readToken });
      return stamps;
    };
    try {
      await snapshots.reconcile();
    } finally {
      store.flagStamps = original;
    }
    expect((await evaluate(created!.key)).body).toMatchObject({ value: true });
    expect((await evaluate(existing.key)).body).toMatchObject({ value: 'after' });
    // The next pass sees them in Postgres and keeps them too.
    await snapshots.reconcile();
    expect((await evaluate(created!.key)).body).toMatchObject({ value: true });
    expect((await evaluate(existing.key)).body).toMatchObject({ value: 'after' });
  });

  it('ignores malformed messages, duplicates and events older than what it holds', async () => {
    const flag = await createFlag(fx.owner, fx.serviceId, { type: 'string', enabled: true, defaultValue: 'v1' });
    await untilEvaluated(app, { flagKey: flag.key, serviceId: fx.serviceId }, (r) => r.value === 'v1', { token: fx.readToken });
    const patched = await fx.owner.request('PATCH', `/api/flags/${flag.key}?serviceId=${fx.serviceId}&environment=development`, { defaultValue: 'v2' });
    expect(patched.status).toBe(200);
    await untilEvaluated(app, { flagKey: flag.key, serviceId: fx.serviceId }, (r) => r.value === 'v2', { token: fx.readToken });
    const before = app.platform.evaluation!.snapshots.snapshotStats();

    const stale: FlagChangeEvent = {
      id: 'evt_stale_test',
      event: 'flag.updated',
      timestamp: new Date().toISOString(),
      data: { flagKey: flag.key, projectId: fx.projectId, serviceId: fx.serviceId, environment: 'development', changes: {} },
      flag: { ...(flag as never as FlagChangeEvent['flag'] & object), defaultValue: 'v0', version: 1 },
      actor: 'test',
      actorUserId: null,
    };
    await app.platform.cache.publish(FLAG_CHANGES_CHANNEL, 'not json');
    await app.platform.cache.publish(FLAG_CHANGES_CHANNEL, JSON.stringify({ hello: 'world' }));
    await app.platform.cache.publish(FLAG_CHANGES_CHANNEL, JSON.stringify(stale));
    await app.platform.cache.publish(FLAG_CHANGES_CHANNEL, JSON.stringify(stale));
    await new Promise((r) => setTimeout(r, 300));
    expect((await evaluate(flag.key)).body.value).toBe('v2');
    const after = app.platform.evaluation!.snapshots.snapshotStats();
    expect(after.eventsIgnored - before.eventsIgnored).toBe(2);
    expect(after.eventsApplied).toBe(before.eventsApplied);
  });
});

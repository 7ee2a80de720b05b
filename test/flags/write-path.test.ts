import type { AuditActor, AuditEntry, AuditLog } from '../../api/features/audit/writer';
import { ChangeGate } from '../../api/features/change-requests/gate';
import { CohortStore } from '../../api/features/cohorts/store';
import { FlagService } from '../../api/features/flags/service';
import { FlagStore } from '../../api/features/flags/store';
import type { FlagChangeEvent } from '../../api/features/flags/types';
import type { FlagEventOutbox } from '../../api/lib/outbox/store';
import type { TransactionSql } from '../../api/infra/postgres';
import { startTestApp, type TestApp } from '../support/harness';
import { createProjectFixture, type ProjectFixture } from './fixtures';

/**
 * FlagService with its audit log and outbox replaced by recording fakes (the seams the service
 * takes in its constructor), on the real Postgres: one write call per change, whatever the number
 * of flags, and nothing committed when a part of the change fails.
 */

class RecordingAudit implements AuditLog {
  calls: AuditEntry[][] = [];
  async writeMany(_tx: TransactionSql, _actor: AuditActor, entries: AuditEntry[]): Promise<string[]> {
    this.calls.push(entries);
    return entries.map((_, i) => `aud_fake_${i}`);
  }
}

class RecordingOutbox implements FlagEventOutbox {
  calls: FlagChangeEvent[][] = [];
  failing = false;
  async enqueue(_tx: TransactionSql, events: FlagChangeEvent[]): Promise<void> {
    if (this.failing) throw new Error('outbox unavailable');
    this.calls.push(events);
  }
}

let app: TestApp;
let fx: ProjectFixture;
let audit: RecordingAudit;
let outbox: RecordingOutbox;
let flags: FlagService;
const actor: AuditActor = { name: 'write-path test', userId: null };

beforeAll(async () => {
  app = await startTestApp();
  fx = await createProjectFixture(app, 'Write path');
});
afterAll(() => app?.stop());
beforeEach(() => {
  audit = new RecordingAudit();
  outbox = new RecordingOutbox();
  flags = new FlagService({ sql: app.platform.db.sql, store: new FlagStore(), audit, outbox, cohorts: new CohortStore(), gate: new ChangeGate({ sql: app.platform.db.sql, logger: app.platform.logger }) });
});

let counter = 0;
const uniqueKey = (name: string) => `${name}-${++counter}-${Date.now().toString(36)}`;

async function versionsOf(key: string) {
  return app.platform.db.sql<{ environment: string; version: number; change_type: string }[]>`
    SELECT environment, version, change_type FROM flag_versions WHERE flag_key = ${key} ORDER BY environment, version`;
}

describe('the flag write path', () => {
  it('creates a flag in every environment as one write: one call each for audit entries and events, in environment order', async () => {
    const key = uniqueKey('all-envs');
    const created = await flags.create(actor, { key, serviceId: fx.serviceId, enabled: true });
    expect(created.map((f) => [f.environment, f.enabled, f.version])).toEqual([
      ['development', true, 1],
      ['staging', false, 1],
      ['production', false, 1],
    ]);
    expect(audit.calls).toHaveLength(1);
    expect(audit.calls[0].map((e) => [e.action, e.before, (e.after as { environment: string }).environment])).toEqual([
      ['flag.create', null, 'development'],
      ['flag.create', null, 'staging'],
      ['flag.create', null, 'production'],
    ]);
    expect(outbox.calls).toHaveLength(1);
    expect(outbox.calls[0].map((e) => [e.event, e.data.environment, e.flag?.id])).toEqual(created.map((f) => ['flag.created', f.environment, f.id]));
    expect(await versionsOf(key)).toHaveLength(3);
  });

  it('writes a batch toggle with one call each, in key order, skipping flags already in the wanted state', async () => {
    const [a, b, c] = ['a', 'b', 'c'].map((name) => `${uniqueKey('batch')}-${name}`);
    for (const key of [c, a, b]) await flags.create(actor, { key, serviceId: fx.serviceId, environment: 'staging' });
    audit.calls = [];
    outbox.calls = [];

    const result = await flags.setEnabledMany(actor, { serviceId: fx.serviceId, environment: 'staging' }, [
      { key: c, enabled: true },
      { key: a, enabled: true },
      { key: b, enabled: false },
      { key: 'no-such-flag', enabled: true },
    ]);
    expect([...result.keys()].sort()).toEqual([a, b, c]);
    expect([result.get(a)!.version, result.get(b)!.version, result.get(c)!.version]).toEqual([2, 1, 2]);
    expect(audit.calls).toHaveLength(1);
    expect(audit.calls[0].map((e) => [e.action, e.resourceName, (e.before as { enabled: boolean }).enabled, (e.after as { enabled: boolean }).enabled])).toEqual([
      ['flag.toggle', a, false, true],
      ['flag.toggle', c, false, true],
    ]);
    expect(outbox.calls).toHaveLength(1);
    expect(outbox.calls[0].map((e) => [e.event, e.data.flagKey, e.data.changes])).toEqual([
      ['flag.toggled', a, { enabled: { from: false, to: true } }],
      ['flag.toggled', c, { enabled: { from: false, to: true } }],
    ]);
    expect(await versionsOf(a)).toEqual([
      { environment: 'staging', version: 1, change_type: 'create' },
      { environment: 'staging', version: 2, change_type: 'toggle' },
    ]);
    expect(await versionsOf(b)).toHaveLength(1);
  });

  it('commits nothing when a part of the change fails (here the outbox)', async () => {
    const key = uniqueKey('rollback');
    const [flag] = await flags.create(actor, { key, serviceId: fx.serviceId, environment: 'development' });
    outbox.failing = true;
    await expect(flags.toggle(actor, { key, serviceId: fx.serviceId, environment: 'development' })).rejects.toThrow('outbox unavailable');
    await expect(flags.setEnabledMany(actor, { serviceId: fx.serviceId, environment: 'development' }, [{ key, enabled: true }])).rejects.toThrow(
      'outbox unavailable',
    );
    expect(await flags.get({ key, serviceId: fx.serviceId, environment: 'development' })).toEqual(flag);
    expect(await versionsOf(key)).toEqual([{ environment: 'development', version: 1, change_type: 'create' }]);
  });

  it('refuses a stale version with 409 before writing anything', async () => {
    const key = uniqueKey('stale');
    const ref = { key, serviceId: fx.serviceId, environment: 'development' as const };
    await flags.create(actor, { ...ref });
    audit.calls = [];
    outbox.calls = [];
    await expect(flags.update(actor, ref, { name: 'renamed' }, 7)).rejects.toMatchObject({ status: 409, extra: { currentVersion: 1 } });
    await expect(flags.remove(actor, ref, 2)).rejects.toMatchObject({ status: 409 });
    // A rollback decided about version 3 (auto-rollback's judgement) does not roll over version 1.
    await expect(flags.rollback(actor, ref, 1, { expectedVersion: 3 })).rejects.toMatchObject({ status: 409, extra: { currentVersion: 1 } });
    expect(audit.calls).toEqual([]);
    expect(outbox.calls).toEqual([]);
    expect((await flags.get(ref))!.version).toBe(1);
  });

  it('deletes as one write: the snapshot keeps the last content, the event carries no flag', async () => {
    const key = uniqueKey('delete');
    const ref = { key, serviceId: fx.serviceId, environment: 'production' as const };
    const [flag] = await flags.create(actor, { ...ref, name: 'Doomed' });
    audit.calls = [];
    outbox.calls = [];
    await flags.remove(actor, ref, 1);
    expect(audit.calls).toEqual([[expect.objectContaining({ action: 'flag.delete', before: flag, after: null, metadata: expect.objectContaining({ version: 2 }) })]]);
    expect(outbox.calls).toEqual([[expect.objectContaining({ event: 'flag.deleted', flag: null })]]);
    const [snapshot] = await app.platform.db.sql<{ version: number; snapshot: { name: string; version: number } }[]>`
      SELECT version, snapshot FROM flag_versions WHERE flag_id = ${flag.id} AND change_type = 'delete'`;
    expect(snapshot).toMatchObject({ version: 2, snapshot: { name: 'Doomed', version: 1 } });
    expect(await flags.get(ref)).toBeNull();
  });
});

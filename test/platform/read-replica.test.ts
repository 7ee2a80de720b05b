/**
 * Reads through a Postgres streaming replica (DATABASE_READ_URL, docs/operations.md#read-replica),
 * against the real replica scripts/test-infra.sh runs. Replay is paused on the replica to make it
 * visibly behind: a caller who did not write reads the replica's older state, the writer reads
 * their own write, and a replica that stops answering costs no read.
 */
import postgres from 'postgres';
import { eventually, startTestApp, type TestApp } from '../support/harness';
import { createFlag, createProject, opaqueToken, type Project } from '../webhooks/support';

let app: TestApp;
let fx: Project;
let readToken: string;
let replica: postgres.Sql;

beforeAll(async () => {
  app = await startTestApp({}, { readReplica: true });
  fx = await createProject(app);
  readToken = await opaqueToken(fx.owner, fx.projectId, { read: true });
  replica = postgres(process.env.TEST_DATABASE_REPLICA_URL!, { max: 1, onnotice: () => undefined });
}, 60_000);

afterAll(async () => {
  if (replica) {
    await replica`SELECT pg_wal_replay_resume()`.catch(() => undefined);
    await replica.end();
  }
  await app?.stop();
});

/** Holds the replica at its current position while `body` runs (replay is shared by every test database). */
async function withReplicaPaused(body: () => Promise<void>): Promise<void> {
  await replica`SELECT pg_wal_replay_pause()`;
  try {
    await eventually(async () => (await replica<{ state: string }[]>`SELECT pg_get_wal_replay_pause_state() AS state`)[0]!.state === 'paused', 15_000);
    await body();
  } finally {
    await replica`SELECT pg_wal_replay_resume()`;
  }
}

const keys = (res: { body: { flags: { key: string }[] } }) => res.body.flags.map((f) => f.key);

describe('reads through the replica', () => {
  it('serve flag lists, history, audit search and export from the replica, while each writer reads their own writes', async () => {
    await createFlag(fx.owner, fx.serviceId, 'before-pause');
    await eventually(async () => keys(await app.request('GET', `/api/flags?projectId=${fx.projectId}`, { token: readToken })).includes('before-pause'));

    await withReplicaPaused(async () => {
      await createFlag(fx.owner, fx.serviceId, 'while-paused');
      // The writer: their next reads wait for the replica or go to the primary.
      expect(keys(await fx.owner.request('GET', `/api/flags?projectId=${fx.projectId}`))).toContain('while-paused');
      const history = await fx.owner.request('GET', `/api/flags/while-paused/history?serviceId=${fx.serviceId}&environment=production`);
      expect(history.status).toBe(200);
      expect(history.body.versions).toHaveLength(1);
      const ownAudit = await fx.owner.request('GET', `/api/audit?projectId=${fx.projectId}&resourceType=flag`);
      expect(ownAudit.body.logs.map((l: { resourceName: string }) => l.resourceName)).toContain('while-paused');
      const ownExport = await fx.owner.request('GET', `/api/flags/export?projectId=${fx.projectId}`);
      expect(ownExport.body.flags.map((f: { key: string }) => f.key)).toContain('while-paused');

      // A caller who wrote nothing reads the replica, which has not replayed the write yet.
      expect(keys(await app.request('GET', `/api/flags?projectId=${fx.projectId}`, { token: readToken }))).toEqual(['before-pause']);
      expect((await app.request('GET', `/api/flags/while-paused/history?serviceId=${fx.serviceId}&environment=production`, { token: readToken })).status).toBe(404);
      const exported = await app.request('GET', `/api/flags/export?projectId=${fx.projectId}`, { token: readToken });
      expect(exported.body.flags.map((f: { key: string }) => f.key)).toEqual(['before-pause']);
      const viewerAudit = await fx.viewer.request('GET', `/api/audit?projectId=${fx.projectId}&resourceType=flag`);
      expect(viewerAudit.body.logs.map((l: { resourceName: string }) => l.resourceName)).not.toContain('while-paused');
      // Writes and the reads of other routes go to the primary as always.
      expect((await app.request('GET', `/api/flags/while-paused?serviceId=${fx.serviceId}&environment=production`, { token: readToken })).status).toBe(200);
    });

    await eventually(async () => keys(await app.request('GET', `/api/flags?projectId=${fx.projectId}`, { token: readToken })).includes('while-paused'));
  }, 90_000);
});

describe('a replica that stops answering', () => {
  let lonely: TestApp;
  afterAll(async () => lonely?.stop({ keepDatabase: true }));

  it('costs no read: they go to the primary', async () => {
    // The same database, with a replica address nothing listens on.
    const unreachable = new URL(process.env.TEST_DATABASE_REPLICA_URL!);
    unreachable.port = '9';
    unreachable.pathname = new URL(app.databaseUrl).pathname;
    lonely = await startTestApp({ DATABASE_URL: app.databaseUrl, DATABASE_READ_URL: unreachable.toString(), BACKEND_TIMEOUT_MS: '1000' });
    for (let i = 0; i < 3; i++) {
      const res = await lonely.request('GET', `/api/flags?projectId=${fx.projectId}`, { token: readToken });
      expect(res.status).toBe(200);
      expect(keys(res)).toContain('before-pause');
    }
  }, 60_000);
});

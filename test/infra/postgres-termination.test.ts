import { randomBytes } from 'node:crypto';
import postgres from 'postgres';
import { requireInfra } from '../support/harness';

/**
 * postgres.js 3.4.9 left a query pending for ever when the server ended its connection
 * (`errored()` rejected the query but kept it as the connection's current one), so a request
 * waiting on Postgres during an outage never got an answer. patches/postgres+3.4.9.patch applies
 * the one-line fix of the open upstream pull request porsager/postgres#1142 at npm install.
 */
describe('a pool whose connections the server terminated', () => {
  const database = `pg_termination_${randomBytes(4).toString('hex')}`;
  const admin = postgres(requireInfra().databaseUrl, { max: 1, onnotice: () => undefined });
  let app: postgres.Sql;

  beforeAll(async () => {
    await admin.unsafe(`CREATE DATABASE ${database}`);
    const url = new URL(requireInfra().databaseUrl);
    url.pathname = `/${database}`;
    app = postgres(url.toString(), { max: 4, onnotice: () => undefined });
    await Promise.all([1, 2, 3, 4].map(() => app`SELECT pg_sleep(0.05)`));
  });
  afterAll(async () => {
    await app?.end({ timeout: 1 });
    await admin.unsafe(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
    await admin.end();
  });

  it('settles every query while the database refuses connections, and recovers after', async () => {
    await admin.unsafe(`ALTER DATABASE ${database} ALLOW_CONNECTIONS false`);
    await admin`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = ${database}`;
    const outcomes: string[] = [];
    for (let i = 0; i < 20; i++) {
      const pending = new Promise<string>((resolve) => setTimeout(() => resolve('pending after 10 s'), 10_000).unref());
      outcomes.push(await Promise.race([app`SELECT 1`.then(() => 'answered', () => 'refused'), pending]));
    }
    expect(outcomes.filter((o) => o === 'pending after 10 s')).toEqual([]);
    await admin.unsafe(`ALTER DATABASE ${database} ALLOW_CONNECTIONS true`);
    // A connection the server ended while idle reports that on its next query; the pool then
    // replaces it, so the pool answers again within a few queries.
    let answered = false;
    for (let i = 0; i < 10 && !answered; i++) answered = await app`SELECT 1`.then(() => true, () => false);
    expect(answered).toBe(true);
  }, 120_000);
});

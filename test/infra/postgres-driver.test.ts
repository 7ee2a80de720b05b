import postgres from 'postgres';
import { randomBytes } from 'node:crypto';
import { requireInfra, eventually } from '../support/harness';

// The Postgres driver as patched in patches/ (docs/operations.md#faults-and-recovery): a reply
// cut short, by a failing query or a terminated connection, never leaks into a later query.
describe('postgres driver', () => {
  const table = `driver_probe_${randomBytes(4).toString('hex')}`;
  let sql: postgres.Sql;
  let admin: postgres.Sql;
  beforeAll(async () => {
    const url = requireInfra().databaseUrl;
    sql = postgres(url, { max: 1, onnotice: () => undefined });
    admin = postgres(url, { max: 1, onnotice: () => undefined });
    await admin`CREATE TABLE ${admin(table)} (id text PRIMARY KEY)`;
  });
  afterAll(async () => {
    await admin`DROP TABLE IF EXISTS ${admin(table)}`;
    await Promise.all([sql.end(), admin.end()]);
  });

  it('starts the next result at its first row after a query failed midway through its rows', async () => {
    await expect(sql`SELECT 1 / (3 - g) AS x FROM generate_series(1, 5) g`).rejects.toThrow(/division by zero/);
    const rows = await sql`SELECT 42 AS n`;
    expect([...rows]).toEqual([{ n: 42 }]);
  });

  it('fails the later queries of a transaction whose connection was terminated instead of running them outside it', async () => {
    let lateInsert: Promise<unknown> | undefined;
    const transaction = sql.begin(async (tx) => {
      const [{ pid }] = await tx`SELECT pg_backend_pid() AS pid`;
      await admin`SELECT pg_terminate_backend(${pid})`;
      // The pool reconnects the same connection for an ordinary query before the transaction's next one.
      await eventually(async () => (await sql`SELECT 1 AS ok`.catch(() => []))[0]?.ok === 1, 10_000);
      lateInsert = tx`INSERT INTO ${tx(table)} (id) VALUES ('outside')`;
      await lateInsert;
    });
    await expect(transaction).rejects.toThrow();
    await eventually(async () => lateInsert !== undefined, 10_000);
    await expect(lateInsert).rejects.toThrow();
    expect(await admin`SELECT id FROM ${admin(table)}`).toHaveLength(0);
  });

  it('reserves the connection for a transaction whose BEGIN was written behind a busy pipeline', async () => {
    // A pipeline of one makes every BEGIN sent to a busy connection the write that fills it: the
    // case a write meeting socket backpressure hits at random under load.
    // max_pipeline is a driver option its types leave out: passed as a variable, not a literal.
    const options = { max: 2, max_pipeline: 1, onnotice: () => undefined };
    const pool = postgres(requireInfra().databaseUrl, options);
    try {
      await Promise.all([pool`SELECT 1`, pool`SELECT 1`]);
      const sleeping = [pool`SELECT pg_sleep(0.2)`.execute(), pool`SELECT pg_sleep(0.2)`.execute()];
      const committed = pool.begin(async (tx) => (await tx`SELECT 7 AS n`)[0].n);
      await expect(committed).resolves.toBe(7);
      await Promise.all(sleeping);
    } finally {
      await pool.end();
    }
  });
});

import postgres from 'postgres';
import { listMigrations, migrate } from '../../api/infra/migrate';
import { requireInfra } from '../support/harness';
import { withDatabase } from '../support/global-setup';

describe('SQL migrations', () => {
  const { databaseUrl } = requireInfra();
  const dbName = `migrate_${process.pid}_${Date.now()}`;
  const admin = postgres(databaseUrl, { max: 1, onnotice: () => undefined });
  const connections: postgres.Sql[] = [];
  const connect = () => {
    const sql = postgres(withDatabase(databaseUrl, dbName), { max: 2, onnotice: () => undefined });
    connections.push(sql);
    return sql;
  };

  beforeAll(() => admin.unsafe(`CREATE DATABASE ${dbName}`));
  afterAll(async () => {
    await Promise.all(connections.map((c) => c.end()));
    await admin.unsafe(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
    await admin.end();
  });

  it('applies every file once, in order, even from two processes at the same time', async () => {
    const [first, second] = await Promise.all([migrate(connect()), migrate(connect())]);
    const files = listMigrations();
    expect([...first, ...second].sort()).toEqual(files);
    const rows = await connect()<{ name: string }[]>`SELECT name FROM schema_migrations ORDER BY name`;
    expect(rows.map((r) => r.name)).toEqual(files);
  });

  it('is a no-op the second time', async () => {
    expect(await migrate(connect())).toEqual([]);
  });

  it('names files NNNN_snake_case.sql and keeps them in order', () => {
    const files = listMigrations();
    expect(files.length).toBeGreaterThanOrEqual(2);
    expect(files[0]).toBe('0001_accounts.sql');
    expect(new Set(files.map((f) => f.slice(0, 4))).size).toBe(files.length);
  });
});

import { FLAG_CONTENT_FIELDS, FlagRecordSchema } from '../../api/features/flags/schema';
import type { FlagService } from '../../api/features/flags/service';
import { FLAG_TABLE, FlagStore } from '../../api/features/flags/store';
import { startTestApp, type TestApp } from '../support/harness';
import { createProjectFixture, type ProjectFixture } from './fixtures';

/**
 * The flag's schema, the `flags` table and the store's column mapping (FLAG_TABLE, from which
 * every statement of the store is generated) must agree: a field added to one of them and not
 * to the others fails here.
 */

let app: TestApp;
let fx: ProjectFixture;
let flags: FlagService;
const store = new FlagStore();
const actor = { name: 'column-mapping test', userId: null };

beforeAll(async () => {
  app = await startTestApp();
  fx = await createProjectFixture(app, 'Column mapping');
  flags = app.platform.flagService;
});
afterAll(() => app?.stop());

describe('the flags column mapping', () => {
  it('maps every field of the flag record, and nothing else', () => {
    expect(Object.keys(FLAG_TABLE).sort()).toEqual([...FlagRecordSchema.keyof().options].sort());
  });

  it('names exactly the columns of the flags table', async () => {
    const columns = await app.platform.db.sql<{ column_name: string }[]>`
      SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = 'flags'`;
    expect(columns.map((c) => c.column_name).sort()).toEqual(Object.values(FLAG_TABLE).map((c) => c.name).sort());
  });

  it('writes every content field from the input and leaves only the bookkeeping fields to the database', () => {
    for (const field of FLAG_CONTENT_FIELDS) expect(FLAG_TABLE[field]).not.toHaveProperty('onInsert');
    const databaseKept = Object.entries(FLAG_TABLE).flatMap(([field, column]) => ('onInsert' in column ? [field] : []));
    expect(databaseKept.sort()).toEqual(['createdAt', 'updatedAt', 'version']);
  });

  it('stores and reads back every content field, on insert and on update', async () => {
    const key = `mapped-${Date.now().toString(36)}`;
    const ref = { key, serviceId: fx.serviceId, environment: 'staging' as const };
    const first = {
      name: 'Mapped',
      description: 'every field set',
      type: 'string' as const,
      enabled: true,
      defaultValue: 'off',
      tags: ['a', 'b'],
      variants: [
        { name: 'x', value: 'on', weight: 40 },
        { name: 'y', value: 'off', weight: 60 },
      ],
      targeting: [{ id: 'r1', conditions: [{ property: 'country', operator: 'in' as const, value: ['NL'] }], value: 'on', rolloutPercentage: 50 }],
      isPublic: true,
    };
    const [created] = await flags.create(actor, { ...ref, ...first });
    expect(await store.find(app.platform.db.sql, ref)).toEqual(created);
    expect(created).toMatchObject({ ...first, version: 1 });

    const second = {
      name: 'Remapped',
      description: '',
      type: 'number' as const,
      enabled: false,
      defaultValue: 3,
      tags: [],
      variants: [],
      targeting: [{ id: 'r2', conditions: [], value: 7 }],
      isPublic: false,
    };
    const updated = await flags.update(actor, ref, second);
    expect(updated).toMatchObject({ ...second, version: 2, createdAt: created.createdAt });
    expect(await store.find(app.platform.db.sql, ref)).toEqual(updated);
  });
});

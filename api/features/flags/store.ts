import type { PendingQuery, Row } from 'postgres';
import type { Environment } from '../../domain/environments';
import { isUniqueViolation } from '../../http/errors';
import type { Queryable, TransactionSql } from '../../infra/postgres';
import { FLAG_CONTENT_FIELDS } from './schema';
import type { FlagChangeType, FlagContent, FlagRecord, FlagRef, FlagType, FlagVersionRecord } from './types';

/** How a column holds its field: read from a jsonb parameter with ->> and a cast, or as jsonb. */
type ColumnType = 'text' | 'boolean' | 'integer' | 'jsonb' | 'timestamptz';

interface Column {
  name: string;
  type: ColumnType;
  /** Set by the database, not by the writer: the value of an insert, and of an update (absent: left as it is). */
  onInsert?: string;
  onUpdate?: string;
}

/**
 * The `flags` table: the column of every FlagRecord field. FLAG_COLUMNS, the row type and its
 * conversion, the insert projection and the update list are generated from it, once.
 */
export const FLAG_TABLE = {
  id: { name: 'id', type: 'text' },
  projectId: { name: 'project_id', type: 'text' },
  serviceId: { name: 'service_id', type: 'text' },
  environment: { name: 'environment', type: 'text' },
  key: { name: 'key', type: 'text' },
  name: { name: 'name', type: 'text' },
  description: { name: 'description', type: 'text' },
  type: { name: 'type', type: 'text' },
  enabled: { name: 'enabled', type: 'boolean' },
  defaultValue: { name: 'default_value', type: 'jsonb' },
  tags: { name: 'tags', type: 'jsonb' },
  variants: { name: 'variants', type: 'jsonb' },
  targeting: { name: 'targeting', type: 'jsonb' },
  isPublic: { name: 'is_public', type: 'boolean' },
  version: { name: 'version', type: 'integer', onInsert: '1', onUpdate: 'f.version + 1' },
  createdAt: { name: 'created_at', type: 'timestamptz', onInsert: 'clock_timestamp()' },
  updatedAt: { name: 'updated_at', type: 'timestamptz', onInsert: 'clock_timestamp()', onUpdate: 'clock_timestamp()' },
} as const satisfies { [F in keyof FlagRecord]: Column };

type FlagTable = typeof FLAG_TABLE;

/** A `flags` row as postgres.js returns it (timestamps as Date); toFlagRecord turns it into the API shape. */
export type FlagRow = {
  [F in keyof FlagTable as FlagTable[F]['name']]: FlagTable[F]['type'] extends 'timestamptz' ? Date : FlagRecord[F];
};

const FIELDS = Object.entries(FLAG_TABLE) as [keyof FlagRecord, Column][];

/** The columns of a FlagRow: every read of whole flags selects these (here and in the evaluation store). */
export const FLAG_COLUMNS = FIELDS.map(([, column]) => column.name).join(', ');

/** The value of `field` in the jsonb object `source`, as its column's type. */
function fieldOf(source: string, field: string, type: ColumnType): string {
  return type === 'jsonb' ? `${source}->'${field}'` : type === 'text' ? `${source}->>'${field}'` : `(${source}->>'${field}')::${type}`;
}

/** The INSERT's SELECT list, in FLAG_COLUMNS order: new flags read from the jsonb element `f`. */
const INSERT_VALUES = FIELDS.map(([field, column]) => column.onInsert ?? fieldOf('f', field, column.type)).join(', ');
/** UPDATE assignments for flags `f` from the jsonb object `c.s` of changed content fields. */
const UPDATE_ASSIGNMENTS = [
  ...FLAG_CONTENT_FIELDS.map((field) => {
    const column: Column = FLAG_TABLE[field];
    return `${column.name} = CASE WHEN c.s ? '${field}' THEN ${fieldOf('c.s', field, column.type)} ELSE f.${column.name} END`;
  }),
  ...FIELDS.flatMap(([, column]) => (column.onUpdate ? [`${column.name} = ${column.onUpdate}`] : [])),
].join(', ');

export function toFlagRecord(row: FlagRow): FlagRecord {
  const values = row as unknown as Record<string, unknown>;
  const record: Record<string, unknown> = {};
  for (const [field, column] of FIELDS) {
    const value = values[column.name];
    record[field] = column.type === 'timestamptz' ? (value as Date).toISOString() : value;
  }
  return record as FlagRecord;
}

/** A flag to insert: its identity and content (the database sets its version and timestamps). */
export type NewFlag = Pick<FlagRecord, 'id' | 'projectId' | 'serviceId' | 'environment' | 'key'> & FlagContent;

/** A changed flag plus the change time with microseconds (event timestamps must be distinct per change). */
export interface WrittenFlag {
  flag: FlagRecord;
  changedAt: string;
}

/** Raised by an insert when a flag with the same key exists in the service and environment. */
export class FlagKeyTakenError extends Error {
  constructor() {
    super('a flag with this key already exists in its service and environment');
  }
}

/** ISO 8601 in UTC with microseconds, computed by Postgres from a timestamptz column. */
const ISO_MICROS = `to_char(updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`;

export interface FlagListFilter {
  projectId: string;
  serviceId?: string;
  environment?: Environment;
  search?: string;
  tags?: string[];
  enabled?: boolean;
  type?: FlagType;
}

/** Position in the list order (key, id); opaque to clients. */
export interface ListPosition {
  key: string;
  id: string;
}

export interface FlagPage {
  flags: FlagRecord[];
  total: number;
  /** Rows exist after the last / before the first flag of the page (in list order). */
  hasAfter: boolean;
  hasBefore: boolean;
}

/**
 * Flags and their version history in Postgres. Holds no connection: every method runs in the
 * `db` it is given (the pool for plain reads, the caller's transaction for locks and writes).
 */
export class FlagStore {
  async findService(db: Queryable, serviceId: string): Promise<{ id: string; projectId: string } | null> {
    const [row] = await db<{ id: string; project_id: string }[]>`SELECT id, project_id FROM services WHERE id = ${serviceId}`;
    return row ? { id: row.id, projectId: row.project_id } : null;
  }

  async find(db: Queryable, ref: FlagRef): Promise<FlagRecord | null> {
    const [row] = await db<FlagRow[]>`
      SELECT ${db.unsafe(FLAG_COLUMNS)} FROM flags
      WHERE service_id = ${ref.serviceId} AND environment = ${ref.environment} AND key = ${ref.key}`;
    return row ? toFlagRecord(row) : null;
  }

  /** Reads the flag and locks its row until the transaction ends: writers of one flag run one at a time. */
  async lock(tx: TransactionSql, ref: FlagRef): Promise<FlagRecord | null> {
    const [row] = await tx<FlagRow[]>`
      SELECT ${tx.unsafe(FLAG_COLUMNS)} FROM flags
      WHERE service_id = ${ref.serviceId} AND environment = ${ref.environment} AND key = ${ref.key}
      FOR UPDATE`;
    return row ? toFlagRecord(row) : null;
  }

  /**
   * Reads the flags of `keys` in one service and environment and locks their rows, in id order
   * (two writers of overlapping sets cannot deadlock). Missing keys are left out.
   */
  async lockMany(tx: TransactionSql, target: { serviceId: string; environment: Environment }, keys: string[]): Promise<FlagRecord[]> {
    const rows = await tx<FlagRow[]>`
      SELECT ${tx.unsafe(FLAG_COLUMNS)} FROM flags
      WHERE service_id = ${target.serviceId} AND environment = ${target.environment} AND key = ANY(${tx.array(keys)}::text[])
      ORDER BY id FOR UPDATE`;
    return rows.map(toFlagRecord);
  }

  /** The flags of `keys` in one service and environment (missing keys are left out), without locking. */
  async findMany(db: Queryable, target: { serviceId: string; environment: Environment }, keys: string[]): Promise<FlagRecord[]> {
    const rows = await db<FlagRow[]>`
      SELECT ${db.unsafe(FLAG_COLUMNS)} FROM flags
      WHERE service_id = ${target.serviceId} AND environment = ${target.environment} AND key = ANY(${db.array(keys)}::text[])`;
    return rows.map(toFlagRecord);
  }

  /**
   * Inserts new flags at version 1, in one statement; returns them by id. FlagKeyTakenError when
   * one of the keys exists in its service and environment (the transaction is then aborted).
   */
  async insertMany(tx: TransactionSql, flags: NewFlag[]): Promise<Map<string, WrittenFlag>> {
    if (!flags.length) return new Map();
    try {
      const rows = await tx<(FlagRow & { changed_at: string })[]>`
        INSERT INTO flags (${tx.unsafe(FLAG_COLUMNS)})
        SELECT ${tx.unsafe(INSERT_VALUES)}
        FROM jsonb_array_elements(${json(tx, flags)}) WITH ORDINALITY AS t(f, n) ORDER BY n
        RETURNING ${tx.unsafe(FLAG_COLUMNS)}, ${tx.unsafe(ISO_MICROS)} AS changed_at`;
      return written(rows);
    } catch (error) {
      if (isUniqueViolation(error)) throw new FlagKeyTakenError();
      throw error;
    }
  }

  /**
   * Writes the given content fields of each flag (the others keep their value) and bumps its
   * version by one, in one statement; returns the flags by id.
   */
  async updateMany(tx: TransactionSql, changes: { id: string; set: Partial<FlagContent> }[]): Promise<Map<string, WrittenFlag>> {
    if (!changes.length) return new Map();
    const rows = await tx<(FlagRow & { changed_at: string })[]>`
      UPDATE flags f SET ${tx.unsafe(UPDATE_ASSIGNMENTS)}
      FROM (SELECT e->>'id' AS flag_id, e->'set' AS s FROM jsonb_array_elements(${json(tx, changes)}) AS e) AS c
      WHERE f.id = c.flag_id
      RETURNING ${tx.unsafe(FLAG_COLUMNS)}, ${tx.unsafe(ISO_MICROS)} AS changed_at`;
    return written(rows);
  }

  /** Deletes the rows, in one statement; returns each deletion time (microseconds) by id. */
  async deleteMany(tx: TransactionSql, ids: string[]): Promise<Map<string, string>> {
    if (!ids.length) return new Map();
    const rows = await tx<{ id: string; at: string }[]>`
      DELETE FROM flags WHERE id = ANY(${tx.array(ids)}::text[])
      RETURNING id, to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS at`;
    return new Map(rows.map((r) => [r.id, r.at]));
  }

  /** Version snapshots of one actor's changes, in one statement. */
  async insertVersions(
    tx: TransactionSql,
    actor: { name: string; userId: string | null },
    versions: { id: string; snapshot: FlagRecord; version: number; changeType: FlagChangeType }[],
  ): Promise<void> {
    if (!versions.length) return;
    await tx`
      INSERT INTO flag_versions (id, flag_id, project_id, service_id, environment, flag_key, version, change_type, snapshot, actor, user_id, created_at)
      SELECT v->>'id', v->'snapshot'->>'id', v->'snapshot'->>'projectId', v->'snapshot'->>'serviceId', v->'snapshot'->>'environment',
             v->'snapshot'->>'key', (v->>'version')::int, v->>'changeType', v->'snapshot', ${actor.name}, ${actor.userId}, clock_timestamp()
      FROM jsonb_array_elements(${json(tx, versions)}) AS v`;
  }

  async findVersion(db: Queryable, flagId: string, version: number): Promise<FlagVersionRecord | null> {
    const [row] = await db<VersionRow[]>`
      SELECT id, version, change_type, snapshot, actor, user_id, created_at FROM flag_versions
      WHERE flag_id = ${flagId} AND version = ${version}`;
    return row ? toVersionRecord(row) : null;
  }

  /** Newest first. */
  async listVersions(db: Queryable, flagId: string, limit: number, offset: number): Promise<{ versions: FlagVersionRecord[]; total: number }> {
    const [rows, [count]] = await Promise.all([
      db<VersionRow[]>`
        SELECT id, version, change_type, snapshot, actor, user_id, created_at FROM flag_versions
        WHERE flag_id = ${flagId} ORDER BY version DESC LIMIT ${limit} OFFSET ${offset}`,
      db<{ total: number }[]>`SELECT count(*)::int AS total FROM flag_versions WHERE flag_id = ${flagId}`,
    ]);
    return { versions: rows.map(toVersionRecord), total: count.total };
  }

  /** Every flag of the service (in one environment when given), in list order (key, id). */
  async listByService(db: Queryable, serviceId: string, environment?: Environment): Promise<FlagRecord[]> {
    const rows = await db<FlagRow[]>`
      SELECT ${db.unsafe(FLAG_COLUMNS)} FROM flags
      WHERE service_id = ${serviceId} ${environment ? db`AND environment = ${environment}` : db``}
      ORDER BY key, id`;
    return rows.map(toFlagRecord);
  }

  /**
   * One page in (key, id) order. With `after`/`before` the page starts after / ends before that
   * position (cursor paging); otherwise `offset` rows are skipped.
   */
  async list(db: Queryable, filter: FlagListFilter, page: { limit: number; offset: number; after?: ListPosition; before?: ListPosition }): Promise<FlagPage> {
    const where = filterClause(db, filter);
    const total = db<{ total: number }[]>`SELECT count(*)::int AS total FROM flags WHERE ${where}`;
    let rows: FlagRow[];
    if (page.before) {
      const b = page.before;
      rows = await db<FlagRow[]>`
        SELECT ${db.unsafe(FLAG_COLUMNS)} FROM flags WHERE ${where} AND (key, id) < (${b.key}, ${b.id})
        ORDER BY key DESC, id DESC LIMIT ${page.limit + 1}`;
      const hasBefore = rows.length > page.limit;
      rows = rows.slice(0, page.limit).reverse();
      const last = rows.at(-1);
      const hasAfter = last ? await exists(db, db`${where} AND (key, id) > (${last.key}, ${last.id})`) : await exists(db, db`${where} AND (key, id) >= (${b.key}, ${b.id})`);
      return { flags: rows.map(toFlagRecord), total: (await total)[0].total, hasAfter, hasBefore };
    }
    const a = page.after;
    rows = await db<FlagRow[]>`
      SELECT ${db.unsafe(FLAG_COLUMNS)} FROM flags WHERE ${where} ${a ? db`AND (key, id) > (${a.key}, ${a.id})` : db``}
      ORDER BY key, id LIMIT ${page.limit + 1} OFFSET ${a ? 0 : page.offset}`;
    const hasAfter = rows.length > page.limit;
    rows = rows.slice(0, page.limit);
    const first = rows[0];
    let hasBefore: boolean;
    if (first) hasBefore = await exists(db, db`${where} AND (key, id) < (${first.key}, ${first.id})`);
    else if (a) hasBefore = await exists(db, db`${where} AND (key, id) <= (${a.key}, ${a.id})`);
    else hasBefore = page.offset > 0 && (await total)[0].total > 0;
    return { flags: rows.map(toFlagRecord), total: (await total)[0].total, hasAfter, hasBefore };
  }
}

async function exists(db: Queryable, where: PendingQuery<Row[]>): Promise<boolean> {
  const [row] = await db<{ found: boolean }[]>`SELECT EXISTS (SELECT 1 FROM flags WHERE ${where}) AS found`;
  return row.found;
}

function filterClause(db: Queryable, f: FlagListFilter): PendingQuery<Row[]> {
  const search = f.search ? `%${f.search.replace(/[\\%_]/g, (c) => `\\${c}`)}%` : undefined;
  return db`project_id = ${f.projectId}
    ${f.serviceId ? db`AND service_id = ${f.serviceId}` : db``}
    ${f.environment ? db`AND environment = ${f.environment}` : db``}
    ${search ? db`AND (key ILIKE ${search} OR name ILIKE ${search})` : db``}
    ${f.tags?.length ? db`AND tags ?| ${db.array(f.tags)}::text[]` : db``}
    ${f.enabled !== undefined ? db`AND enabled = ${f.enabled}` : db``}
    ${f.type ? db`AND type = ${f.type}` : db``}`;
}

interface VersionRow {
  id: string;
  version: number;
  change_type: FlagChangeType;
  snapshot: FlagRecord;
  actor: string;
  user_id: string | null;
  created_at: Date;
}

function toVersionRecord(row: VersionRow): FlagVersionRecord {
  return {
    id: row.id,
    version: row.version,
    changeType: row.change_type,
    snapshot: row.snapshot,
    actor: row.actor,
    userId: row.user_id,
    createdAt: row.created_at.toISOString(),
  };
}

function written(rows: (FlagRow & { changed_at: string })[]): Map<string, WrittenFlag> {
  return new Map(rows.map((row) => [row.id, { flag: toFlagRecord(row), changedAt: row.changed_at }]));
}

/** jsonb parameter; postgres.js needs the value wrapped so scalars and arrays are not mistaken for other types. */
function json(tx: TransactionSql, value: unknown) {
  return tx.json(value as never);
}

import type { PendingQuery, Row } from 'postgres';
import type { Sql, TransactionSql } from '../../infra/postgres';
import type {
  Environment,
  FlagChangeType,
  FlagContent,
  FlagRecord,
  FlagRef,
  FlagTargetingRule,
  FlagType,
  FlagVariant,
  FlagVersionRecord,
} from './types';

/** A `flags` row as postgres.js returns it; toFlagRecord turns it into the API shape. */
export interface FlagRow {
  id: string;
  project_id: string;
  service_id: string;
  environment: Environment;
  key: string;
  name: string;
  description: string;
  type: FlagType;
  enabled: boolean;
  default_value: unknown;
  tags: string[];
  variants: FlagVariant[];
  targeting: FlagTargetingRule[];
  is_public: boolean;
  version: number;
  created_at: Date;
  updated_at: Date;
}

/** A flag to insert: its identity and content (it starts at version 1). */
export type NewFlag = { id: string; projectId: string; serviceId: string; environment: Environment; key: string } & FlagContent;

/** A changed flag plus the change time with microseconds (event timestamps must be distinct per change). */
export interface WrittenFlag {
  flag: FlagRecord;
  changedAt: string;
}

export function toFlagRecord(row: FlagRow): FlagRecord {
  return {
    id: row.id,
    projectId: row.project_id,
    serviceId: row.service_id,
    environment: row.environment,
    key: row.key,
    name: row.name,
    description: row.description,
    type: row.type,
    enabled: row.enabled,
    defaultValue: row.default_value,
    tags: row.tags,
    variants: row.variants,
    targeting: row.targeting,
    isPublic: row.is_public,
    version: row.version,
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
  };
}

/** The columns of a FlagRow: every read of whole flags selects these (here and in the evaluation store). */
export const FLAG_COLUMNS = 'id, project_id, service_id, environment, key, name, description, type, enabled, default_value, tags, variants, targeting, is_public, version, created_at, updated_at';
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

/** Flags and their version history in Postgres. Writes take the caller's transaction. */
export class FlagStore {
  constructor(private readonly sql: Sql) {}

  async findService(serviceId: string): Promise<{ id: string; projectId: string } | null> {
    const [row] = await this.sql<{ id: string; project_id: string }[]>`SELECT id, project_id FROM services WHERE id = ${serviceId}`;
    return row ? { id: row.id, projectId: row.project_id } : null;
  }

  async find(ref: FlagRef): Promise<FlagRecord | null> {
    const [row] = await this.sql<FlagRow[]>`
      SELECT ${this.sql.unsafe(FLAG_COLUMNS)} FROM flags
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

  /** Inserts new flags at version 1, in one statement; returns them by id. */
  async insertMany(tx: TransactionSql, flags: NewFlag[]): Promise<Map<string, WrittenFlag>> {
    if (!flags.length) return new Map();
    const rows = await tx<(FlagRow & { changed_at: string })[]>`
      INSERT INTO flags (id, project_id, service_id, environment, key, name, description, type, enabled, default_value,
                         tags, variants, targeting, is_public, version, created_at, updated_at)
      SELECT f->>'id', f->>'projectId', f->>'serviceId', f->>'environment', f->>'key', f->>'name', f->>'description', f->>'type',
             (f->>'enabled')::boolean, f->'defaultValue', f->'tags', f->'variants', f->'targeting', (f->>'isPublic')::boolean,
             1, clock_timestamp(), clock_timestamp()
      FROM jsonb_array_elements(${json(tx, flags)}) WITH ORDINALITY AS t(f, n) ORDER BY n
      RETURNING ${tx.unsafe(FLAG_COLUMNS)}, ${tx.unsafe(ISO_MICROS)} AS changed_at`;
    return written(rows);
  }

  /**
   * Writes the given content fields of each flag (the others keep their value) and bumps its
   * version by one, in one statement; returns the flags by id.
   */
  async updateMany(tx: TransactionSql, changes: { id: string; set: Partial<FlagContent> }[]): Promise<Map<string, WrittenFlag>> {
    if (!changes.length) return new Map();
    const rows = await tx<(FlagRow & { changed_at: string })[]>`
      UPDATE flags f SET
        name = CASE WHEN c.s ? 'name' THEN c.s->>'name' ELSE f.name END,
        description = CASE WHEN c.s ? 'description' THEN c.s->>'description' ELSE f.description END,
        type = CASE WHEN c.s ? 'type' THEN c.s->>'type' ELSE f.type END,
        enabled = CASE WHEN c.s ? 'enabled' THEN (c.s->>'enabled')::boolean ELSE f.enabled END,
        default_value = CASE WHEN c.s ? 'defaultValue' THEN c.s->'defaultValue' ELSE f.default_value END,
        tags = CASE WHEN c.s ? 'tags' THEN c.s->'tags' ELSE f.tags END,
        variants = CASE WHEN c.s ? 'variants' THEN c.s->'variants' ELSE f.variants END,
        targeting = CASE WHEN c.s ? 'targeting' THEN c.s->'targeting' ELSE f.targeting END,
        is_public = CASE WHEN c.s ? 'isPublic' THEN (c.s->>'isPublic')::boolean ELSE f.is_public END,
        version = f.version + 1, updated_at = clock_timestamp()
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

  async findVersion(sql: Sql | TransactionSql, flagId: string, version: number): Promise<FlagVersionRecord | null> {
    const [row] = await sql<VersionRow[]>`
      SELECT id, version, change_type, snapshot, actor, user_id, created_at FROM flag_versions
      WHERE flag_id = ${flagId} AND version = ${version}`;
    return row ? toVersionRecord(row) : null;
  }

  /** Newest first. */
  async listVersions(flagId: string, limit: number, offset: number): Promise<{ versions: FlagVersionRecord[]; total: number }> {
    const [rows, [count]] = await Promise.all([
      this.sql<VersionRow[]>`
        SELECT id, version, change_type, snapshot, actor, user_id, created_at FROM flag_versions
        WHERE flag_id = ${flagId} ORDER BY version DESC LIMIT ${limit} OFFSET ${offset}`,
      this.sql<{ total: number }[]>`SELECT count(*)::int AS total FROM flag_versions WHERE flag_id = ${flagId}`,
    ]);
    return { versions: rows.map(toVersionRecord), total: count.total };
  }

  /** Every flag of the service (in one environment when given), in list order (key, id). */
  async listByService(serviceId: string, environment?: Environment): Promise<FlagRecord[]> {
    const sql = this.sql;
    const rows = await sql<FlagRow[]>`
      SELECT ${sql.unsafe(FLAG_COLUMNS)} FROM flags
      WHERE service_id = ${serviceId} ${environment ? sql`AND environment = ${environment}` : sql``}
      ORDER BY key, id`;
    return rows.map(toFlagRecord);
  }

  /**
   * One page in (key, id) order. With `after`/`before` the page starts after / ends before that
   * position (cursor paging); otherwise `offset` rows are skipped.
   */
  async list(filter: FlagListFilter, page: { limit: number; offset: number; after?: ListPosition; before?: ListPosition }): Promise<FlagPage> {
    const sql = this.sql;
    const where = this.filterClause(filter);
    const total = sql<{ total: number }[]>`SELECT count(*)::int AS total FROM flags WHERE ${where}`;
    let rows: FlagRow[];
    if (page.before) {
      const b = page.before;
      rows = await sql<FlagRow[]>`
        SELECT ${sql.unsafe(FLAG_COLUMNS)} FROM flags WHERE ${where} AND (key, id) < (${b.key}, ${b.id})
        ORDER BY key DESC, id DESC LIMIT ${page.limit + 1}`;
      const hasBefore = rows.length > page.limit;
      rows = rows.slice(0, page.limit).reverse();
      const last = rows.at(-1);
      const hasAfter = last ? await this.exists(sql`${where} AND (key, id) > (${last.key}, ${last.id})`) : await this.exists(sql`${where} AND (key, id) >= (${b.key}, ${b.id})`);
      return { flags: rows.map(toFlagRecord), total: (await total)[0].total, hasAfter, hasBefore };
    }
    const a = page.after;
    rows = await sql<FlagRow[]>`
      SELECT ${sql.unsafe(FLAG_COLUMNS)} FROM flags WHERE ${where} ${a ? sql`AND (key, id) > (${a.key}, ${a.id})` : sql``}
      ORDER BY key, id LIMIT ${page.limit + 1} OFFSET ${a ? 0 : page.offset}`;
    const hasAfter = rows.length > page.limit;
    rows = rows.slice(0, page.limit);
    const first = rows[0];
    let hasBefore: boolean;
    if (first) hasBefore = await this.exists(sql`${where} AND (key, id) < (${first.key}, ${first.id})`);
    else if (a) hasBefore = await this.exists(sql`${where} AND (key, id) <= (${a.key}, ${a.id})`);
    else hasBefore = page.offset > 0 && (await total)[0].total > 0;
    return { flags: rows.map(toFlagRecord), total: (await total)[0].total, hasAfter, hasBefore };
  }

  private async exists(where: PendingQuery<Row[]>): Promise<boolean> {
    const [row] = await this.sql<{ found: boolean }[]>`SELECT EXISTS (SELECT 1 FROM flags WHERE ${where}) AS found`;
    return row.found;
  }

  private filterClause(f: FlagListFilter): PendingQuery<Row[]> {
    const sql = this.sql;
    const search = f.search ? `%${f.search.replace(/[\\%_]/g, (c) => `\\${c}`)}%` : undefined;
    return sql`project_id = ${f.projectId}
      ${f.serviceId ? sql`AND service_id = ${f.serviceId}` : sql``}
      ${f.environment ? sql`AND environment = ${f.environment}` : sql``}
      ${search ? sql`AND (key ILIKE ${search} OR name ILIKE ${search})` : sql``}
      ${f.tags?.length ? sql`AND tags ?| ${sql.array(f.tags)}::text[]` : sql``}
      ${f.enabled !== undefined ? sql`AND enabled = ${f.enabled}` : sql``}
      ${f.type ? sql`AND type = ${f.type}` : sql``}`;
  }
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

import { newId } from '../../infra/ids';
import type { TransactionSql } from '../../infra/postgres';
import { diffFields, type AuditActor } from '../audit/writer';
import { toFlagRecord } from './store';
import { FLAG_CONTENT_FIELDS, type Environment, type FlagChangeEvent, type FlagRecord } from './types';

type FlagRow = Parameters<typeof toFlagRecord>[0];

export interface EnabledChange {
  key: string;
  enabled: boolean;
}

export interface BatchToggleResult {
  /** Every requested flag that exists, by key, as it is after the write. */
  flags: Map<string, FlagRecord>;
  /** How many flags actually changed (were written). */
  changed: number;
}

const COLUMNS = `f.id, f.project_id, f.service_id, f.environment, f.key, f.name, f.description, f.type, f.enabled, f.default_value,
  f.tags, f.variants, f.targeting, f.is_public, f.version, f.created_at, f.updated_at`;

/**
 * The set-based twin of FlagService.toggle for many flags of one service and environment, run
 * in the caller's transaction (FlagService.setEnabledMany): the same rows, version snapshots,
 * `flag.toggle` audit entries and `flag.toggled` outbox events a toggle of each changed flag
 * writes, in five statements instead of four per flag. Flags already in the wanted state are
 * not written (as a no-op toggle with a body). A key given twice takes its last value.
 */
export async function setEnabledInBatch(
  tx: TransactionSql,
  actor: AuditActor,
  target: { serviceId: string; environment: Environment },
  changes: EnabledChange[],
  metadata: Record<string, unknown> = {},
): Promise<BatchToggleResult> {
  const wanted = new Map<string, boolean>();
  for (const c of changes) wanted.set(c.key, c.enabled);
  if (!wanted.size) return { flags: new Map(), changed: 0 };

  // Locked in id order, so two batches over the same flags cannot deadlock.
  const current = await tx<FlagRow[]>`
    SELECT ${tx.unsafe(COLUMNS)} FROM flags f
    WHERE f.service_id = ${target.serviceId} AND f.environment = ${target.environment} AND f.key = ANY(${tx.array([...wanted.keys()])}::text[])
    ORDER BY f.id FOR UPDATE`;
  const flags = new Map<string, FlagRecord>();
  const before = new Map<string, FlagRecord>();
  for (const row of current) {
    const flag = toFlagRecord(row);
    flags.set(flag.key, flag);
    if (flag.enabled !== wanted.get(flag.key)) before.set(flag.id, flag);
  }
  if (!before.size) return { flags, changed: 0 };

  const updates = [...before.values()].map((f) => ({ flag_id: f.id, new_enabled: !f.enabled }));
  const written = await tx<(FlagRow & { changed_at: string })[]>`
    UPDATE flags f SET enabled = c.new_enabled, version = f.version + 1, updated_at = clock_timestamp()
    FROM jsonb_to_recordset(${tx.json(updates as never)}) AS c(flag_id text, new_enabled boolean)
    WHERE f.id = c.flag_id
    RETURNING ${tx.unsafe(COLUMNS)}, to_char(f.updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS changed_at`;

  const versions: unknown[] = [];
  const audits: unknown[] = [];
  const events: FlagChangeEvent[] = [];
  for (const row of written.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0))) {
    const after = toFlagRecord(row);
    const previous = before.get(after.id)!;
    flags.set(after.key, after);
    versions.push({ id: newId('fv'), flag: after, changeType: 'toggle', actor: actor.name, userId: actor.userId });
    audits.push({
      id: newId('aud'),
      projectId: after.projectId,
      resourceId: after.id,
      resourceName: after.key,
      before: previous,
      after,
      changes: diffFields(previous as unknown as Record<string, unknown>, after as unknown as Record<string, unknown>),
      metadata: { serviceId: after.serviceId, environment: after.environment, version: after.version, ...metadata },
    });
    const eventChanges: FlagChangeEvent['data']['changes'] = {};
    for (const c of diffFields(contentOf(previous), contentOf(after))) eventChanges[c.field] = { from: c.oldValue, to: c.newValue };
    events.push({
      id: newId('evt'),
      event: 'flag.toggled',
      timestamp: row.changed_at,
      data: { flagKey: after.key, projectId: after.projectId, serviceId: after.serviceId, environment: after.environment, changes: eventChanges },
      flag: after,
      actor: actor.name,
      actorUserId: actor.userId,
    });
  }

  await tx`
    INSERT INTO flag_versions (id, flag_id, project_id, service_id, environment, flag_key, version, change_type, snapshot, actor, user_id, created_at)
    SELECT v->>'id', v->'flag'->>'id', v->'flag'->>'projectId', v->'flag'->>'serviceId', v->'flag'->>'environment', v->'flag'->>'key',
           (v->'flag'->>'version')::int, v->>'changeType', v->'flag', v->>'actor', v->>'userId', clock_timestamp()
    FROM jsonb_array_elements(${tx.json(versions as never)}) AS v`;
  // Same columns and content as writeAudit (api/features/audit/writer.ts), one row per changed flag.
  await tx`
    INSERT INTO audit_logs (id, project_id, user_id, actor, action, resource_type, resource_id, resource_name,
                            before, after, changes, metadata, ip_address, user_agent)
    SELECT a->>'id', a->>'projectId', ${actor.userId}, ${actor.name}, 'flag.toggle', 'flag', a->>'resourceId', a->>'resourceName',
           a->'before', a->'after', a->'changes', a->'metadata', ${actor.ipAddress ?? null}, ${actor.userAgent?.slice(0, 512) ?? null}
    FROM jsonb_array_elements(${tx.json(audits as never)}) WITH ORDINALITY AS t(a, n) ORDER BY n`;
  // In key order, so the outbox sequence (and the bus) sees the batch in a stable order.
  await tx`
    INSERT INTO flag_outbox (id, project_id, service_id, environment, flag_key, event, payload)
    SELECT e->>'id', e->'data'->>'projectId', e->'data'->>'serviceId', e->'data'->>'environment', e->'data'->>'flagKey', e->>'event', e
    FROM jsonb_array_elements(${tx.json(events as never)}) WITH ORDINALITY AS t(e, n) ORDER BY n`;
  return { flags, changed: written.length };
}

function contentOf(flag: FlagRecord): Record<string, unknown> {
  const content: Record<string, unknown> = {};
  for (const field of FLAG_CONTENT_FIELDS) content[field] = flag[field];
  return content;
}

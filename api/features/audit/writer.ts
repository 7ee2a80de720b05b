import type { Principal } from '../../auth/principal';
import { newId } from '../../infra/ids';
import type { TransactionSql } from '../../infra/postgres';

export const AUDIT_ACTIONS = [
  'flag.create', 'flag.update', 'flag.delete', 'flag.toggle',
  'service.create', 'service.update', 'service.delete',
  'member.add', 'member.remove', 'member.role_change',
  'invitation.create', 'invitation.accept', 'invitation.cancel',
  'token.create', 'token.update', 'token.revoke',
] as const;
export type AuditAction = (typeof AUDIT_ACTIONS)[number] | `${string}.${string}`;
export type AuditResourceType = 'flag' | 'service' | 'project' | 'member' | 'invitation' | 'token' | (string & {});

/** Who did it, as recorded: a user, a token, `public-demo`, `trigger:<name>`, `system:<why>`. */
export interface AuditActor {
  /** Display name stored in `actor`. */
  name: string;
  userId: string | null;
  ipAddress?: string;
  userAgent?: string;
}

export interface AuditEntry {
  projectId: string;
  action: AuditAction;
  resourceType: AuditResourceType;
  resourceId: string;
  resourceName?: string | null;
  before?: unknown;
  after?: unknown;
  metadata?: Record<string, unknown>;
}

export interface FieldChange {
  field: string;
  oldValue: unknown;
  newValue: unknown;
}

/** The fields whose values differ between two records (deep compare through JSON). */
export function diffFields(before: Record<string, unknown> | null | undefined, after: Record<string, unknown> | null | undefined, ignore: string[] = ['updatedAt', 'version']): FieldChange[] {
  const keys = new Set([...Object.keys(before ?? {}), ...Object.keys(after ?? {})]);
  const changes: FieldChange[] = [];
  for (const field of keys) {
    if (ignore.includes(field)) continue;
    const oldValue = before?.[field];
    const newValue = after?.[field];
    if (oldValue !== newValue && JSON.stringify(oldValue) !== JSON.stringify(newValue)) changes.push({ field, oldValue: oldValue ?? null, newValue: newValue ?? null });
  }
  return changes;
}

export function actorFromPrincipal(p: Principal, client: { ip?: string; userAgent?: string } = {}): AuditActor {
  const base = { ipAddress: client.ip, userAgent: client.userAgent };
  switch (p.type) {
    case 'session':
      return { name: p.user.email, userId: p.user.id, ...base };
    case 'personal_access_token':
      // A connector token's changes are attributed to its OAuth connection
      // (docs/api-reference.md#connector-tokens).
      if (p.connection) return { name: `mcp:${p.connection.id}`, userId: p.user.id, ...base };
      return { name: `${p.user.email} (personal token ${p.tokenId})`, userId: p.user.id, ...base };
    case 'project_api_token':
      return { name: `token:${p.tokenId}`, userId: p.createdBy, ...base };
    default:
      return { name: 'anonymous', userId: null, ...base };
  }
}

/** Writes one audit entry inside the caller's transaction, so it commits with the change. */
export async function writeAudit(tx: TransactionSql, actor: AuditActor, entry: AuditEntry): Promise<string> {
  const [id] = await writeAuditEntries(tx, actor, [entry]);
  return id;
}

/**
 * Writes audit entries of one actor inside the caller's transaction, in one statement whatever
 * their number, in the given order. `changes` is the field diff of `before` and `after`.
 */
export async function writeAuditEntries(tx: TransactionSql, actor: AuditActor, entries: AuditEntry[]): Promise<string[]> {
  if (!entries.length) return [];
  const rows = entries.map((entry) => {
    const before = (entry.before ?? null) as Record<string, unknown> | null;
    const after = (entry.after ?? null) as Record<string, unknown> | null;
    return {
      id: newId('aud'),
      projectId: entry.projectId,
      action: entry.action,
      resourceType: entry.resourceType,
      resourceId: entry.resourceId,
      resourceName: entry.resourceName ?? null,
      before,
      after,
      changes: diffFields(before, after),
      metadata: entry.metadata ?? {},
    };
  });
  await tx`
    INSERT INTO audit_logs (id, project_id, user_id, actor, action, resource_type, resource_id, resource_name,
                            before, after, changes, metadata, ip_address, user_agent)
    SELECT a->>'id', a->>'projectId', ${actor.userId}, ${actor.name}, a->>'action', a->>'resourceType', a->>'resourceId', a->>'resourceName',
           NULLIF(a->'before', 'null'::jsonb), NULLIF(a->'after', 'null'::jsonb), a->'changes', a->'metadata',
           ${actor.ipAddress ?? null}, ${actor.userAgent?.slice(0, 512) ?? null}
    FROM jsonb_array_elements(${tx.json(rows as never)}) WITH ORDINALITY AS t(a, n) ORDER BY n`;
  return rows.map((r) => r.id);
}

/** The audit log as a dependency: services take it in their constructor, tests pass a fake. */
export interface AuditLog {
  writeMany(tx: TransactionSql, actor: AuditActor, entries: AuditEntry[]): Promise<string[]>;
}

/** The audit log in Postgres (audit_logs), written in the caller's transaction. */
export class AuditWriter implements AuditLog {
  writeMany(tx: TransactionSql, actor: AuditActor, entries: AuditEntry[]): Promise<string[]> {
    return writeAuditEntries(tx, actor, entries);
  }
}

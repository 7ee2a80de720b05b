import { z } from 'zod';
import type { Queryable } from '../../infra/postgres';

export const ACTOR_KINDS = ['user', 'personal_token', 'connector', 'token', 'canary', 'trigger', 'guardrail', 'experiment', 'schedule', 'system', 'demo', 'anonymous'] as const;
export type ActorKind = (typeof ACTOR_KINDS)[number];

/** Who acted, in words (docs/api-reference.md#audit-log): resolved when read, so renamed tokens and users show their current names. */
export const ActorDisplaySchema = z.object({
  kind: z.enum(ACTOR_KINDS),
  name: z.string().describe('What to show: a person, a token, "Canary of <flagKey> (<environment>)", a readable phrase for system actors'),
  id: z.string().optional().describe('The acting record: user, token, connection, canary pipeline, experiment or change request id'),
  email: z.string().optional().describe("The acting person's e-mail (users, personal and connector tokens)"),
  status: z.enum(['revoked', 'deleted']).optional().describe('The token or record is gone or no longer valid'),
});
export type ActorDisplay = z.infer<typeof ActorDisplaySchema>;

/** What an actor string (as audit/writer.ts and the flag versions record it) names, before any lookup. */
interface ParsedActor {
  kind: ActorKind;
  /** The record to look up (user, token, connection, pipeline, experiment, change request). */
  ref?: string;
  /** The recorded text, the fallback when nothing is found. */
  label: string;
}

const PERSONAL_TOKEN = /^(.*) \(personal token ([^)]+)\)$/;
const PREFIXED: Record<string, ActorKind> = { token: 'token', canary: 'canary', trigger: 'trigger', bandit: 'experiment', schedule: 'schedule', mcp: 'connector' };
const SYSTEM_PHRASES: Record<string, { kind: ActorKind; name: string }> = {
  guardrail: { kind: 'guardrail', name: 'Guardrail (automatic rollback)' },
  'refresh-token-reuse': { kind: 'system', name: 'Token reuse protection' },
  'demo-seed': { kind: 'system', name: 'Demo data set-up' },
  'invitation-expiry': { kind: 'system', name: 'Invitation expiry' },
};

export function parseActor(actor: string, userId: string | null): ParsedActor {
  if (actor === 'public-demo') return { kind: 'demo', label: 'Public demo visitor' };
  if (actor === 'anonymous') return { kind: 'anonymous', label: 'Anonymous' };
  if (actor === 'system') return { kind: 'system', label: 'System' };
  const personal = PERSONAL_TOKEN.exec(actor);
  if (personal && userId) return { kind: 'personal_token', ref: personal[2], label: personal[1] };
  const colon = actor.indexOf(':');
  const prefix = colon > 0 ? actor.slice(0, colon) : '';
  const rest = actor.slice(colon + 1);
  if (prefix === 'system') return SYSTEM_PHRASES[rest] ? { ...SYSTEM_PHRASES[rest], label: SYSTEM_PHRASES[rest].name } : { kind: 'system', label: `System (${rest.replace(/-/g, ' ')})` };
  if (PREFIXED[prefix]) return { kind: PREFIXED[prefix], ref: rest, label: rest };
  // A session user's entries record their e-mail and id.
  return { kind: 'user', ref: userId ?? undefined, label: actor };
}

const actorKey = (actor: string, userId: string | null) => `${actor}\u0000${userId ?? ''}`;

interface Lookups {
  users: Map<string, { name: string; email: string }>;
  tokens: Map<string, { name: string; revoked: boolean }>;
  personalTokens: Map<string, { name: string; revoked: boolean; userId: string }>;
  connectors: Map<string, { client: string; revoked: boolean }>;
  canaries: Map<string, { flagKey: string; environment: string }>;
  experiments: Map<string, { name: string }>;
  schedules: Map<string, { title: string }>;
}

function display(parsed: ParsedActor, userId: string | null, found: Lookups): ActorDisplay {
  const { kind, ref, label } = parsed;
  const user = userId ? found.users.get(userId) : undefined;
  const person = user ? { name: user.name, email: user.email } : undefined;
  switch (kind) {
    case 'user':
      return person ? { kind, id: ref, ...person } : { kind, id: ref, name: label, ...(ref ? { status: 'deleted' } : {}) };
    case 'personal_token': {
      // Only the acting user's own token names them (the recorded text could claim any id).
      const owned = found.personalTokens.get(ref!);
      const token = owned?.userId === userId ? owned : undefined;
      const who = person?.name ?? label;
      if (!token) return { kind, id: ref, name: `${who} (deleted personal token)`, email: person?.email, status: 'deleted' };
      return { kind, id: ref, name: `${who} via personal token “${token.name}”${token.revoked ? ' (revoked)' : ''}`, email: person?.email, ...(token.revoked ? { status: 'revoked' } : {}) };
    }
    case 'connector': {
      const connection = found.connectors.get(ref!);
      const who = person?.name ?? 'Someone';
      if (!connection) return { kind, id: ref, name: `${who} via a deleted connector`, email: person?.email, status: 'deleted' };
      return { kind, id: ref, name: `${who} via ${connection.client}${connection.revoked ? ' (revoked)' : ''}`, email: person?.email, ...(connection.revoked ? { status: 'revoked' } : {}) };
    }
    case 'token': {
      const token = found.tokens.get(ref!);
      if (!token) return { kind, id: ref, name: 'Deleted API token', status: 'deleted' };
      return { kind, id: ref, name: `API token “${token.name}”${token.revoked ? ' (revoked)' : ''}`, ...(token.revoked ? { status: 'revoked' } : {}) };
    }
    case 'canary': {
      const canary = found.canaries.get(ref!);
      return canary ? { kind, id: ref, name: `Canary of ${canary.flagKey} (${canary.environment})` } : { kind, id: ref, name: 'Deleted canary', status: 'deleted' };
    }
    case 'experiment': {
      const experiment = found.experiments.get(ref!);
      return experiment ? { kind, id: ref, name: `Experiment “${experiment.name}”` } : { kind, id: ref, name: 'Deleted experiment', status: 'deleted' };
    }
    case 'schedule': {
      const request = found.schedules.get(ref!);
      return request ? { kind, id: ref, name: `Scheduled change request “${request.title}”` } : { kind, id: ref, name: 'Scheduled change request (deleted)', status: 'deleted' };
    }
    case 'trigger':
      return { kind, name: `Trigger “${label}”` };
    default:
      return { kind, name: label };
  }
}

/**
 * Names the actors of a page of audit entries or flag versions: one query per kind of actor
 * present, whatever the number of rows. Returns a lookup by the recorded actor and user id.
 */
export async function resolveActors(db: Queryable, rows: readonly { actor: string; userId: string | null }[]): Promise<(actor: string, userId: string | null) => ActorDisplay> {
  const parsed = new Map(rows.map((r) => [actorKey(r.actor, r.userId), { ...r, parsed: parseActor(r.actor, r.userId) }]));
  const refs = (kind: ActorKind) => [...new Set([...parsed.values()].filter((p) => p.parsed.kind === kind).map((p) => p.parsed.ref!))];
  const userIds = [...new Set([...parsed.values()].flatMap((p) => (p.userId && ['user', 'personal_token', 'connector'].includes(p.parsed.kind) ? [p.userId] : [])))];
  const query = async <T>(ids: string[], run: (ids: string[]) => Promise<T[]>): Promise<T[]> => (ids.length ? run(ids) : []);
  const [users, tokens, personalTokens, connectors, canaries, experiments, schedules] = await Promise.all([
    query(userIds, (ids) => db<{ id: string; name: string; email: string }[]>`SELECT id, name, email FROM users WHERE id = ANY(${ids})`),
    query(refs('token'), (ids) => db<{ id: string; name: string; revoked: boolean }[]>`SELECT id, name, revoked_at IS NOT NULL AS revoked FROM project_tokens WHERE id = ANY(${ids})`),
    query(refs('personal_token'), (ids) => db<{ id: string; name: string; revoked: boolean; userId: string }[]>`SELECT id, name, revoked_at IS NOT NULL AS revoked, user_id AS "userId" FROM personal_tokens WHERE id = ANY(${ids})`),
    query(refs('connector'), (ids) => db<{ id: string; client: string; revoked: boolean }[]>`
      SELECT c.id, k.client_name AS client, c.revoked_at IS NOT NULL AS revoked FROM oauth_connections c JOIN oauth_clients k ON k.id = c.client_id WHERE c.id = ANY(${ids})`),
    query(refs('canary'), (ids) => db<{ id: string; flagKey: string; environment: string }[]>`SELECT id, flag_key AS "flagKey", environment FROM canary_pipelines WHERE id = ANY(${ids})`),
    query(refs('experiment'), (ids) => db<{ id: string; name: string }[]>`SELECT id, name FROM bandit_experiments WHERE id = ANY(${ids})`),
    query(refs('schedule'), (ids) => db<{ id: string; title: string }[]>`SELECT id, title FROM change_requests WHERE id = ANY(${ids})`),
  ]);
  const byId = <T extends { id: string }>(list: T[]) => new Map(list.map((row) => [row.id, row]));
  const found: Lookups = {
    users: byId(users),
    tokens: byId(tokens),
    personalTokens: byId(personalTokens),
    connectors: byId(connectors),
    canaries: byId(canaries),
    experiments: byId(experiments),
    schedules: byId(schedules),
  };
  const displays = new Map([...parsed].map(([key, p]) => [key, display(p.parsed, p.userId, found)]));
  return (actor, userId) => displays.get(actorKey(actor, userId)) ?? display(parseActor(actor, userId), userId, found);
}

import { z } from 'zod';
import { TOKEN_SCOPES } from '../../auth/jwt';
import type { Environment } from '../../domain/environments';
import { TokenBindingSchema } from '../../domain/token-binding';
import type { TokenScope } from '../../auth/principal';

/** `fgr_` + 64 lowercase hex (32 random bytes), like personal tokens. */
export const OPAQUE_TOKEN_PATTERN = /^fgr_[0-9a-f]{64}$/;
export const OPAQUE_TOKEN_PREFIX = 'fgr_';

export interface ProjectTokenRow {
  id: string;
  project_id: string;
  name: string;
  token_type: 'opaque' | 'jwt';
  secret_hash: string | null;
  scopes: TokenScope[];
  expires_at: Date | null;
  created_by: string | null;
  created_at: Date;
  last_used_at: Date | null;
  revoked_at: Date | null;
  scope_service_id: string | null;
  scope_environment: Environment | null;
}

const Permissions = z.object({ read: z.boolean(), write: z.boolean(), delete: z.boolean() });

/** Token records (docs/api-reference.md#project-api-tokens); never the secret or its hash. */
export const ProjectTokenSchema = z.object({
  id: z.string(),
  projectId: z.string(),
  name: z.string(),
  tokenType: z.enum(['opaque', 'jwt']),
  permissions: Permissions.optional().describe('opaque tokens'),
  scopes: z.array(z.enum(TOKEN_SCOPES)).optional().describe('JWT tokens'),
  expiresAt: z.string().nullable().describe('opaque: the expiry given at creation; JWT: when the current refresh token expires'),
  createdAt: z.string(),
  createdBy: z.string().nullable(),
  lastUsedAt: z.string().nullable().optional().describe('opaque tokens, to the minute'),
  scope: TokenBindingSchema.nullable(),
});
export type ProjectTokenRecord = z.infer<typeof ProjectTokenSchema>;

export const TokenPairSchema = z.object({
  accessToken: z.string(),
  refreshToken: z.string(),
  accessTokenExpiresAt: z.string(),
  refreshTokenExpiresAt: z.string(),
});
export type TokenPair = z.infer<typeof TokenPairSchema>;

const BOUND_READ_ONLY = 'a token bound to a service and environment is read-only: grant read only';

export const CreateTokenBody = z
  .object({
    name: z.string().trim().min(1).max(100),
    tokenType: z.enum(['opaque', 'jwt']).optional().describe('inferred: `scopes` makes a JWT, `permissions` an opaque token'),
    permissions: Permissions.partial().strict().optional(),
    expiresAt: z.string().datetime({ offset: true }).optional(),
    scopes: z.array(z.enum(TOKEN_SCOPES)).min(1).max(TOKEN_SCOPES.length).optional(),
    scope: TokenBindingSchema.optional(),
  })
  .strict()
  .superRefine((b, ctx) => {
    const type = b.tokenType ?? (b.scopes ? 'jwt' : 'opaque');
    if (type === 'jwt') {
      if (!b.scopes) ctx.addIssue({ code: 'custom', path: ['scopes'], message: 'JWT tokens need at least one scope' });
      else if (new Set(b.scopes).size !== b.scopes.length) ctx.addIssue({ code: 'custom', path: ['scopes'], message: 'scopes must not repeat' });
      if (b.permissions) ctx.addIssue({ code: 'custom', path: ['permissions'], message: 'JWT tokens take `scopes`, not `permissions`' });
      if (b.expiresAt) ctx.addIssue({ code: 'custom', path: ['expiresAt'], message: 'JWT tokens have fixed lifetimes (access 24 h, refresh 30 d)' });
      if (b.scope && b.scopes && (b.scopes.length !== 1 || b.scopes[0] !== 'read')) ctx.addIssue({ code: 'custom', path: ['scopes'], message: BOUND_READ_ONLY });
      return;
    }
    if (b.scopes) ctx.addIssue({ code: 'custom', path: ['scopes'], message: 'opaque tokens take `permissions`, not `scopes`' });
    if (!b.permissions || !(b.permissions.read || b.permissions.write || b.permissions.delete)) {
      ctx.addIssue({ code: 'custom', path: ['permissions'], message: 'grant at least one of read, write, delete' });
    }
    if (b.scope && b.permissions && (b.permissions.write || b.permissions.delete)) ctx.addIssue({ code: 'custom', path: ['permissions'], message: BOUND_READ_ONLY });
    if (b.expiresAt && Date.parse(b.expiresAt) <= Date.now()) ctx.addIssue({ code: 'custom', path: ['expiresAt'], message: 'must be in the future' });
  });
export type CreateTokenInput = z.infer<typeof CreateTokenBody>;

export function toTokenRecord(row: ProjectTokenRow): ProjectTokenRecord {
  const base = {
    id: row.id,
    projectId: row.project_id,
    name: row.name,
    tokenType: row.token_type,
    expiresAt: row.expires_at?.toISOString() ?? null,
    createdAt: row.created_at.toISOString(),
    createdBy: row.created_by,
    scope: bindingOf(row),
  };
  if (row.token_type === 'jwt') return { ...base, scopes: row.scopes };
  return {
    ...base,
    permissions: { read: row.scopes.includes('read'), write: row.scopes.includes('write'), delete: row.scopes.includes('delete') },
    lastUsedAt: row.last_used_at?.toISOString() ?? null,
  };
}

/** The binding stored on a token row, or null for an unbound token. */
export function bindingOf(row: Pick<ProjectTokenRow, 'scope_service_id' | 'scope_environment'>): { serviceId: string; environment: Environment } | null {
  return row.scope_service_id !== null && row.scope_environment !== null ? { serviceId: row.scope_service_id, environment: row.scope_environment } : null;
}

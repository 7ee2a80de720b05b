import { z } from 'zod';
import type { PersonalTokenTier } from '../../auth/principal';

/** `fgp_` + 64 lowercase hex (32 random bytes) (docs/api-reference.md#personal-access-tokens). */
export const PERSONAL_TOKEN_PATTERN = /^fgp_[0-9a-f]{64}$/;
export const PERSONAL_TOKEN_PREFIX = 'fgp_';
export const EXPIRY_DAYS = [7, 30, 90, 180, 365] as const;
export const DEFAULT_EXPIRY_DAYS = 90;
/** At most 20 active (neither revoked nor expired) tokens per user (docs/limits.md). */
export const MAX_ACTIVE_TOKENS = 20;

export interface PersonalTokenRow {
  id: string;
  user_id: string;
  name: string;
  tier: PersonalTokenTier;
  allow_owner_actions: boolean;
  secret_hash: string;
  last_four: string;
  expires_in_days: number;
  expires_at: Date;
  created_at: Date;
  last_used_at: Date | null;
  revoked_at: Date | null;
  rotated_from: string | null;
}

const ExpiresInDays = z
  .number()
  .int()
  .refine((d) => (EXPIRY_DAYS as readonly number[]).includes(d), { message: `must be one of ${EXPIRY_DAYS.join(', ')}` });

export const CreatePersonalTokenBody = z
  .object({
    name: z.string().trim().min(1).max(100),
    tier: z.enum(['read', 'write', 'admin']),
    expiresInDays: ExpiresInDays.default(DEFAULT_EXPIRY_DAYS),
    allowOwnerActions: z.boolean().default(false),
  })
  .strict()
  .superRefine((b, ctx) => {
    if (b.allowOwnerActions && b.tier !== 'admin') {
      ctx.addIssue({ code: 'custom', path: ['allowOwnerActions'], message: 'owner actions are available only on the admin tier' });
    }
  });
export type CreatePersonalTokenInput = z.infer<typeof CreatePersonalTokenBody>;

export const RotatePersonalTokenBody = z.object({ expiresInDays: ExpiresInDays.optional() }).strict();

/**
 * A personal token as listed: never the secret or its hash
 * (docs/api-reference.md#personal-access-tokens).
 */
export const PersonalTokenSchema = z.object({
  id: z.string(),
  name: z.string(),
  tier: z.enum(['read', 'write', 'admin']),
  allowOwnerActions: z.boolean(),
  lastFour: z.string(),
  expiresInDays: z.number(),
  expiresAt: z.string(),
  expired: z.boolean(),
  createdAt: z.string(),
  lastUsedAt: z.string().nullable(),
  rotatedFrom: z.string().nullable(),
});
export type PersonalTokenRecord = z.infer<typeof PersonalTokenSchema>;

export function toPersonalTokenRecord(row: PersonalTokenRow, now = Date.now()): PersonalTokenRecord {
  return {
    id: row.id,
    name: row.name,
    tier: row.tier,
    allowOwnerActions: row.allow_owner_actions,
    lastFour: row.last_four,
    expiresInDays: row.expires_in_days,
    expiresAt: row.expires_at.toISOString(),
    expired: row.expires_at.getTime() <= now,
    createdAt: row.created_at.toISOString(),
    lastUsedAt: row.last_used_at?.toISOString() ?? null,
    rotatedFrom: row.rotated_from,
  };
}

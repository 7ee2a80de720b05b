import { z } from 'zod';
import type { Principal } from '../../auth/principal';

/**
 * Input fields shared by projects, services, members and invitations. Postgres refuses NUL
 * characters in text, so every string is checked here and bad input is a 400, never a 500.
 */
const noNul = (s: string) => !s.includes('\u0000');
const NUL_MESSAGE = 'must not contain NUL characters';

export const text = (max: number) => z.string().max(max).refine(noNul, NUL_MESSAGE);

/** Path parameters and foreign ids: opaque strings. */
export const idSchema = z.string().min(1).max(128).refine(noNul, NUL_MESSAGE);

export const SLUG_PATTERN = /^[a-z0-9]+(?:-[a-z0-9]+)*$/;
export const SLUG_MAX = 64;
export const slugSchema = z
  .string()
  .min(1)
  .max(SLUG_MAX)
  .regex(SLUG_PATTERN, 'must be lowercase letters and digits in groups separated by single hyphens');

export const nameSchema = z.string().trim().min(1).max(200).refine(noNul, NUL_MESSAGE);

/** A flag key as routes take it (path or query); the flag store checks the key's own pattern. */
export const flagKeySchema = z.string().min(1).max(256).refine(noNul, NUL_MESSAGE);
export const FlagKeyParams = z.object({ key: flagKeySchema });

/** A URL we will call (webhooks, alert channels, export); the SSRF guard judges its address. */
export const targetUrlSchema = z.string().max(2048).url().refine(noNul, NUL_MESSAGE);
/** An HMAC-SHA256 signing key given by the user (webhooks, alert channels, export). */
export const signingSecretSchema = z.string().min(1).max(512).refine(noNul, NUL_MESSAGE);
export const descriptionSchema = text(2000);
export const tagsSchema = z
  .array(z.string().trim().min(1).max(64).refine(noNul, NUL_MESSAGE))
  .max(50)
  .transform((tags) => [...new Set(tags)]);

/** `My Service Ünïcode!` -> `my-service-unicode`; empty when the name has no letters or digits. */
export function deriveSlug(name: string): string {
  return name
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, SLUG_MAX)
    .replace(/-+$/, '');
}

/**
 * `limit` (docs/limits.md): max 100 (a larger value is clamped, and the response says so), default
 * 50.
 */
export const limitSchema = z.coerce.number().int().min(1).transform((n) => Math.min(n, 100)).default(50);
export const offsetSchema = z.coerce.number().int().min(0).max(1_000_000).default(0);

/** What a mutation needs to know about its caller for the audit trail. */
export interface Caller {
  principal: Principal;
  ip: string;
  userAgent: string;
}

export const callerOf = (ctx: Caller): Caller => ({ principal: ctx.principal, ip: ctx.ip, userAgent: ctx.userAgent });

/** A PATCH body must change something. */
export const nonEmptyPatch = <T extends z.ZodRawShape>(shape: T) =>
  z
    .object(shape)
    .strict()
    .refine((patch) => Object.values(patch).some((v) => v !== undefined), { message: 'Send at least one field to change' });

import { randomBytes, timingSafeEqual } from 'node:crypto';
import type { CredentialCache } from '../../auth/credential-cache';
import type { PersonalTokenPrincipal, UserRecord } from '../../auth/principal';
import { badRequest, conflict, HttpError, notFound } from '../../http/errors';
import { newId, sha256Hex } from '../../infra/ids';
import type { Logger } from '../../infra/logger';
import type { Sql } from '../../infra/postgres';
import type { PersonalTokenStore } from './store';
import {
  MAX_ACTIVE_TOKENS,
  PERSONAL_TOKEN_PATTERN,
  PERSONAL_TOKEN_PREFIX,
  toPersonalTokenRecord,
  type CreatePersonalTokenInput,
  type PersonalTokenRecord,
  type PersonalTokenRow,
} from './types';

export interface CachedPersonalToken {
  principal: PersonalTokenPrincipal;
  expiresAtMs: number;
}

/**
 * Creating or rotating needs a verified address; listing and revoking do not
 * (docs/errors.md#permission-messages).
 */
export function emailNotVerified(): HttpError {
  return new HttpError(
    403,
    'Forbidden: verify your e-mail address before creating or rotating personal access tokens',
    { code: 'EMAIL_NOT_VERIFIED' },
    'Verify your email address first',
  );
}

const DAY_MS = 24 * 3600_000;

/**
 * Personal access tokens (docs/api-reference.md#personal-access-tokens). They act as their user;
 * what they may do is decided per request by the authorization module (api/auth/access.ts: the tier
 * and the user's live role), so losing access as a user removes it for every token at once.
 */
export class PersonalTokenService {
  constructor(
    private readonly deps: { sql: Sql; store: PersonalTokenStore; cache: CredentialCache<CachedPersonalToken>; logger: Logger },
  ) {}

  async list(user: UserRecord): Promise<PersonalTokenRecord[]> {
    const now = Date.now();
    return (await this.deps.store.listForUser(this.deps.sql, user.id)).map((row) => toPersonalTokenRecord(row, now));
  }

  async create(user: UserRecord, input: CreatePersonalTokenInput): Promise<{ token: PersonalTokenRecord; value: string }> {
    if (!user.emailVerified) throw emailNotVerified();
    const value = newSecret();
    const row = await this.deps.sql.begin(async (tx) => {
      await this.deps.store.lockUser(tx, user.id);
      if ((await this.deps.store.countActive(tx, user.id)) >= MAX_ACTIVE_TOKENS) return null;
      return this.deps.store.insert(tx, {
        id: newId('pat'),
        userId: user.id,
        name: input.name,
        tier: input.tier,
        allowOwnerActions: input.allowOwnerActions,
        secretHash: sha256Hex(value),
        lastFour: value.slice(-4),
        expiresInDays: input.expiresInDays,
        expiresAt: new Date(Date.now() + input.expiresInDays * DAY_MS),
        rotatedFrom: null,
      });
    });
    if (!row) throw conflict(`You already have ${MAX_ACTIVE_TOKENS} active personal access tokens; revoke one first`);
    return { token: toPersonalTokenRecord(row), value };
  }

  /** Replaces a live token: the old one is revoked, the new one keeps its settings and lifetime. */
  async rotate(user: UserRecord, id: string, expiresInDays?: number): Promise<{ token: PersonalTokenRecord; value: string; rotatedFrom: string }> {
    if (!user.emailVerified) throw emailNotVerified();
    const value = newSecret();
    const result = await this.deps.sql.begin(async (tx) => {
      const old = await this.deps.store.lockLive(tx, user.id, id);
      if (!old) return { kind: 'missing' as const };
      if (old.expires_at.getTime() <= Date.now()) return { kind: 'expired' as const };
      await this.deps.store.revoke(tx, user.id, id);
      const days = expiresInDays ?? old.expires_in_days;
      const created = await this.deps.store.insert(tx, {
        id: newId('pat'),
        userId: user.id,
        name: old.name,
        tier: old.tier,
        allowOwnerActions: old.allow_owner_actions,
        secretHash: sha256Hex(value),
        lastFour: value.slice(-4),
        expiresInDays: days,
        expiresAt: new Date(Date.now() + days * DAY_MS),
        rotatedFrom: old.id,
      });
      return { kind: 'rotated' as const, old, created };
    });
    if (result.kind === 'missing') throw notFound('Personal access token');
    if (result.kind === 'expired') throw badRequest('This personal access token has expired and cannot be rotated; create a new one');
    await this.deps.cache.evict(result.old.secret_hash);
    return { token: toPersonalTokenRecord(result.created), value, rotatedFrom: result.old.id };
  }

  async revoke(user: UserRecord, id: string): Promise<void> {
    const row: PersonalTokenRow | null = await this.deps.store.revoke(this.deps.sql, user.id, id);
    if (!row) throw notFound('Personal access token');
    await this.deps.cache.evict(row.secret_hash);
  }

  /** Bearer resolution for `fgp_` secrets: hash, look up (memoised for a few seconds), then expiry. */
  async resolve(secret: string): Promise<PersonalTokenPrincipal | null> {
    if (!PERSONAL_TOKEN_PATTERN.test(secret)) return null;
    const hash = sha256Hex(secret);
    let entry = this.deps.cache.get(hash);
    if (!entry) {
      const found = await this.deps.store.findLiveBySecretHash(this.deps.sql, hash);
      if (!found || !timingSafeEqual(Buffer.from(found.token.secret_hash), Buffer.from(hash))) return null;
      const { token, user } = found;
      entry = {
        principal: { type: 'personal_access_token', tokenId: token.id, user, tier: token.tier, allowOwnerActions: token.allow_owner_actions },
        expiresAtMs: token.expires_at.getTime(),
      };
      this.deps.cache.set(hash, entry);
      this.deps.store.touch(this.deps.sql, token.id).catch((error) => this.deps.logger.warn({ err: error }, 'could not record personal token use'));
    }
    if (entry.expiresAtMs <= Date.now()) return null;
    return entry.principal;
  }
}

function newSecret(): string {
  return PERSONAL_TOKEN_PREFIX + randomBytes(32).toString('hex');
}

import { z } from 'zod';
import type { JwtCodec } from '../../auth/jwt';
import type { ProjectTokenPrincipal } from '../../auth/principal';
import type { Logger } from '../../infra/logger';
import type { Queryable, Sql } from '../../infra/postgres';
import { EnvironmentSchema, type Environment } from '../../domain/environments';

/**
 * Channel tokens of the OFREP event stream (OFREP ADR-0008). A browser's EventSource
 * cannot send an Authorization header, so the stream URL carries its own credential: a JWT
 * signed with the service's key under its own audience, naming the API token it was issued for
 * (by id, never the secret), the service and the environment, and nothing else it could open.
 * It opens that one stream and is refused everywhere else (another audience is a 401 as a
 * bearer). Tokens are issued per window: every bulk answer of a window carries the same URL
 * (so the provider keeps its connection across context changes), and a token is valid for at
 * least one more window when it is handed out.
 */
export const CHANNEL_WINDOW_SECONDS = 300;
export const CHANNEL_TTL_SECONDS = 2 * CHANNEL_WINDOW_SECONDS;
const CHANNEL_SCOPE = 'ofrep:events';
const ISSUED_KEPT = 10_000;

/** What a channel token says: the API token it was issued for, and the one stream it opens. */
export interface ChannelClaims {
  tokenId: string;
  tokenType: ProjectTokenPrincipal['tokenType'];
  projectId: string;
  serviceId: string;
  environment: Environment;
}

const ChannelPayload = z.object({
  sub: z.string().min(1),
  tkt: z.enum(['opaque', 'jwt']),
  prj: z.string().min(1),
  svc: z.string().min(1),
  env: EnvironmentSchema,
  scope: z.literal(CHANNEL_SCOPE),
});

/** The window a token issued at `nowMs` belongs to (bulk ETags of stream callers change with it too). */
export function channelWindow(nowMs = Date.now()): number {
  return Math.floor(nowMs / 1000 / CHANNEL_WINDOW_SECONDS);
}

function channelKey(claims: ChannelClaims, window: number): string {
  return `${claims.tokenId}\u0000${claims.serviceId}\u0000${claims.environment}\u0000${window}`;
}

export class ChannelTokens {
  /** Signed tokens of the current windows, so a window's bulk answers sign once per (API token, service, environment). */
  private readonly issued = new Map<string, Promise<string>>();
  /** The same tokens once signed: most bulk answers of a window find theirs here and need no promise. */
  private readonly signed = new Map<string, string>();

  constructor(
    private readonly jwt: JwtCodec,
    private readonly audience: string,
  ) {}

  /**
   * Each API token's most recent signed token, by its id (the cached principal's own string,
   * whose hash V8 keeps): a token polling one service finds its channel token without building
   * and hashing the joined key on every answer.
   */
  private readonly lastSigned = new Map<string, { serviceId: string; environment: Environment; window: number; token: string }>();

  /** The window's token when it is signed already; undefined until `issue` has signed it. */
  issuedNow(claims: ChannelClaims, window: number): string | undefined {
    const last = this.lastSigned.get(claims.tokenId);
    if (last !== undefined && last.window === window && last.serviceId === claims.serviceId && last.environment === claims.environment) return last.token;
    const token = this.signed.get(channelKey(claims, window));
    if (token !== undefined) this.lastSigned.set(claims.tokenId, { serviceId: claims.serviceId, environment: claims.environment, window, token });
    return token;
  }

  issue(claims: ChannelClaims, window: number): Promise<string> {
    const key = channelKey(claims, window);
    const known = this.issued.get(key);
    if (known !== undefined) return known;
    const iat = window * CHANNEL_WINDOW_SECONDS;
    const payload = { sub: claims.tokenId, tkt: claims.tokenType, prj: claims.projectId, svc: claims.serviceId, env: claims.environment, scope: CHANNEL_SCOPE };
    const signing = this.jwt.signOther(this.audience, payload, iat, iat + CHANNEL_TTL_SECONDS);
    if (this.issued.size >= ISSUED_KEPT) {
      this.issued.clear();
      this.signed.clear();
      this.lastSigned.clear();
    }
    this.issued.set(key, signing);
    signing.then(
      (token) => {
        if (this.issued.get(key) === signing) this.signed.set(key, token);
      },
      () => this.issued.delete(key),
    );
    return signing;
  }

  /** The claims of a valid, unexpired channel token, or null. */
  async verify(token: string): Promise<ChannelClaims | null> {
    const payload = await this.jwt.verifyOther(token, this.audience);
    const parsed = ChannelPayload.safeParse(payload);
    if (!parsed.success) return null;
    const p = parsed.data;
    return { tokenId: p.sub, tokenType: p.tkt, projectId: p.prj, serviceId: p.svc, environment: p.env };
  }
}

/** The API token as the caller it was: what access and the stream caps decide with. */
export function issuerPrincipal(claims: ChannelClaims): ProjectTokenPrincipal {
  return { type: 'project_api_token', tokenId: claims.tokenId, tokenType: claims.tokenType, projectId: claims.projectId, scopes: ['read'], createdBy: null };
}

/** Which project API tokens are still valid (not revoked, not expired, their project not deleted). */
export class IssuerStore {
  async active(db: Queryable, tokenIds: readonly string[]): Promise<Set<string>> {
    if (tokenIds.length === 0) return new Set();
    const rows = await db<{ id: string }[]>`
      SELECT id FROM project_tokens
      WHERE id = ANY(${tokenIds as string[]}) AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now())`;
    return new Set(rows.map((r) => r.id));
  }
}

const SWEEP_BATCH = 1_000;

/**
 * Ends event streams whose API token stopped being valid. A stream opens only while its token
 * is valid (answers remembered for `intervalMs`); every `intervalMs` the tokens of all open
 * streams are checked again in one query, and the streams of a revoked one end. So a revoked
 * token's streams end within about `intervalMs` on every replica (docs/limits.md: about 10 s), and
 * its channel tokens open nothing more.
 */
export class IssuerWatch {
  private readonly known = new Map<string, { active: boolean; until: number }>();
  private readonly streams = new Map<string, Set<() => void>>();
  private timer?: NodeJS.Timeout;
  private sweeping?: Promise<void>;

  constructor(private readonly deps: { sql: Sql; store: IssuerStore; intervalMs: number; logger: Logger }) {}

  start(): void {
    this.timer = setInterval(() => {
      this.sweeping ??= this.sweep()
        .catch((error) => this.deps.logger.warn({ err: error }, 'checking the API tokens of OFREP event streams failed'))
        .finally(() => (this.sweeping = undefined));
    }, this.deps.intervalMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.sweeping;
  }

  async isActive(tokenId: string): Promise<boolean> {
    const hit = this.known.get(tokenId);
    if (hit !== undefined && hit.until > Date.now()) return hit.active;
    const active = (await this.deps.store.active(this.deps.sql, [tokenId])).has(tokenId);
    this.remember(tokenId, active);
    return active;
  }

  /** Registers an open stream of `tokenId`; `end` is called when the token is found revoked. Returns the unregister. */
  watch(tokenId: string, end: () => void): () => void {
    let set = this.streams.get(tokenId);
    if (set === undefined) {
      set = new Set();
      this.streams.set(tokenId, set);
    }
    set.add(end);
    return () => {
      const current = this.streams.get(tokenId);
      current?.delete(end);
      if (current?.size === 0) this.streams.delete(tokenId);
    };
  }

  private async sweep(): Promise<void> {
    const ids = [...this.streams.keys()];
    for (let i = 0; i < ids.length; i += SWEEP_BATCH) {
      const batch = ids.slice(i, i + SWEEP_BATCH);
      const active = await this.deps.store.active(this.deps.sql, batch);
      for (const id of batch) {
        this.remember(id, active.has(id));
        if (active.has(id)) continue;
        for (const end of [...(this.streams.get(id) ?? [])]) end();
      }
    }
  }

  private remember(tokenId: string, active: boolean) {
    if (this.known.size >= ISSUED_KEPT) this.known.clear();
    this.known.set(tokenId, { active, until: Date.now() + this.deps.intervalMs });
  }
}

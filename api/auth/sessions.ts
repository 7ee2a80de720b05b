import type { AccountStore } from '../features/accounts/store';
import type { Sql } from '../infra/postgres';
import { randomSecret, sha256Hex } from '../infra/ids';

export const SESSION_COOKIE = 'flags_session';

/** Server-side sessions: the cookie holds a random secret, the database only its hash. */
export class SessionManager {
  constructor(
    private readonly sql: Sql,
    private readonly store: AccountStore,
    private readonly ttlHours: number,
  ) {}

  async create(userId: string, ip: string, userAgent: string): Promise<{ cookieValue: string; expiresAt: Date }> {
    const cookieValue = randomSecret(32);
    const expiresAt = new Date(Date.now() + this.ttlHours * 3600_000);
    await this.store.createSession(this.sql, { idHash: sha256Hex(cookieValue), userId, csrfToken: randomSecret(24), ip, userAgent, expiresAt });
    return { cookieValue, expiresAt };
  }

  resolve(cookieValue: string) {
    return this.store.findSession(this.sql, sha256Hex(cookieValue));
  }

  revoke(cookieValue: string) {
    return this.store.deleteSession(this.sql, sha256Hex(cookieValue));
  }
}

import type { UserRecord } from '../../auth/principal';
import type { SessionManager } from '../../auth/sessions';
import { conflict, badRequest } from '../../http/errors';
import { newId, randomSecret, sha256Hex } from '../../infra/ids';
import type { Sql } from '../../infra/postgres';
import type { MailQueue } from '../../lib/mail/mail-queue';
import type { PasswordHasher } from './passwords';
import { DuplicateEmailError, type AccountStore } from './store';
import type { AuthThrottle, SendThrottle } from './throttle';

const VERIFICATION_TTL_MS = 48 * 3600_000;

export interface AccountServiceDeps {
  sql: Sql;
  store: AccountStore;
  sessions: SessionManager;
  mail: MailQueue;
  passwords: PasswordHasher;
  throttle: AuthThrottle;
  sends: SendThrottle;
  publicBaseUrl: string;
}

export class AccountService {
  /** Hashed once, compared against for unknown e-mails so timing does not reveal accounts. */
  private dummyHash?: Promise<string>;

  constructor(private readonly deps: AccountServiceDeps) {}

  async signup(input: { email: string; password: string; name: string }, client: { ip: string; userAgent: string }) {
    const passwordHash = await this.deps.passwords.hash(input.password);
    let user: UserRecord;
    try {
      user = await this.deps.sql.begin((tx) => this.deps.store.createUser(tx, { id: newId('usr'), orgId: newId('org'), email: input.email, name: input.name, passwordHash }));
    } catch (error) {
      if (error instanceof DuplicateEmailError) throw conflict('An account with this e-mail already exists');
      throw error;
    }
    await this.sendVerification(user);
    const session = await this.deps.sessions.create(user.id, client.ip, client.userAgent);
    return { user, session };
  }

  /** Bad credentials answer 401 and count towards the account's lockout (AuthThrottle). */
  async login(input: { email: string; password: string }, client: { ip: string; userAgent: string }) {
    return this.deps.throttle.signIn(input.email, async () => {
      const found = await this.deps.store.findByEmail(this.deps.sql, input.email);
      const ok = await this.deps.passwords.verify(input.password, found?.passwordHash ?? (await this.dummy()));
      if (!found || !ok) return null;
      const { passwordHash: _ignored, ...user } = found;
      const session = await this.deps.sessions.create(user.id, client.ip, client.userAgent);
      return { user, session };
    });
  }

  /** A new verification mail, counted per user and per address (SendThrottle); false when already verified. */
  async resendVerification(user: UserRecord): Promise<boolean> {
    if (user.emailVerified) return false;
    await this.deps.sends.consume(user.id, [{ id: user.email, shown: user.email }]);
    await this.sendVerification(user);
    return true;
  }

  private dummy(): Promise<string> {
    // A refused hash (hasher queue full) must not be remembered as the dummy for good.
    this.dummyHash ??= this.deps.passwords.hash(randomSecret(16)).catch((error) => {
      this.dummyHash = undefined;
      throw error;
    });
    return this.dummyHash;
  }

  async sendVerification(user: UserRecord) {
    const token = randomSecret(32);
    await this.deps.store.createVerification(this.deps.sql, {
      tokenHash: sha256Hex(token),
      userId: user.id,
      email: user.email,
      expiresAt: new Date(Date.now() + VERIFICATION_TTL_MS),
    });
    await this.deps.mail.send(
      {
        to: user.email,
        subject: 'Verify your e-mail address',
        text: `Hello ${user.name},\n\nconfirm your address by opening ${this.deps.publicBaseUrl}/verify-email?token=${token}\n(or POST the token to /api/auth/verify-email). The link is valid for 48 hours.`,
        token,
      },
      `verify-${sha256Hex(token).slice(0, 32)}`,
    );
  }

  async verifyEmail(token: string): Promise<UserRecord> {
    const user = await this.deps.sql.begin((tx) => this.deps.store.consumeVerification(tx, sha256Hex(token)));
    if (!user) throw badRequest('Verification token is invalid, expired or already used');
    return user;
  }
}

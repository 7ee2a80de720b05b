import type { UserRecord } from '../../auth/principal';
import type { SessionManager } from '../../auth/sessions';
import { conflict, unauthorized, badRequest } from '../../http/errors';
import { newId, randomSecret, sha256Hex } from '../../infra/ids';
import type { MailQueue } from '../mail/mail-queue';
import { hashPassword, verifyPassword } from './passwords';
import { DuplicateEmailError, type AccountStore } from './store';

const VERIFICATION_TTL_MS = 48 * 3600_000;

export interface AccountServiceDeps {
  store: AccountStore;
  sessions: SessionManager;
  mail: MailQueue;
  scryptCostLog2: number;
  publicBaseUrl: string;
}

export class AccountService {
  /** Hashed once, compared against for unknown e-mails so timing does not reveal accounts. */
  private dummyHash?: Promise<string>;

  constructor(private readonly deps: AccountServiceDeps) {}

  async signup(input: { email: string; password: string; name: string }, client: { ip: string; userAgent: string }) {
    const passwordHash = await hashPassword(input.password, this.deps.scryptCostLog2);
    let user: UserRecord;
    try {
      user = await this.deps.store.createUser({ id: newId('usr'), orgId: newId('org'), email: input.email, name: input.name, passwordHash });
    } catch (error) {
      if (error instanceof DuplicateEmailError) throw conflict('An account with this e-mail already exists');
      throw error;
    }
    await this.sendVerification(user);
    const session = await this.deps.sessions.create(user.id, client.ip, client.userAgent);
    return { user, session };
  }

  async login(input: { email: string; password: string }, client: { ip: string; userAgent: string }) {
    const found = await this.deps.store.findByEmail(input.email);
    this.dummyHash ??= hashPassword(randomSecret(16), this.deps.scryptCostLog2);
    const ok = await verifyPassword(input.password, found?.passwordHash ?? (await this.dummyHash));
    if (!found || !ok) throw unauthorized('Invalid e-mail or password');
    const { passwordHash: _ignored, ...user } = found;
    const session = await this.deps.sessions.create(user.id, client.ip, client.userAgent);
    return { user, session };
  }

  async sendVerification(user: UserRecord) {
    const token = randomSecret(32);
    await this.deps.store.createVerification({
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
    const user = await this.deps.store.consumeVerification(sha256Hex(token));
    if (!user) throw badRequest('Verification token is invalid, expired or already used');
    return user;
  }
}

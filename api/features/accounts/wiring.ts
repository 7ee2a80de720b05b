import { SessionManager } from '../../auth/sessions';
import type { Config } from '../../config';
import type { ListenerRoutes } from '../../http/route';
import type { Cache } from '../../infra/cache';
import type { Logger } from '../../infra/logger';
import type { Sql } from '../../infra/postgres';
import type { MailQueue } from '../../lib/mail/mail-queue';
import { PasswordHasher } from './passwords';
import { accountRoutes } from './routes';
import { AccountService } from './service';
import { AccountStore } from './store';
import { AuthThrottle, SendThrottle } from './throttle';

const PURGE_INTERVAL_MS = 3600_000;

export interface AccountFeature {
  routes: ListenerRoutes;
  /** Dashboard sessions: the authenticator resolves session cookies through them. */
  sessions: SessionManager;
  /** Bounds mail and test alerts users can aim at any address (verification resends, alert channels). */
  sends: SendThrottle;
  stop(): Promise<void>;
}

/** Sign-up, sign-in, sessions and e-mail verification; expired sessions are purged hourly. */
export function createAccountFeature(deps: { config: Config; sql: Sql; cache: Cache; mail: MailQueue; publicBaseUrl: string; logger: Logger }): AccountFeature {
  const { config, sql, cache, logger } = deps;
  const store = new AccountStore();
  const sessions = new SessionManager(sql, store, config.SESSION_TTL_HOURS);
  const passwords = new PasswordHasher({ costLog2: config.SCRYPT_COST_LOG2, concurrency: config.SCRYPT_CONCURRENCY, maxQueue: config.SCRYPT_MAX_QUEUE });
  const throttle = new AuthThrottle(cache, {
    perIp: config.AUTH_RATE_LIMIT_PER_IP,
    ipWindowSeconds: config.AUTH_RATE_LIMIT_WINDOW_SECONDS,
    threshold: config.AUTH_LOCKOUT_THRESHOLD,
    baseSeconds: config.AUTH_LOCKOUT_BASE_SECONDS,
    maxSeconds: config.AUTH_LOCKOUT_MAX_SECONDS,
  });
  const sends = new SendThrottle(cache, { perUser: config.SEND_LIMIT_PER_USER, perRecipient: config.SEND_LIMIT_PER_RECIPIENT, windowSeconds: config.SEND_LIMIT_WINDOW_SECONDS });
  const accounts = new AccountService({ sql, store, sessions, mail: deps.mail, passwords, throttle, sends, publicBaseUrl: deps.publicBaseUrl });
  const purge = setInterval(() => {
    store.purgeExpired(sql).catch((error) => logger.warn({ err: error }, 'purging expired sessions failed'));
  }, PURGE_INTERVAL_MS);
  purge.unref();
  return {
    routes: { control: accountRoutes({ accounts, sessions, throttle, sql, secureCookies: config.secureCookies, devMailbox: config.devMailbox }) },
    sessions,
    sends,
    async stop() {
      clearInterval(purge);
    },
  };
}

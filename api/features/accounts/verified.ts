import type { UserRecord } from '../../auth/principal';
import { HttpError } from '../../http/errors';

/**
 * Actions that reach other people (mail, alerts, joining projects) need a verified address:
 * 403 with `code: EMAIL_NOT_VERIFIED`, as for unverified personal-token creation
 * (docs/errors.md#codes).
 */
export function requireVerifiedEmail(user: UserRecord, action: string): void {
  if (user.emailVerified) return;
  throw new HttpError(403, `Forbidden: verify your e-mail address before ${action}`, { code: 'EMAIL_NOT_VERIFIED' }, 'Verify your email address first');
}

import type { UserRecord } from '../../auth/principal';
import { HttpError } from '../../http/errors';

/**
 * Actions that reach other people (mail, alerts, joining projects) need a verified address:
 * 403 in the spec's shape for unverified personal-token creation (section 7).
 */
export function requireVerifiedEmail(user: UserRecord, action: string): void {
  if (user.emailVerified) return;
  throw new HttpError(403, `Forbidden: verify your e-mail address before ${action}`, { code: 'EMAIL_NOT_VERIFIED' }, 'Verify your email address first');
}

import { z } from 'zod';

/**
 * Loopback hosts a CLI login may hand its token to (docs/api-reference.md#cli-login: only loopback
 * callbacks).
 */
const LOOPBACK_HOSTS = new Set(['127.0.0.1', 'localhost', '[::1]']);
export const MAX_CALLBACK_LENGTH = 2048;

/**
 * The CLI's callback: plain http on a loopback host with an explicit port, no credentials in it.
 * The browser posts the token there, so anything else would hand the token to another machine.
 */
export const CallbackSchema = z
  .string()
  .max(MAX_CALLBACK_LENGTH)
  .superRefine((value, ctx) => {
    const problem = loopbackProblem(value);
    if (problem) ctx.addIssue({ code: 'custom', message: problem });
  })
  .describe('http://127.0.0.1:<port>/..., http://localhost:<port>/... or http://[::1]:<port>/...');

/** Why `value` is not a loopback callback, or null when it is. */
export function loopbackProblem(value: string): string | null {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return 'must be an absolute URL';
  }
  if (url.protocol !== 'http:') return 'must use http: (a loopback listener of the CLI)';
  if (!LOOPBACK_HOSTS.has(url.hostname)) return 'must point at 127.0.0.1, localhost or [::1]';
  if (url.port === '') return 'must name the port of the CLI listener';
  if (url.username || url.password) return 'must not carry credentials';
  return null;
}

/** The CLI's random value, echoed back with the token so it knows the answer is for its request. */
export const StateSchema = z.string().regex(/^[A-Za-z0-9._~-]{16,256}$/, 'must be 16 to 256 URL-safe characters');

export const CliLoginQuery = z.object({ callback: CallbackSchema, state: StateSchema });

export const CliLoginBody = z
  .object({
    callback: CallbackSchema,
    state: StateSchema,
    projects: z.literal('all').describe('The only choice for now: a personal token acts across all projects of the user'),
    csrfToken: z.string().max(200).optional().describe('For HTML form posts, which cannot send the X-CSRF-Token header'),
  })
  .strict();
export type CliLoginRequest = z.infer<typeof CliLoginBody>;

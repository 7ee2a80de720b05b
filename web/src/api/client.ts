/**
 * The one way the console calls the API: openapi-fetch typed by schema.d.ts (generated from
 * /api/openapi.json), with what every call needs in one place:
 * - the session cookie goes along (same origin);
 * - mutations carry X-CSRF-Token (docs/api-reference.md#csrf: cookie-session POST/PATCH/PUT/DELETE
 *   need it; the token comes from GET /api/csrf-token and changes with the session);
 * - an error answer becomes a thrown ApiError built from the error envelope
 *   ({error, message, details: [{path, message}], code?}), whose message is fit to show;
 * - a 401 tells the shell the session is gone (it sends signed-in pages to sign-in).
 *
 *   const { projects } = await call(api.GET('/api/projects'));
 *   await call(api.POST('/api/services', { body: { projectId, name } }));
 */
import createClient, { type Middleware } from 'openapi-fetch';
import type { paths } from './schema';

export type { paths };

export interface FieldProblem {
  path: string;
  message: string;
}

/** An API error answer (or no answer at all: status 0). */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    /** The envelope's short error name ("Bad Request", "Conflict" ...). */
    readonly code: string,
    message: string,
    readonly details: FieldProblem[] = [],
    /** The envelope's machine-readable `code`, when it has one (APPROVAL_REQUIRED, CONFLICT; docs/errors.md#codes lists them). */
    readonly reason?: string,
  ) {
    super(message);
    this.name = 'ApiError';
  }

  /** The problem with one body field (`name` for `body.name`), for showing beside its input. */
  fieldError(field: string): string | undefined {
    return this.details.find((d) => d.path === `body.${field}` || d.path === field)?.message;
  }
}

/** Anything thrown while calling the API, as an ApiError (what the console shows). */
export function asApiError(caught: unknown): ApiError {
  return caught instanceof ApiError ? caught : new ApiError(0, 'Error', caught instanceof Error ? caught.message : String(caught));
}

const MUTATING = new Set(['POST', 'PATCH', 'PUT', 'DELETE']);
/** Answers that change the session, and with it the CSRF token. */
const SESSION_CHANGES = /^\/api\/auth\/(login|signup|logout)$/;

let csrfToken: Promise<string> | undefined;
let unauthorized: (() => void) | undefined;

/** The shell's reaction to a 401 (the session expired or was revoked elsewhere). */
export function onUnauthorized(handler: () => void): void {
  unauthorized = handler;
}

function fetchCsrfToken(): Promise<string> {
  csrfToken ??= fetch('/api/csrf-token', { credentials: 'same-origin', headers: { accept: 'application/json' } })
    .then(async (res) => {
      if (!res.ok) throw await errorOf(res);
      return ((await res.json()) as { token: string }).token;
    })
    .catch((error: unknown) => {
      csrfToken = undefined;
      throw error;
    });
  return csrfToken;
}

const sessionMiddleware: Middleware = {
  async onRequest({ request }) {
    if (MUTATING.has(request.method)) request.headers.set('X-CSRF-Token', await fetchCsrfToken());
    return request;
  },
  onResponse({ request, response }) {
    const path = new URL(request.url).pathname;
    // A refused mutation may carry a token of an older session (signed in again in another tab):
    // the next attempt fetches a fresh one.
    if (SESSION_CHANGES.test(path) || (response.status === 403 && MUTATING.has(request.method))) csrfToken = undefined;
    // The shell asks /api/users/me to learn whether anyone is signed in: that 401 is an answer.
    if (response.status === 401 && path !== '/api/users/me') unauthorized?.();
    return response;
  },
};

export const api = createClient<paths>({ baseUrl: '', credentials: 'same-origin', headers: { accept: 'application/json' } });
api.use(sessionMiddleware);

async function errorOf(response: Response): Promise<ApiError> {
  const body = await response.json().catch(() => undefined);
  return envelopeError(response.status, body);
}

function envelopeError(status: number, body: unknown): ApiError {
  const envelope = (body ?? {}) as { error?: unknown; message?: unknown; details?: unknown; code?: unknown };
  const message = typeof envelope.message === 'string' && envelope.message ? envelope.message : `The server answered ${status}`;
  const details = Array.isArray(envelope.details) ? (envelope.details as FieldProblem[]).filter((d) => typeof d?.message === 'string') : [];
  return new ApiError(status, typeof envelope.error === 'string' ? envelope.error : String(status), message, details, typeof envelope.code === 'string' ? envelope.code : undefined);
}

/**
 * Awaits an api.GET/POST/... call: its data, or a thrown ApiError. A call that never reached the
 * server throws ApiError status 0.
 */
export async function call<T>(request: Promise<{ data?: T; error?: unknown; response: Response }>): Promise<T> {
  let outcome: { data?: T; error?: unknown; response: Response };
  try {
    outcome = await request;
  } catch (error) {
    if (error instanceof ApiError) throw error;
    throw new ApiError(0, 'Network Error', 'Could not reach the server; check the connection and try again.');
  }
  if (!outcome.response.ok) throw envelopeError(outcome.response.status, outcome.error);
  return outcome.data as T;
}

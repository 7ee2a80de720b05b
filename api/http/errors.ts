import { STATUS_CODES } from 'node:http';

export interface FieldProblem {
  path: string;
  message: string;
}

/**
 * What went wrong, for code that reacts to an error: protocol adapters map it to their own
 * codes (OFREP errorCode, Connect codes) and never read the message. It stays internal: the
 * envelope is what docs/errors.md describes (a refusal that puts a `code` in the body,
 * EMAIL_NOT_VERIFIED, does it through `extra`).
 */
export type ErrorCode =
  | 'bad_request'
  | 'validation_failed'
  | 'malformed_json'
  | 'invalid_context'
  | 'unauthenticated'
  | 'forbidden'
  | 'personal_token_refused'
  | 'not_found'
  | 'conflict'
  | 'gone'
  | 'payload_too_large'
  | 'unsupported_media_type'
  | 'rate_limited'
  | 'client_error'
  | 'unavailable'
  | 'internal';

const STATUS_CODE: Partial<Record<number, ErrorCode>> = {
  400: 'bad_request',
  401: 'unauthenticated',
  403: 'forbidden',
  404: 'not_found',
  409: 'conflict',
  410: 'gone',
  413: 'payload_too_large',
  415: 'unsupported_media_type',
  429: 'rate_limited',
  503: 'unavailable',
};

/** The code an error of this status has unless its maker names a finer one. */
export function codeForStatus(status: number): ErrorCode {
  return STATUS_CODE[status] ?? (status >= 500 ? 'internal' : 'client_error');
}

/**
 * Every failure the API reports is an HttpError; the error middleware turns it into the
 * envelope `{error, message}` of docs/errors.md (plus `details` or other extra fields when given).
 */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly extra: Record<string, unknown> = {},
    /**
     * The envelope's short `error` text; the HTTP status text unless docs/errors.md fixes another.
     */
    readonly errorText: string = STATUS_CODES[status] ?? 'Error',
    /** The machine code adapters map (not part of the envelope). */
    readonly code: ErrorCode = codeForStatus(status),
  ) {
    super(message);
    this.name = 'HttpError';
  }

  toBody(): Record<string, unknown> {
    return { error: this.errorText, message: this.message, ...this.extra };
  }
}

export const badRequest = (message: string, details?: FieldProblem[]) =>
  new HttpError(400, message, details ? { details } : {}, undefined, details ? 'validation_failed' : 'bad_request');
/** The 400 of a request that does not match its schema, in one wording for every route and the lean path. */
export const validationFailed = (problems: FieldProblem[]) =>
  badRequest(`Validation failed: ${problems.map((p) => `${p.path}: ${p.message}`).join('; ')}`, problems);
export const malformedJson = () => new HttpError(400, 'Malformed JSON body', {}, undefined, 'malformed_json');
export const requestAborted = () => new HttpError(400, 'Request aborted');
export const unauthorized = (message = 'Authentication required') => new HttpError(401, message);
export const forbidden = (message: string, extra: Record<string, unknown> = {}) =>
  new HttpError(403, message.startsWith('Forbidden:') ? message : `Forbidden: ${message}`, extra);
export const notFound = (what = 'Resource') => new HttpError(404, `${what} not found`);
export const conflict = (message: string, extra: Record<string, unknown> = {}) => new HttpError(409, message, extra);
export const tooManyRequests = (message = 'Rate limit exceeded') => new HttpError(429, message);
export const payloadTooLarge = (limitBytes: number) =>
  new HttpError(413, `Request body exceeds the ${limitBytes} byte limit for this route`);
export const unsupportedMediaType = () => new HttpError(415, 'Content-Type must be application/json');
/** Compressed request bodies are refused: a few KB of gzip can inflate to the whole body limit. */
export const unsupportedEncoding = () => new HttpError(415, 'Unsupported body encoding: send the body uncompressed (no Content-Encoding)');
/**
 * The message and `error` text (docs/errors.md#permission-messages) for personal tokens on
 * evaluation and SDK routes.
 */
export const PERSONAL_TOKEN_REFUSAL = 'Forbidden: personal tokens cannot evaluate flags or call SDK endpoints; use a project API token';
export const personalTokenRefused = () => new HttpError(403, PERSONAL_TOKEN_REFUSAL, {}, 'FORBIDDEN', 'personal_token_refused');
export const serviceUnavailable = (message: string) => new HttpError(503, message);
/** A 429 or 503 that says when to come back: `retryAfter` seconds in the envelope and as the Retry-After header. */
export const retryLater = (status: 429 | 503, message: string, seconds: number) =>
  new HttpError(status, message, { retryAfter: Math.max(1, Math.ceil(seconds)) });

/** The store-level translation of driver errors into domain errors (unique violations etc.). */
export function isUniqueViolation(error: unknown): boolean {
  return typeof error === 'object' && error !== null && (error as { code?: string }).code === '23505';
}

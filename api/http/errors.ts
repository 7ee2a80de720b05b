import { STATUS_CODES } from 'node:http';

export interface FieldProblem {
  path: string;
  message: string;
}

/**
 * Every failure the API reports is an HttpError; the error middleware turns it into the
 * spec's envelope `{error, message}` (plus `details` or other extra fields when given).
 */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly extra: Record<string, unknown> = {},
    /** The envelope's short `error` text; the HTTP status text unless a spec row fixes another. */
    readonly errorText: string = STATUS_CODES[status] ?? 'Error',
  ) {
    super(message);
    this.name = 'HttpError';
  }

  toBody(): Record<string, unknown> {
    return { error: this.errorText, message: this.message, ...this.extra };
  }
}

export const badRequest = (message: string, details?: FieldProblem[]) =>
  new HttpError(400, message, details ? { details } : {});
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
export const serviceUnavailable = (message: string) => new HttpError(503, message);
/** A 429 or 503 that says when to come back: `retryAfter` seconds in the envelope and as the Retry-After header. */
export const retryLater = (status: 429 | 503, message: string, seconds: number) =>
  new HttpError(status, message, { retryAfter: Math.max(1, Math.ceil(seconds)) });

/** The store-level translation of driver errors into domain errors (unique violations etc.). */
export function isUniqueViolation(error: unknown): boolean {
  return typeof error === 'object' && error !== null && (error as { code?: string }).code === '23505';
}

import { randomBytes } from 'node:crypto';

const ACCEPTED = /^[A-Za-z0-9._-]{1,128}$/;

// UUID-shaped: 80 random bits per process, then a counter (unique, and cheaper than a random UUID per request).
const random = randomBytes(10).toString('hex');
const HEAD = `${random.slice(0, 8)}-${random.slice(8, 12)}-${random.slice(12, 16)}-${random.slice(16, 20)}-`;
let counter = 0;

/**
 * The request id of X-Request-Id: the caller's own when it is a plain token of at most 128
 * characters (so it can be traced end to end), else a new one. Express and the lean path both
 * take it from here.
 */
export function requestIdOf(incoming: string | string[] | undefined): string {
  if (typeof incoming === 'string' && ACCEPTED.test(incoming)) return incoming;
  return HEAD + (++counter).toString(16).padStart(12, '0');
}

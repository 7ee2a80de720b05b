import type { IncomingHttpHeaders } from 'node:http';
import { payloadTooLarge, unsupportedEncoding, unsupportedMediaType, type HttpError } from './errors';

const JSON_TYPE = /^application\/(?:[^;\s]+\+)?json\s*(?:;|$)/i;
const TEXT_PLAIN = /^text\/plain\s*(?:;|$)/i;

/**
 * What the headers of a request say about its JSON body, before a byte is read (Express routes
 * and the lean path): null when there is none, undefined when it may be read, or the refusal:
 * 415 for a type that is not JSON or a compressed body, 413 for a declared length over `limit`.
 * `textPlainJson` also reads JSON sent as text/plain (navigator.sendBeacon with a string, and
 * cross-origin posts that avoid a preflight).
 */
export function checkBodyHeaders(headers: IncomingHttpHeaders, limit: number, opts: { textPlainJson?: boolean } = {}): HttpError | null | undefined {
  const length = headers['content-length'];
  const declared = length === undefined ? undefined : Number(length);
  const chunked = headers['transfer-encoding'] !== undefined;
  if (!chunked && (declared === undefined || !(declared > 0))) return null;
  const type = headers['content-type'];
  if (type === undefined || !(JSON_TYPE.test(type) || (opts.textPlainJson && TEXT_PLAIN.test(type)))) return unsupportedMediaType();
  const encoding = headers['content-encoding'];
  if (encoding !== undefined && encoding !== '' && encoding.toLowerCase() !== 'identity') return unsupportedEncoding();
  if (declared !== undefined && declared > limit) return payloadTooLarge(limit);
  return undefined;
}

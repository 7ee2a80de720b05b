import { create, fromBinary, fromJson, toBinary, toJson, type DescMessage, type JsonValue, type MessageShape } from '@bufbuild/protobuf';
import express, { type Request, type Response } from 'express';
import { StatusSchema } from '../../gen/google/rpc/status_pb';
import { HttpError } from '../../http/errors';
import { KB } from '../../http/route';

/** The largest OTLP body, after gzip is undone (docs/limits.md#request-sizes). */
export const OTLP_BODY_LIMIT = 10 * 1024 * KB;

/** The two OTLP/HTTP encodings (docs/opentelemetry.md#requests); the answer uses the request's. */
export type OtlpEncoding = 'protobuf' | 'json';

/** google.rpc.Code of the Status an OTLP refusal carries. */
const RPC_CODE: Record<number, number> = { 400: 3, 413: 8, 415: 3 };

/** An OTLP request the route cannot take: answered with a google.rpc.Status (docs/opentelemetry.md#errors). */
export class OtlpRefusal extends Error {
  constructor(
    readonly status: 400 | 413 | 415,
    message: string,
  ) {
    super(message);
  }
}

/** The encoding a Content-Type names (parameters such as charset ignored), or a 415. */
export function encodingOf(contentType: string | undefined): OtlpEncoding {
  const type = (contentType ?? '').split(';')[0].trim().toLowerCase();
  if (type === 'application/x-protobuf') return 'protobuf';
  if (type === 'application/json') return 'json';
  throw new OtlpRefusal(415, 'Content-Type must be application/x-protobuf or application/json');
}

const readRaw = express.raw({ type: () => true, limit: OTLP_BODY_LIMIT, inflate: true });

/**
 * The body's bytes, gzip or deflate undone as OTLP exporters send them, at most OTLP_BODY_LIMIT
 * once inflated (a declared length over it is refused before a byte is read).
 */
export function readBody(req: Request, res: Response): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    readRaw(req, res, (err?: unknown) => {
      if (!err) return resolve(Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0));
      const e = err as { type?: string };
      if (e.type === 'entity.too.large') return reject(new OtlpRefusal(413, `The body is over ${OTLP_BODY_LIMIT} bytes once decompressed`));
      if (e.type === 'encoding.unsupported') return reject(new OtlpRefusal(415, 'Content-Encoding must be gzip, deflate or identity'));
      if (e.type === 'request.aborted') return reject(new HttpError(400, 'Request aborted'));
      reject(new OtlpRefusal(400, 'The body could not be decompressed'));
    });
  });
}

/**
 * Where OTLP's JSON encoding puts trace and span ids (hex, unlike protobuf JSON's base64), by
 * request: the list of records, and the id fields each holds (docs/opentelemetry.md#requests).
 */
export const HEX_ID_FIELDS = {
  traces: { resource: 'resourceSpans', scope: 'scopeSpans', records: 'spans', ids: ['traceId', 'spanId', 'parentSpanId'] },
  logs: { resource: 'resourceLogs', scope: 'scopeLogs', records: 'logRecords', ids: ['traceId', 'spanId'] },
} as const;

const HEX = /^(?:[0-9a-fA-F]{2})*$/;

/** The snake_case name protobuf JSON also accepts for a camelCase field. */
const snake = (name: string) => name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

const listAt = (o: unknown, name: string): unknown[] => {
  if (typeof o !== 'object' || o === null) return [];
  const record = o as Record<string, unknown>;
  const list = record[name] ?? record[snake(name)];
  return Array.isArray(list) ? list : [];
};

/** Rewrites the hex ids of an OTLP JSON request in place as base64, which protobuf JSON reads. */
function hexIdsToBase64(json: unknown, fields: (typeof HEX_ID_FIELDS)[keyof typeof HEX_ID_FIELDS]): void {
  for (const resource of listAt(json, fields.resource)) {
    for (const scope of listAt(resource, fields.scope)) {
      for (const record of listAt(scope, fields.records)) {
        if (typeof record !== 'object' || record === null) continue;
        const r = record as Record<string, unknown>;
        for (const camel of fields.ids) {
          for (const name of [camel, snake(camel)]) {
            const id = r[name];
            if (id === undefined || id === null) continue;
            if (typeof id !== 'string' || !HEX.test(id)) throw new OtlpRefusal(400, `${camel} must be hex-encoded`);
            r[name] = Buffer.from(id, 'hex').toString('base64');
          }
        }
      }
    }
  }
}

/** The request message decoded from either encoding; any problem is a 400 that says what. */
export function decodeRequest<D extends DescMessage>(
  schema: D,
  body: Buffer,
  encoding: OtlpEncoding,
  ids: (typeof HEX_ID_FIELDS)[keyof typeof HEX_ID_FIELDS],
): MessageShape<D> {
  if (encoding === 'protobuf') {
    try {
      return fromBinary(schema, body, { readUnknownFields: false });
    } catch (error) {
      throw new OtlpRefusal(400, `The protobuf body could not be decoded: ${(error as Error).message}`);
    }
  }
  let json: unknown;
  try {
    json = JSON.parse(body.length ? body.toString('utf8') : '{}');
  } catch {
    throw new OtlpRefusal(400, 'Malformed JSON body');
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json)) throw new OtlpRefusal(400, 'The JSON body must be an object');
  hexIdsToBase64(json, ids);
  try {
    return fromJson(schema, json as JsonValue, { ignoreUnknownFields: true });
  } catch (error) {
    throw new OtlpRefusal(400, `The JSON body is not an OTLP export request: ${(error as Error).message}`);
  }
}

/** Sends a message in the request's encoding. */
export function sendMessage<D extends DescMessage>(res: Response, status: number, schema: D, message: MessageShape<D>, encoding: OtlpEncoding): void {
  if (encoding === 'protobuf') {
    res.status(status).type('application/x-protobuf').end(Buffer.from(toBinary(schema, message)));
  } else {
    res.status(status).json(toJson(schema, message));
  }
}

/** A refusal as OTLP/HTTP answers one: a google.rpc.Status in the request's encoding (JSON when it had none). */
export function sendRefusal(res: Response, refusal: OtlpRefusal, encoding: OtlpEncoding | undefined): void {
  const status = create(StatusSchema, { code: RPC_CODE[refusal.status], message: refusal.message });
  sendMessage(res, refusal.status, StatusSchema, status, encoding ?? 'json');
}

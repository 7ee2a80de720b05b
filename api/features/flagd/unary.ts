import http2, { type IncomingHttpHeaders, type ServerHttp2Stream } from 'node:http2';
import { create, fromBinary, toBinary, type DescMessage, type DescService } from '@bufbuild/protobuf';
import { Code, ConnectError } from '@connectrpc/connect';
import { contentTypeProto, grpcStatusOk, parseContentType, parseTimeout } from '@connectrpc/connect/protocol-grpc';
import { clientIp } from '../../http/client-ip';
import type { Logger } from '../../infra/logger';
import { perInternedResult, type EvaluationResult } from '../evaluation/engine/index';
import { credentialFrom, SELECTOR_HEADER } from './credentials';
import { RESOLVE_METHODS, type FlagdConnection, type ResolveMethod, type ResolveRequest } from './rpc';

/**
 * The lean gRPC path (docs/data-plane.md#the-lean-grpc-path): unary Resolve<Type> calls over
 * gRPC on FLAGD_PORT (the RPC mode of every flagd provider) answered straight from the HTTP/2
 * stream, without connect-node's per-call machinery. The call itself is rpc.ts's `resolve`, the
 * same as on connect-node (admission, credentials, limits, evaluation, errors); this file only
 * reads the one length-prefixed message and writes the answer. Each answer's bytes are built once
 * per flag version (perInternedResult). What it does not take (Connect, gRPC with a compressed
 * body, other methods, HTTP/1.1) goes to connect-node, which answers as before.
 */

export interface UnaryDeps {
  resolve(connection: FlagdConnection, token: string | undefined, req: ResolveRequest, method: ResolveMethod): EvaluationResult | Promise<EvaluationResult>;
  /** The largest request message, in bytes: connect-node's readMaxBytes. */
  readMaxBytes: number;
  trustProxy: number;
  logger: Logger;
}

/** Takes a stream it serves (true), or leaves it (false) to connect-node. */
export type StreamTaker = (stream: ServerHttp2Stream, headers: IncomingHttpHeaders) => boolean;

const RESPONSE_HEADERS = { ':status': 200, 'content-type': contentTypeProto };
const OK_TRAILERS = { 'grpc-status': grpcStatusOk };
/** A message's prefix: a flags byte (bit 0: compressed), then its length, big-endian. */
const PREFIX_BYTES = 5;

interface UnaryRoute {
  name: string;
  method: ResolveMethod;
  input: DescMessage;
  /** The whole response body (prefix and message) of a result, once per interned result. */
  body(r: EvaluationResult): Buffer;
}

function routesOf(services: DescService[]): Map<string, UnaryRoute> {
  const routes = new Map<string, UnaryRoute>();
  for (const service of services) {
    for (const [localName, method] of Object.entries(RESOLVE_METHODS)) {
      const desc = service.method[localName];
      const output = desc.output;
      const body = perInternedResult((r: EvaluationResult) => {
        const message = toBinary(output, create(output, method.response(r) as never));
        const framed = Buffer.allocUnsafe(PREFIX_BYTES + message.length);
        framed[0] = 0;
        framed.writeUInt32BE(message.length, 1);
        framed.set(message, PREFIX_BYTES);
        return framed;
      });
      routes.set(`/${service.typeName}/${desc.name}`, { name: desc.name, method, input: desc.input, body });
    }
  }
  return routes;
}

export function unaryGrpc(services: DescService[], deps: UnaryDeps): StreamTaker {
  const routes = routesOf(services);
  return (stream, headers) => {
    const route = routes.get(headers[':path'] ?? '');
    // gRPC with the binary codec, as connect-node reads content types; `+json` stays on connect-node.
    if (route === undefined || headers[':method'] !== 'POST' || parseContentType(headers['content-type'] ?? null)?.binary !== true) return false;
    const encoding = headers['grpc-encoding'];
    if (encoding !== undefined && encoding !== 'identity') return false;
    const call = new UnaryCall(deps, route, stream, headers);
    (stream as WithCall)[CALL] = call;
    stream.on('data', onData);
    stream.on('end', onEnd);
    stream.on('error', onStreamError);
    return true;
  };
}

const CALL = Symbol('unary call');
type WithCall = ServerHttp2Stream & { [CALL]?: UnaryCall };

/**
 * One call's state. The stream's listeners are module-level functions that find it on the
 * stream, so a call allocates this object and no closures.
 */
class UnaryCall {
  chunks: Buffer[] = [];
  bytes = 0;
  done = false;

  constructor(
    readonly deps: UnaryDeps,
    readonly route: UnaryRoute,
    readonly stream: ServerHttp2Stream,
    readonly headers: IncomingHttpHeaders,
  ) {}
}

function onData(this: WithCall, chunk: Buffer): void {
  const call = this[CALL]!;
  if (call.done) return;
  call.chunks.push(chunk);
  call.bytes += chunk.length;
  // Refused as soon as the prefix announces too much, before the message is read.
  if (call.bytes >= PREFIX_BYTES) {
    const length = messageLength(call);
    if (length > call.deps.readMaxBytes) fail(call, new ConnectError(`message size ${length} is larger than configured readMaxBytes ${call.deps.readMaxBytes}`, Code.ResourceExhausted));
    else if (call.bytes > PREFIX_BYTES + length + PREFIX_BYTES) fail(call, extraMessage());
  }
}

function messageLength(call: UnaryCall): number {
  const first = call.chunks[0].length >= PREFIX_BYTES ? call.chunks[0] : Buffer.concat(call.chunks);
  return first.readUInt32BE(1);
}

const extraMessage = () => new ConnectError('protocol error: received extra input message for unary method', Code.Unimplemented);

function onEnd(this: WithCall): void {
  const call = this[CALL]!;
  if (call.done) return;
  // The errors connect-node answers for the same bodies.
  // A malformed deadline is refused as connect-node refuses it; a valid one is the client's to
  // keep (a call waits, if at all, only on its credential's first lookup).
  const timeout = parseTimeout(single(call.headers['grpc-timeout']) ?? null, Number.MAX_SAFE_INTEGER);
  if (timeout.error !== undefined) return fail(call, timeout.error);
  if (call.bytes === 0) return fail(call, new ConnectError('protocol error: missing input message for unary method', Code.Unimplemented));
  const body = call.chunks.length === 1 ? call.chunks[0] : Buffer.concat(call.chunks);
  call.chunks = [];
  if (body.length < PREFIX_BYTES || body.length < PREFIX_BYTES + body.readUInt32BE(1)) return fail(call, new ConnectError('protocol error: incomplete envelope', Code.InvalidArgument));
  const length = body.readUInt32BE(1);
  if (body.length > PREFIX_BYTES + length) return fail(call, extraMessage());
  if ((body[0] & 1) === 1) return fail(call, new ConnectError('received compressed envelope, but do not know how to decompress', Code.Internal));
  let req: ResolveRequest;
  try {
    req = fromBinary(call.route.input, body.subarray(PREFIX_BYTES)) as unknown as ResolveRequest;
  } catch (error) {
    return fail(call, new ConnectError(`parse binary: ${error instanceof Error ? error.message : String(error)}`, Code.InvalidArgument));
  }
  const { headers, stream, deps } = call;
  const session = stream.session;
  // The connection went away while the message arrived.
  if (session === undefined) return;
  const connection: FlagdConnection = { ip: clientIp({ socket: session.socket, headers }, deps.trustProxy), session };
  const token = credentialFrom(single(headers[SELECTOR_HEADER]), headers.authorization, '');
  let result: EvaluationResult | Promise<EvaluationResult>;
  try {
    result = deps.resolve(connection, token, req, call.route.method);
  } catch (error) {
    return fail(call, error);
  }
  if (result instanceof Promise) {
    result.then(
      (r) => answer(call, r),
      (error: unknown) => fail(call, error),
    );
  } else answer(call, result);
}

const single = (value: string | string[] | undefined) => (Array.isArray(value) ? value.join(', ') : value);

function answer(call: UnaryCall, result: EvaluationResult): void {
  let body: Buffer;
  try {
    body = call.route.body(result);
  } catch (error) {
    return fail(call, error);
  }
  call.done = true;
  const { stream } = call;
  if (stream.destroyed || stream.headersSent) return;
  stream.respond(RESPONSE_HEADERS, { waitForTrailers: true });
  stream.once('wantTrailers', sendOkTrailers);
  stream.end(body);
}

function sendOkTrailers(this: ServerHttp2Stream): void {
  this.sendTrailers(OK_TRAILERS);
}

/** Answers trailers-only with the error's status; anything but a ConnectError is logged and answered INTERNAL. */
function fail(call: UnaryCall, error: unknown): void {
  call.done = true;
  call.chunks = [];
  const { stream } = call;
  if (stream.destroyed || stream.headersSent) return;
  let refusal: ConnectError;
  if (error instanceof ConnectError) refusal = error;
  else {
    call.deps.logger.error({ err: error, rpc: call.route.name }, 'rpc failed');
    refusal = new ConnectError('Internal server error', Code.Internal);
  }
  stream.respond({ ...RESPONSE_HEADERS, 'grpc-status': String(refusal.code), 'grpc-message': encodeURIComponent(refusal.rawMessage) }, { endStream: true });
  // Refused before the client finished sending (an oversized message): the rest is not read.
  if (!stream.readableEnded) stream.close(http2.constants.NGHTTP2_NO_ERROR);
}

/** A reset or broken stream is the client's problem; the call just ends. */
function onStreamError(this: WithCall): void {
  const call = this[CALL];
  if (call !== undefined) call.done = true;
}

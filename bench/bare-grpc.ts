/**
 * bench:flagd's floor: a bare node:http2 server answering every gRPC call with one constant
 * flagd.evaluation.v2 ResolveBooleanResponse, the least a gRPC unary answer can cost in Node.
 * Started by bench/flagd.ts on CPU 0; prints its port.
 */
import http2 from 'node:http2';
import type { AddressInfo } from 'node:net';
import { create, toBinary } from '@bufbuild/protobuf';
import { ResolveBooleanResponseSchema } from '../api/gen/flagd/evaluation/v2/evaluation_pb';

const message = toBinary(ResolveBooleanResponseSchema, create(ResolveBooleanResponseSchema, { value: true, reason: 'STATIC', variant: 'on' }));
// gRPC's length-prefixed message: not compressed, then the length big-endian.
const frame = Buffer.alloc(5 + message.length);
frame.writeUInt32BE(message.length, 1);
frame.set(message, 5);

const server = http2.createServer();
server.on('stream', (stream) => {
  // ghz resets its connections at the deadline: a reset stream is no reason to stop serving.
  stream.on('error', () => undefined);
  stream.resume();
  stream.on('end', () => {
    stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
    stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
    stream.end(frame);
  });
});
server.listen(0, '127.0.0.1', () => console.log((server.address() as AddressInfo).port));

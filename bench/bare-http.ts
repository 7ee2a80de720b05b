/**
 * bench:peers' floor: a bare node:http server answering every request, once its body has
 * arrived, with one constant JSON answer (our all-flags answer, BARE_HTTP_ANSWER) and the headers ours
 * carries (rate limit, request id, ETag, cache control, type, length): the least such an
 * exchange costs in the runtime. Started by bench/peers.ts on CPU 0; prints its port.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

const answer = process.env.BARE_HTTP_ANSWER;
if (!answer) throw new Error('BARE_HTTP_ANSWER (the answer to serve) is required: bench/peers.ts passes its data plane\'s own');
const body = Buffer.from(answer);
const headers = {
  'RateLimit-Limit': '1000000000',
  'RateLimit-Remaining': '999999999',
  'RateLimit-Reset': '60',
  'X-Request-Id': 'req_00000000000000000000',
  ETag: 'W/"000000000000000000000000"',
  'Cache-Control': 'private, no-cache',
  'Content-Type': 'application/json; charset=utf-8',
  'Content-Length': String(body.length),
};

const server = http.createServer((req, res) => {
  req.resume();
  req.on('end', () => {
    res.writeHead(200, headers);
    res.end(body);
  });
});
server.listen(0, '127.0.0.1', () => console.log((server.address() as AddressInfo).port));

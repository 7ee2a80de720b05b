import type { IncomingMessage } from 'node:http';
import ipaddr from 'ipaddr.js';
import { boundedMemo } from '../infra/ids';

/**
 * The caller's address: the socket peer, unless `trustedHops` proxies sit in front of us, in
 * which case we take the address that many hops from the right of X-Forwarded-For. Entries
 * further left are client-controlled and never trusted, so a forged header cannot dodge
 * per-IP limits.
 */
/** What clientIp reads of a request: an HTTP/1.1 or HTTP/2 request, or an HTTP/2 stream's session socket and headers. */
export interface PeerOf {
  socket: { remoteAddress?: string };
  headers: IncomingMessage['headers'];
}

export function clientIp(req: PeerOf, trustedHops: number): string {
  const socketAddress = normalise(req.socket.remoteAddress ?? 'unknown');
  if (trustedHops <= 0) return socketAddress;
  const header = req.headers['x-forwarded-for'];
  const chain = (Array.isArray(header) ? header.join(',') : header ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  // chain + socket peer, right-most is nearest; the client is `trustedHops` entries from the right.
  const all = [...chain, socketAddress];
  const index = all.length - 1 - trustedHops;
  return normalise(index >= 0 ? all[index] : all[0]);
}

function normalise(address: string): string {
  return address.startsWith('::ffff:') ? address.slice(7) : address;
}

/**
 * The per-IP rate-limit key of an address: IPv4 as it is, IPv6 by its /64. One subscriber is
 * usually given a whole /64, so counting single IPv6 addresses would hand every client 2^64
 * fresh budgets. IPv4 costs one indexOf (the evaluation hot path calls this per request); an
 * IPv6 parse costs microseconds, so the last addresses seen are remembered.
 */
export function ipBucket(address: string): string {
  return address.indexOf(':') === -1 ? address : ipv6Bucket(address);
}

const ipv6Bucket = boundedMemo(slash64, 10_000);

function slash64(address: string): string {
  let ip: ipaddr.IPv6;
  try {
    ip = ipaddr.IPv6.parse(address);
  } catch {
    return address;
  }
  if (ip.isIPv4MappedAddress()) return ip.toIPv4Address().toString();
  const p = ip.parts;
  return `${p[0].toString(16)}:${p[1].toString(16)}:${p[2].toString(16)}:${p[3].toString(16)}::/64`;
}

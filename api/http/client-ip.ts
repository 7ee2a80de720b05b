import type { IncomingMessage } from 'node:http';

/**
 * The caller's address: the socket peer, unless `trustedHops` proxies sit in front of us, in
 * which case we take the address that many hops from the right of X-Forwarded-For. Entries
 * further left are client-controlled and never trusted, so a forged header cannot dodge
 * per-IP limits.
 */
export function clientIp(req: IncomingMessage, trustedHops: number): string {
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

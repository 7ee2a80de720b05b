import type { IncomingMessage } from 'node:http';
import ipaddr from 'ipaddr.js';
import { UAParser } from 'ua-parser-js';
import { boundedMemo } from '../../infra/ids';

/** What browser analytics keeps of a User-Agent: names only ('' when the parser does not know). */
export interface UserAgentFacts {
  browser: string;
  os: string;
  /** mobile, tablet, smarttv, console, wearable, embedded; desktop for a known browser or OS without one. */
  device: string;
}

const MAX_USER_AGENT = 512;
const MEMO_SIZE = 5_000;

/**
 * Browser, OS and device from the User-Agent header with ua-parser-js 1.x (MIT; 2.x is AGPL),
 * never from fields the client sends. A few thousand distinct strings make up nearly all
 * traffic, so the last ones parsed are remembered (a parse costs tens of microseconds).
 */
export function createUserAgentParser(): (userAgent: string) => UserAgentFacts {
  const parseRemembered = boundedMemo(parse, MEMO_SIZE);
  return (header) => parseRemembered(header.slice(0, MAX_USER_AGENT));
}

function parse(userAgent: string): UserAgentFacts {
  if (userAgent === '') return { browser: '', os: '', device: '' };
  const result = new UAParser(userAgent).getResult();
  const browser = result.browser.name ?? '';
  const os = result.os.name ?? '';
  // ua-parser names no type for desktops; a client it does not know at all (a script) is no desktop.
  return { browser, os, device: result.device.type ?? (browser || os ? 'desktop' : '') };
}

const COUNTRY = /^[A-Z0-9]{2}$/;

/**
 * The visitor's country from a header only a trusted proxy sets (CF-IPCountry by default): read
 * when the connection comes from one of `trustedProxies` (CIDRs), '' otherwise, since any client
 * can send the header itself. Two upper-case letters or digits (ISO 3166-1 alpha-2, Cloudflare's XX
 * and T1), else ''.
 */
export function createCountryReader(trustedProxies: readonly string[], header: string): (req: IncomingMessage) => string {
  const ranges = trustedProxies.map((cidr) => ipaddr.parseCIDR(cidr));
  const name = header.toLowerCase();
  return (req) => {
    if (ranges.length === 0) return '';
    const peer = peerAddress(req.socket.remoteAddress);
    // Same kind checked first: ipaddr's match needs both sides of one kind.
    if (peer === undefined || !ranges.some(([range, bits]) => range.kind() === peer.kind() && (peer as ipaddr.IPv4).match(range as ipaddr.IPv4, bits))) return '';
    const value = req.headers[name];
    const country = (Array.isArray(value) ? value[0] : value)?.trim().toUpperCase() ?? '';
    return COUNTRY.test(country) ? country : '';
  };
}

function peerAddress(address: string | undefined): ipaddr.IPv4 | ipaddr.IPv6 | undefined {
  if (address === undefined || !ipaddr.isValid(address)) return undefined;
  const parsed = ipaddr.parse(address);
  // A v4 client on a dual-stack socket shows as ::ffff:a.b.c.d; compare it with v4 ranges.
  return parsed.kind() === 'ipv6' && (parsed as ipaddr.IPv6).isIPv4MappedAddress() ? (parsed as ipaddr.IPv6).toIPv4Address() : parsed;
}

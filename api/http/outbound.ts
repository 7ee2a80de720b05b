import dns from 'node:dns';
import net from 'node:net';
import { Agent, request } from 'undici';

/**
 * Every HTTP call to an address a user gave us (webhooks, alert channels, analytics export)
 * goes through OutboundClient. It refuses targets that resolve to internal addresses
 * (loopback, private, link-local, CGNAT, unique-local, cloud metadata …) unless private
 * targets are explicitly allowed, and it pins the connection to the address it checked:
 * the check runs inside the socket's own DNS lookup, so a second resolution (DNS
 * rebinding) cannot swap in another address. Redirects are never followed.
 */

export type ResolvedAddress = { address: string; family: 4 | 6 };
export type Resolver = (hostname: string) => Promise<ResolvedAddress[]>;

/** A target we refuse to call; `message` is safe to show to the user. */
export class OutboundTargetError extends Error {
  readonly code = 'ERR_OUTBOUND_TARGET_FORBIDDEN';
  constructor(
    message: string,
    /** True when the host did not resolve (may work later), false when the target is refused. */
    readonly unresolved = false,
  ) {
    super(message);
    this.name = 'OutboundTargetError';
  }
}

export interface OutboundResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  /** The first bytes of the body (for delivery logs); the rest is discarded. */
  bodyExcerpt: string;
  durationMs: number;
}

/** A request that produced no HTTP response. */
export class OutboundRequestError extends Error {
  constructor(
    readonly kind: 'timeout' | 'network' | 'forbidden_target',
    message: string,
    readonly durationMs: number,
  ) {
    super(message);
    this.name = 'OutboundRequestError';
  }
}

export interface OutboundPostOptions {
  headers: Record<string, string>;
  body: string;
  /** Whole-request budget: connect, send, response headers and the body excerpt. */
  timeoutMs: number;
}

const BODY_EXCERPT_BYTES = 1024;
const MAX_URL_LENGTH = 2048;

interface Range {
  bytes: number[];
  bits: number;
  reason: string;
}

const v4 = (cidr: string, reason: string): Range => {
  const [ip, bits] = cidr.split('/');
  return { bytes: parseIPv4(ip)!, bits: Number(bits), reason };
};
const v6 = (cidr: string, reason: string): Range => {
  const [ip, bits] = cidr.split('/');
  return { bytes: parseIPv6(ip)!, bits: Number(bits), reason };
};

// Order matters: the first match names the reason (metadata before link-local).
const BLOCKED_V4: Range[] = [
  v4('169.254.169.254/32', 'a cloud metadata address'),
  v4('0.0.0.0/8', 'an unspecified address'),
  v4('127.0.0.0/8', 'a loopback address'),
  v4('10.0.0.0/8', 'a private address'),
  v4('172.16.0.0/12', 'a private address'),
  v4('192.168.0.0/16', 'a private address'),
  v4('100.64.0.0/10', 'a carrier-grade NAT address'),
  v4('169.254.0.0/16', 'a link-local address'),
  v4('192.0.0.0/24', 'a reserved address'),
  v4('198.18.0.0/15', 'a reserved address'),
  v4('224.0.0.0/4', 'a multicast address'),
  v4('240.0.0.0/4', 'a reserved address'),
];
const BLOCKED_V6: Range[] = [
  v6('fd00:ec2::254/128', 'a cloud metadata address'),
  v6('::/128', 'an unspecified address'),
  v6('::1/128', 'a loopback address'),
  v6('fc00::/7', 'a unique-local address'),
  v6('fe80::/10', 'a link-local address'),
  v6('fec0::/10', 'a site-local address'),
  v6('ff00::/8', 'a multicast address'),
  v6('100::/64', 'a reserved address'),
];
// IPv6 forms that carry an IPv4 address, which is then checked as IPv4: mapped
// (::ffff:a.b.c.d), NAT64 (64:ff9b::a.b.c.d) and the deprecated compatible form (::a.b.c.d).
const EMBEDS_V4_IN_LAST_32_BITS: Range[] = [
  v6('::ffff:0:0/96', ''),
  v6('64:ff9b::/96', ''),
  v6('::/96', ''),
];
const SIX_TO_FOUR = v6('2002::/16', '');

function inRange(bytes: number[], range: Range): boolean {
  if (bytes.length !== range.bytes.length) return false;
  let bits = range.bits;
  for (let i = 0; bits > 0; i++, bits -= 8) {
    const mask = bits >= 8 ? 0xff : (0xff << (8 - bits)) & 0xff;
    if ((bytes[i] & mask) !== (range.bytes[i] & mask)) return false;
  }
  return true;
}

/** Why an IP address must not be called, or null when it is a public unicast address. */
export function forbiddenAddressReason(address: string): string | null {
  const ip = address.replace(/^\[|\]$/g, '').replace(/%.*$/, '');
  const four = parseIPv4(ip);
  if (four) return BLOCKED_V4.find((r) => inRange(four, r))?.reason ?? null;
  const six = parseIPv6(ip);
  if (!six) return 'not an IP address';
  const direct = BLOCKED_V6.find((r) => inRange(six, r));
  if (direct) return direct.reason;
  if (EMBEDS_V4_IN_LAST_32_BITS.some((r) => inRange(six, r))) return forbiddenAddressReason(six.slice(12).join('.'));
  if (inRange(six, SIX_TO_FOUR)) return forbiddenAddressReason(six.slice(2, 6).join('.'));
  return null;
}

export function parseIPv4(ip: string): number[] | null {
  if (!net.isIPv4(ip)) return null;
  return ip.split('.').map(Number);
}

export function parseIPv6(ip: string): number[] | null {
  if (!net.isIPv6(ip)) return null;
  let text = ip;
  const tail: number[] = [];
  const lastColon = text.lastIndexOf(':');
  if (text.slice(lastColon + 1).includes('.')) {
    const embedded = parseIPv4(text.slice(lastColon + 1));
    if (!embedded) return null;
    tail.push(...embedded);
    text = `${text.slice(0, lastColon + 1)}0:0`;
  }
  const [head, rest] = text.includes('::') ? text.split('::') : [text, undefined];
  const headGroups = head ? head.split(':') : [];
  const restGroups = rest !== undefined && rest !== '' ? rest.split(':') : [];
  const missing = 8 - headGroups.length - restGroups.length;
  const groups = [...headGroups, ...Array(rest !== undefined ? missing : 0).fill('0'), ...restGroups];
  if (groups.length !== 8) return null;
  const bytes = groups.flatMap((g) => {
    const n = parseInt(g, 16);
    return [n >> 8, n & 0xff];
  });
  if (tail.length) bytes.splice(12, 4, ...tail);
  return bytes;
}

/**
 * A resolver that hangs (no reachable nameserver) must not hold a request past its deadline:
 * saving a URL then answers 400 "could not be resolved" well inside it, and a delivery attempt
 * fails as a network error and is retried.
 */
const RESOLVE_TIMEOUT_MS = 2_000;

const systemResolver: Resolver = async (hostname) => {
  const records = await dns.promises.lookup(hostname, { all: true, verbatim: true });
  return records.map((r) => ({ address: r.address, family: r.family === 6 ? 6 : 4 }));
};

export interface OutboundClientOptions {
  allowPrivateTargets: boolean;
  /** DNS resolution; injectable so tests can simulate rebinding. */
  resolve?: Resolver;
  /** A host whose DNS gives no answer within this long counts as unresolved (default 2 s). */
  resolveTimeoutMs?: number;
  userAgent?: string;
}

export class OutboundClient {
  readonly allowPrivateTargets: boolean;
  private readonly resolve: Resolver;
  private readonly resolveTimeoutMs: number;
  private readonly agent: Agent;
  private readonly userAgent: string;

  constructor(opts: OutboundClientOptions) {
    this.allowPrivateTargets = opts.allowPrivateTargets;
    this.resolve = opts.resolve ?? systemResolver;
    this.resolveTimeoutMs = opts.resolveTimeoutMs ?? RESOLVE_TIMEOUT_MS;
    this.userAgent = opts.userAgent ?? 'flagship-webhooks/1';
    this.agent = new Agent({
      keepAliveTimeout: 4_000,
      connections: 64,
      // The socket resolves through this lookup: the address checked is the address used.
      connect: { lookup: this.pinnedLookup },
    });
  }

  /**
   * Validates a user-supplied URL (scheme, form and, unless private targets are allowed, every
   * address the host resolves to). Called when the URL is saved and again before each delivery.
   */
  async assertAllowedUrl(raw: string): Promise<URL> {
    const url = parseTargetUrl(raw);
    // Nothing to refuse: do not depend on DNS (the embedded profile may run offline).
    if (this.allowPrivateTargets) return url;
    const host = url.hostname.replace(/^\[|\]$/g, '');
    if (net.isIP(host)) {
      this.assertAllowedAddress(host, url.hostname);
      return url;
    }
    await this.resolveAllowed(host);
    return url;
  }

  /** POSTs a body; resolves with any HTTP response (the caller classifies it), rejects only when none came. */
  async post(rawUrl: string, opts: OutboundPostOptions): Promise<OutboundResponse> {
    const started = performance.now();
    const elapsed = () => Math.round(performance.now() - started);
    let url: URL;
    try {
      url = await this.assertAllowedUrl(rawUrl);
    } catch (error) {
      if (error instanceof OutboundTargetError && !error.unresolved) throw new OutboundRequestError('forbidden_target', error.message, elapsed());
      throw new OutboundRequestError('network', error instanceof Error ? error.message : String(error), elapsed());
    }
    const signal = AbortSignal.timeout(opts.timeoutMs);
    try {
      const res = await request(url, {
        method: 'POST',
        dispatcher: this.agent,
        headers: { 'user-agent': this.userAgent, ...opts.headers },
        body: opts.body,
        signal,
        headersTimeout: opts.timeoutMs,
        bodyTimeout: opts.timeoutMs,
      });
      const bodyExcerpt = await readExcerpt(res.body, BODY_EXCERPT_BYTES);
      return { status: res.statusCode, headers: res.headers, bodyExcerpt, durationMs: elapsed() };
    } catch (error) {
      const target = findCause(error, (e) => e instanceof OutboundTargetError) as OutboundTargetError | undefined;
      if (target) throw new OutboundRequestError(target.unresolved ? 'network' : 'forbidden_target', target.message, elapsed());
      if (signal.aborted || isTimeout(error)) {
        throw new OutboundRequestError('timeout', `no response within ${opts.timeoutMs / 1000} s`, elapsed());
      }
      throw new OutboundRequestError('network', describeNetworkError(error), elapsed());
    }
  }

  async close(): Promise<void> {
    await this.agent.close();
  }

  private assertAllowedAddress(address: string, host: string) {
    if (this.allowPrivateTargets) return;
    const reason = forbiddenAddressReason(address);
    if (reason) {
      throw new OutboundTargetError(
        address === host ? `${host} is ${reason}; internal targets are not allowed` : `${host} resolves to ${reason} (${address}); internal targets are not allowed`,
      );
    }
  }

  private async resolveAllowed(host: string): Promise<ResolvedAddress[]> {
    let addresses: ResolvedAddress[];
    let timer: NodeJS.Timeout | undefined;
    const silent = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new OutboundTargetError(`${host} could not be resolved (no DNS answer within ${this.resolveTimeoutMs / 1000} s)`, true)), this.resolveTimeoutMs);
    });
    try {
      addresses = await Promise.race([this.resolve(host), silent]);
    } catch (error) {
      if (error instanceof OutboundTargetError) throw error;
      throw new OutboundTargetError(`${host} could not be resolved`, true);
    } finally {
      clearTimeout(timer);
    }
    if (!addresses.length) throw new OutboundTargetError(`${host} could not be resolved`, true);
    // Every address must pass: a client may pick any of them.
    for (const a of addresses) this.assertAllowedAddress(a.address, host);
    return addresses;
  }

  private readonly pinnedLookup = (hostname: string, options: dns.LookupOptions, callback: (...args: any[]) => void): void => {
    const host = hostname.replace(/^\[|\]$/g, '');
    this.resolveAllowed(host).then(
      (all) => {
        const wanted = options.family === 4 || options.family === 6 ? all.filter((a) => a.family === options.family) : all;
        const usable = wanted.length ? wanted : all;
        if (options.all) callback(null, usable);
        else callback(null, usable[0].address, usable[0].family);
      },
      (error) => callback(error),
    );
  };
}

/** Scheme http(s), a host, no credentials, bounded length. Throws OutboundTargetError. */
export function parseTargetUrl(raw: string): URL {
  if (raw.length > MAX_URL_LENGTH) throw new OutboundTargetError(`URL is longer than ${MAX_URL_LENGTH} characters`);
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new OutboundTargetError('not a valid URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new OutboundTargetError('URL must use http or https');
  if (!url.hostname) throw new OutboundTargetError('URL must name a host');
  if (url.username || url.password) throw new OutboundTargetError('URL must not contain credentials');
  return url;
}

async function readExcerpt(body: AsyncIterable<Buffer> & { destroy(): unknown }, limit: number): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    chunks.push(chunk);
    size += chunk.length;
    if (size >= limit) {
      body.destroy();
      break;
    }
  }
  return Buffer.concat(chunks).subarray(0, limit).toString('utf8');
}

function findCause(error: unknown, test: (e: unknown) => boolean): unknown {
  for (let e: unknown = error, depth = 0; e && depth < 6; e = (e as { cause?: unknown }).cause, depth++) {
    if (test(e)) return e;
  }
  return undefined;
}

function isTimeout(error: unknown): boolean {
  return Boolean(
    findCause(error, (e) => {
      const { code, name } = e as { code?: string; name?: string };
      return name === 'TimeoutError' || name === 'AbortError' || code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT' || code === 'UND_ERR_CONNECT_TIMEOUT';
    }),
  );
}

function describeNetworkError(error: unknown): string {
  const coded = findCause(error, (e) => typeof (e as { code?: unknown }).code === 'string') as { code: string; message: string } | undefined;
  if (coded) return `${coded.code}: ${coded.message}`;
  return error instanceof Error ? error.message : String(error);
}

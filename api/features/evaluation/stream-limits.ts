import type { Principal } from '../../auth/principal';
import { tooManyRequests, type HttpError } from '../../http/errors';
import type { DisconnectReason, StreamKind, StreamMetrics } from '../../lib/metrics/metrics';

export interface StreamCaps {
  perIp: number;
  perCredential: number;
  perService: number;
}

/** Who opens a stream: the client address, the caller and the service it follows. */
export interface StreamOwner {
  ip: string;
  principal: Principal;
  serviceId: string;
}

/** `release` gives the slot back when the stream ends, saying why it ended (the client went away when not said). */
export type StreamAdmission = { ok: true; release: (reason?: DisconnectReason) => void } | { ok: false; error: HttpError; retryAfterSeconds: number };

/** A full cap frees only when a stream ends; clients are asked to wait this long before trying again. */
export const STREAM_RETRY_AFTER_SECONDS = 30;

/**
 * Open-stream counts of this process, shared by every listener and protocol (SSE on both
 * listeners, the Connect and gRPC-Web EventStream): at most `perIp` per client address,
 * `perCredential` per project token or dashboard user, and `perService` per service. Anonymous
 * streams of a service are counted apart from its credentialed ones, so anonymous callers
 * cannot take the slots of the service's own clients (they are held by the per-IP cap).
 * The counts are per process, not shared between replicas: N replicas admit up to N times a cap.
 */
export class StreamLimits {
  private readonly open = new Map<string, number>();

  constructor(
    private readonly caps: StreamCaps,
    /** Open streams by kind and their ends by reason (docs/operations.md#metrics). */
    private readonly metrics: StreamMetrics,
  ) {}

  /** Takes a slot under every cap that applies, or none and the refusal (429) naming the full one. */
  acquire(owner: StreamOwner, kind: StreamKind): StreamAdmission {
    const credential = credentialKey(owner.principal);
    const slots: [key: string, max: number, what: string][] = [[`ip:${owner.ip}`, this.caps.perIp, 'IP address']];
    if (credential !== undefined) slots.push([credential, this.caps.perCredential, 'credential']);
    slots.push([`${credential === undefined ? 'anon' : 'svc'}:${owner.serviceId}`, this.caps.perService, 'service']);
    for (const [key, max, what] of slots) {
      if ((this.open.get(key) ?? 0) >= max) {
        return { ok: false, error: tooManyRequests(`Too many open streams: ${max} per ${what}`), retryAfterSeconds: STREAM_RETRY_AFTER_SECONDS };
      }
    }
    for (const [key] of slots) this.open.set(key, (this.open.get(key) ?? 0) + 1);
    this.metrics.opened(kind);
    let released = false;
    return {
      ok: true,
      release: (reason = 'client') => {
        if (released) return;
        released = true;
        this.metrics.closed(kind, reason);
        for (const [key] of slots) {
          const left = (this.open.get(key) ?? 1) - 1;
          if (left > 0) this.open.set(key, left);
          else this.open.delete(key);
        }
      },
    };
  }
}

function credentialKey(p: Principal): string | undefined {
  if (p.type === 'project_api_token' || p.type === 'personal_access_token') return `token:${p.tokenId}`;
  if (p.type === 'session') return `user:${p.user.id}`;
  return undefined;
}

import type { OutboundClient } from '../api/http/outbound';
import { OutboundRequestError } from '../api/http/outbound';
import type { Sql } from '../api/infra/postgres';
import { channelRequest } from '../api/features/alert-channels/payloads';
import { AlertChannelStore } from '../api/features/alert-channels/store';
import { DeliveryStore, type DeliveryRecord } from '../api/features/webhooks/deliveries';
import { signedHeaders } from '../api/features/webhooks/signing';
import { WebhookStore } from '../api/features/webhooks/store';
import { finalStatusOf, type AttemptResult, type DeliveryActivities, type DeliveryStatus, type RecordedAttempt } from '../workflows/messages';

export interface DeliveryDeps {
  sql: Sql;
  outbound: OutboundClient;
  /** 10 s per attempt (docs/limits.md). */
  attemptTimeoutMs?: number;
}

export const ATTEMPT_TIMEOUT_MS = 10_000;

type PreparedRequest = { url: string; headers: Record<string, string> } | { skip: string };

/**
 * Which answers are worth another attempt: 5xx, 429 and timeouts (docs/api-reference.md#webhooks).
 */
export function classifyStatus(status: number): Pick<AttemptResult, 'outcome' | 'error'> {
  if (status >= 200 && status < 300) return { outcome: 'delivered', error: null };
  if (status === 429 || status >= 500) return { outcome: 'retry', error: `HTTP ${status}` };
  if (status >= 300 && status < 400) return { outcome: 'failed', error: `HTTP ${status}: redirects are not followed` };
  return { outcome: 'failed', error: `HTTP ${status}` };
}

/**
 * One HTTP attempt of a stored delivery, and the bookkeeping after it. The target (URL,
 * secret, paused or not) is read fresh for every attempt, and the URL passes the SSRF guard
 * again (the address is pinned for the connection). Attempts never throw for an HTTP outcome:
 * they return it, and the workflow decides about the next one.
 */
export function createDeliveryActivities(deps: DeliveryDeps): DeliveryActivities {
  const deliveries = new DeliveryStore();
  const webhooks = new WebhookStore();
  const channels = new AlertChannelStore();
  const timeoutMs = deps.attemptTimeoutMs ?? ATTEMPT_TIMEOUT_MS;

  async function prepare(delivery: DeliveryRecord, nowSeconds: number): Promise<PreparedRequest> {
    if (delivery.targetUrl) {
      const signature = delivery.signingSecret ? signedHeaders(delivery.signingSecret, delivery.id, delivery.body, nowSeconds) : {};
      return { url: delivery.targetUrl, headers: { 'content-type': 'application/json', 'x-svc-event': delivery.event, ...signature } };
    }
    if (delivery.webhookId) {
      const target = await webhooks.signingTarget(deps.sql, delivery.webhookId);
      if (!target) return { skip: 'the webhook was deleted' };
      if (!target.active) return { skip: 'the webhook is paused' };
      return {
        url: target.url,
        headers: { 'content-type': 'application/json', 'x-svc-event': delivery.event, ...signedHeaders(target.secret, delivery.id, delivery.body, nowSeconds) },
      };
    }
    const channel = delivery.alertChannelId ? await channels.findById(deps.sql, delivery.alertChannelId) : null;
    if (!channel) return { skip: 'the alert channel was deleted' };
    if (!channel.enabled) return { skip: 'the alert channel is disabled' };
    return channelRequest(channel, delivery.id, delivery.body, nowSeconds);
  }

  async function attemptOutboundDelivery(deliveryId: string, attempt: number): Promise<AttemptResult> {
    const startedAt = new Date();
    const base = { startedAt: startedAt.toISOString(), statusCode: null, durationMs: null };
    const delivery = await deliveries.get(deps.sql, deliveryId);
    if (!delivery) return { ...base, outcome: 'skipped', error: 'the delivery no longer exists (its webhook or channel was deleted)' };
    // Settled already (its lane was signalled again after a crash): never sent twice by us;
    // the store ignores this result because the delivery is no longer pending.
    if (delivery.status !== 'pending') return { ...base, outcome: 'skipped', error: `already ${delivery.status}` };
    const prepared = await prepare(delivery, Math.floor(startedAt.getTime() / 1000));
    if ('skip' in prepared) return { ...base, outcome: 'skipped', error: prepared.skip };
    try {
      const res = await deps.outbound.post(prepared.url, {
        headers: { ...prepared.headers, 'x-svc-delivery-attempt': String(attempt) },
        body: delivery.body,
        timeoutMs,
      });
      const { outcome, error } = classifyStatus(res.status);
      const detail = error && res.bodyExcerpt ? `${error}: ${res.bodyExcerpt.slice(0, 200)}` : error;
      return { ...base, outcome, error: detail, statusCode: res.status, durationMs: res.durationMs };
    } catch (error) {
      if (!(error instanceof OutboundRequestError)) throw error;
      // Timeouts and network failures may pass; a refused (internal) target never will.
      const outcome = error.kind === 'forbidden_target' ? 'failed' : 'retry';
      return { ...base, outcome, error: error.message, durationMs: error.durationMs };
    }
  }

  return {
    attemptOutboundDelivery,

    async recordOutboundAttempt(deliveryId: string, attempt: number, result: AttemptResult, finalStatus: DeliveryStatus | null): Promise<void> {
      await deliveries.recordAttempt(deps.sql, deliveryId, attempt, result, finalStatus);
    },

    async attemptAndRecordDelivery(deliveryId: string, attempt: number, maxAttempts: number): Promise<RecordedAttempt> {
      const result = await attemptOutboundDelivery(deliveryId, attempt);
      const finalStatus = finalStatusOf(result.outcome, attempt, maxAttempts);
      await deliveries.recordAttempt(deps.sql, deliveryId, attempt, result, finalStatus);
      return { result, finalStatus };
    },
  };
}

/**
 * Whether a webhook's endpoint takes its deliveries, read from its delivery log
 * (docs/api-reference.md#webhooks): "Active" only says deliveries are made, not that they arrive.
 */
import type { paths } from '../../api/client';
import { useWebhookDeliveries } from '../../api/resources';

type Delivery = paths['/api/webhooks/{id}/deliveries']['get']['responses'][200]['content']['application/json']['deliveries'][number];

/** How many of the newest deliveries the webhooks list reads for each endpoint. */
const RECENT = 5;

interface Health {
  failing: boolean;
  text: string;
}

/**
 * The health the newest deliveries show: failing while the newest tried ones all failed (a delivery
 * still being retried counts, its attempts so far failed), with the last answer; skipped ones
 * (paused, event not subscribed) and ones not tried yet say nothing of the endpoint.
 */
export function webhookHealth(newestFirst: readonly Delivery[]): Health {
  const tried = newestFirst.filter((d) => d.status !== 'skipped' && d.attemptCount > 0);
  if (!tried.length) return { failing: false, text: 'No deliveries yet' };
  const delivered = tried.findIndex((d) => d.status === 'delivered');
  const failures = delivered === -1 ? tried.length : delivered;
  if (!failures) return { failing: false, text: 'Healthy' };
  const last = tried[0];
  const answer = last.lastStatusCode !== null ? `HTTP ${last.lastStatusCode}` : (last.lastError ?? 'no answer');
  return { failing: true, text: failures === 1 ? `Failing: the last delivery failed (${answer})` : `Failing: last ${failures} deliveries failed (${answer})` };
}

export function HealthText({ health }: { health: Health }) {
  return <span className={health.failing ? 'st-delivery-failed' : undefined}>{health.text}</span>;
}

/** One endpoint's health in the webhooks list, from its few newest deliveries. */
export function WebhookHealth({ webhookId }: { webhookId: string }) {
  const log = useWebhookDeliveries(webhookId, RECENT);
  if (log.error) return <span className="muted">Unknown ({log.error.message})</span>;
  if (!log.data) return <span className="muted">Checking…</span>;
  return <HealthText health={webhookHealth(log.data.pages[0]?.deliveries ?? [])} />;
}

import type { Analytics } from '../../../../analytics/client';
import { count, selectRows } from './clickhouse';
import { minutesInWindow, windowParams, type TimeWindow } from './range';

/** Names listed at most (docs/api-reference.md#outcome-events): enough for a picker, bounded. */
export const MAX_EVENT_NAMES = 200;

export interface EventName {
  name: string;
  count: number;
}

/**
 * The outcome event names a project (or one of its services) reported in the window, the most
 * frequent first, from the per-minute rollup (outcome_minutes), reserved names included: what a
 * funnel or conversion picker offers.
 */
export async function eventNames(analytics: Analytics, scope: { projectId: string; serviceId?: string }, w: TimeWindow): Promise<EventName[]> {
  const service = scope.serviceId === undefined ? '' : 'AND service_id = {serviceId:String}';
  const rows = await selectRows<{ event: string; events: string }>(
    analytics,
    `SELECT event, sum(events) AS events FROM outcome_minutes
     WHERE project_id = {projectId:String} ${service} AND ${minutesInWindow('minute')}
     GROUP BY event ORDER BY events DESC, event LIMIT {limit:UInt32}`,
    { projectId: scope.projectId, serviceId: scope.serviceId ?? '', limit: MAX_EVENT_NAMES, ...windowParams(w) },
  );
  return rows.map((r) => ({ name: r.event, count: count(r.events) }));
}

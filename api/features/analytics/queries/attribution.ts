import { rawInWindow, windowParams, type TimeWindow } from './range';

/**
 * Attribution (docs/api-reference.md#outcome-events), shared by flag variants and funnels: an
 * outcome event counts for flag F with value v when its `flags` names F; otherwise v is the value F
 * last returned to the same targeting key (targeting_key_hash) in the same service and environment
 * within the analysed window (the latest evaluation in the window, from evaluation_events). Values
 * are compared as JSON text cut to 128 characters, as evaluation_minutes keeps them.
 */

export interface OutcomeScope {
  projectId: string;
  environment: string;
  flagKey: string;
  serviceId?: string;
}

export function scopeParams(scope: OutcomeScope, w: TimeWindow): Record<string, unknown> {
  return { projectId: scope.projectId, environment: scope.environment, flagKey: scope.flagKey, serviceId: scope.serviceId ?? '', ...windowParams(w) };
}

/** The tenant and window condition of a raw table (evaluation_events, outcome_events) in `scope`. */
export function scopeCondition(scope: OutcomeScope, alias = ''): string {
  const c = (column: string) => (alias ? `${alias}.${column}` : column);
  const service = scope.serviceId === undefined ? '' : ` AND ${c('service_id')} = {serviceId:String}`;
  return `${c('project_id')} = {projectId:String} AND ${c('environment')} = {environment:String}${service} AND ${rawInWindow(c('timestamp'))}`;
}

/**
 * A WITH clause `last_values (targeting_key_hash, per_service)`: per targeting key, F's latest
 * value in each service as [(service_id, value)]. Joined on the key alone: a one-column string
 * join is several times faster in ClickHouse than one on (service_id, key), and the service is
 * then picked from the short array (LAST_VALUE).
 */
export function lastValuesCte(scope: OutcomeScope): string {
  return `last_values AS (
    SELECT targeting_key_hash, groupArray((service_id, value)) AS per_service FROM (
      SELECT service_id, targeting_key_hash, argMax(left(value, 128), timestamp) AS value
      FROM evaluation_events
      WHERE ${scopeCondition(scope)} AND flag_key = {flagKey:String} AND targeting_key_hash != ''
      GROUP BY service_id, targeting_key_hash)
    GROUP BY targeting_key_hash)`;
}

/** Each targeting key has one last_values row: ANY spares the join its duplicate bookkeeping. */
export const JOIN_LAST_VALUES = 'ANY LEFT JOIN last_values AS lv ON lv.targeting_key_hash = o.targeting_key_hash';
/** F's last value for an outcome row `o` in its service ('' when F never answered that key there). */
export const LAST_VALUE = 'arrayFirst(x -> x.1 = o.service_id, lv.per_service).2';
/** The value an outcome row `o` is attributed to ('' when none). */
export const ATTRIBUTED_VALUE = `if(mapContains(o.flags, {flagKey:String}), left(o.flags[{flagKey:String}], 128), ${LAST_VALUE})`;

import { rawInWindow, windowParams, type TimeWindow } from './range';

/**
 * CONTRACT 8 attribution, shared by flag variants and funnels: an outcome event counts for flag F
 * with value v when its `flags` names F; otherwise v is the value F last returned to the same
 * targeting key (targeting_key_hash) in the same service and environment within the analysed
 * window (the latest evaluation in the window, from evaluation_events). Values are compared as
 * JSON text cut to 128 characters, as evaluation_minutes keeps them.
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

/** A WITH clause `last_values (service_id, targeting_key_hash, value)`: F's latest value per targeting key. */
export function lastValuesCte(scope: OutcomeScope): string {
  return `last_values AS (
    SELECT service_id, targeting_key_hash, argMax(left(value, 128), timestamp) AS value
    FROM evaluation_events
    WHERE ${scopeCondition(scope)} AND flag_key = {flagKey:String} AND targeting_key_hash != ''
    GROUP BY service_id, targeting_key_hash)`;
}

/** The value an outcome row `o` is attributed to, given `lv` joined from last_values ('' when none). */
export const ATTRIBUTED_VALUE = "if(mapContains(o.flags, {flagKey:String}), left(o.flags[{flagKey:String}], 128), lv.value)";
export const JOIN_LAST_VALUES = 'LEFT JOIN last_values AS lv ON lv.service_id = o.service_id AND lv.targeting_key_hash = o.targeting_key_hash';

import type { Analytics } from '../../../analytics/client';
import type { CohortSummary } from '../../lib/release-safety/gates';

/**
 * The gate's inputs from the warehouse (docs/api-reference.md#outcome-events; docs/canary.md lists
 * exactly what counts). For one rule of one flag in one service and environment, over [fromMs,
 * toMs]:
 *   - exposures: evaluations of that rule (sum of evaluation_events.evaluations) with
 *     rollout_side 'in' (treatment) or 'out' (control);
 *   - errors: those evaluations that failed (error_code != ''), plus `error` outcome events (track
 *     and SDK telemetry alike) attributed to the side;
 *   - latency: `latency` outcome events with a value, attributed the same way.
 * Attribution of an outcome event: the side of its targeting key's latest evaluation of the rule
 * in the window; an event whose key has none but whose `flags` names the flag counts for
 * treatment when the value it saw is the rule's value, and for control otherwise only when the
 * rule has no conditions (then everyone evaluated is on one of the sides). Parameters are bound.
 */

export interface CohortScope {
  projectId: string;
  serviceId: string;
  environment: string;
  flagKey: string;
  ruleId: string;
  /** JSON text of the rule's value, as evaluation events and `flags` maps keep values. */
  treatmentValue: string;
  /** The rule has no conditions: every evaluation of the flag is on one side of it. */
  conditionsAlwaysHold: boolean;
}

export interface CohortPair {
  treatment: CohortSummary;
  control: CohortSummary;
}

type Side = 'in' | 'out';

const SCOPE = 'project_id = {projectId:String} AND service_id = {serviceId:String} AND environment = {environment:String}';
const WINDOW = (column: string) => `${column} >= fromUnixTimestamp64Milli({fromMs:Int64}) AND ${column} <= fromUnixTimestamp64Milli({toMs:Int64})`;
const RULE_SIDES = `flag_key = {flagKey:String} AND rule_id = {ruleId:String} AND rollout_side IN ('in', 'out')`;

interface ExposureRow {
  side: Side;
  exposures: string | number;
  errors: string | number;
}

interface OutcomeRow {
  side: Side;
  errors: string | number;
  latency_count: string | number;
  latency_mean: number | string | null;
  latency_variance: number | string | null;
  q: (number | string | null)[];
}

export class CanaryWarehouse {
  constructor(private readonly analytics: Analytics) {}

  async cohorts(scope: CohortScope, fromMs: number, toMs: number): Promise<CohortPair> {
    const params = { ...scope, conditionsAlwaysHold: scope.conditionsAlwaysHold ? 1 : 0, fromMs, toMs };
    const [exposures, outcomes] = await Promise.all([
      this.select<ExposureRow>(
        `SELECT rollout_side AS side, sum(evaluations) AS exposures, sumIf(evaluations, error_code != '') AS errors
         FROM evaluation_events WHERE ${SCOPE} AND ${RULE_SIDES} AND ${WINDOW('timestamp')}
         GROUP BY side`,
        params,
      ),
      this.select<OutcomeRow>(
        `WITH key_sides AS (
           SELECT targeting_key_hash, argMax(rollout_side, timestamp) AS side
           FROM evaluation_events
           WHERE ${SCOPE} AND ${RULE_SIDES} AND targeting_key_hash != '' AND ${WINDOW('timestamp')}
           GROUP BY targeting_key_hash
         ),
         attributed AS (
           SELECT o.event AS event, o.value AS value,
             if(ks.side != '', ks.side,
               if(mapContains(o.flags, {flagKey:String}),
                 if(o.flags[{flagKey:String}] = {treatmentValue:String}, 'in', if({conditionsAlwaysHold:UInt8} = 1, 'out', '')),
                 '')) AS side
           FROM outcome_events AS o ANY LEFT JOIN key_sides AS ks ON ks.targeting_key_hash = o.targeting_key_hash
           WHERE o.project_id = {projectId:String} AND o.service_id = {serviceId:String} AND o.environment = {environment:String}
             AND o.event IN ('error', 'latency') AND ${WINDOW('o.timestamp')}
         )
         SELECT side, countIf(event = 'error') AS errors,
                countIf(event = 'latency' AND value IS NOT NULL) AS latency_count,
                avgIf(assumeNotNull(value), event = 'latency' AND value IS NOT NULL) AS latency_mean,
                varSampIf(assumeNotNull(value), event = 'latency' AND value IS NOT NULL) AS latency_variance,
                quantilesExactIf(0.5, 0.99)(assumeNotNull(value), event = 'latency' AND value IS NOT NULL) AS q
         FROM attributed WHERE side IN ('in', 'out') GROUP BY side`,
        params,
      ),
    ]);
    const summary = (side: Side): CohortSummary => {
      const e = exposures.find((r) => r.side === side);
      const o = outcomes.find((r) => r.side === side);
      const latencyCount = Number(o?.latency_count ?? 0);
      return {
        exposures: Number(e?.exposures ?? 0),
        errors: Number(e?.errors ?? 0) + Number(o?.errors ?? 0),
        latencyCount,
        latencyMeanMs: latencyCount ? finite(o?.latency_mean) : 0,
        // One sample has no sample variance (ClickHouse answers nan): 0 then.
        latencyVarianceMs2: latencyCount > 1 ? finite(o?.latency_variance) : 0,
        latencyP50Ms: latencyCount ? finite(o?.q[0]) : null,
        latencyP99Ms: latencyCount ? finite(o?.q[1]) : null,
      };
    };
    return { treatment: summary('in'), control: summary('out') };
  }

  private async select<T>(query: string, params: Record<string, unknown>): Promise<T[]> {
    const result = await this.analytics.client.query({ query, query_params: params, format: 'JSONEachRow' });
    return result.json<T>();
  }
}

function finite(value: number | string | null | undefined): number {
  const n = Number(value);
  return Number.isFinite(n) ? n : 0;
}

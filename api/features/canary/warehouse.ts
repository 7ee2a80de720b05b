import type { Analytics } from '../../../analytics/client';
import type { CohortSummary } from '../../lib/release-safety/gates';
import { attributedOutcomes, outcomesOf, type OutcomeGrouping } from '../../lib/release-safety/outcomes';

/**
 * The gate's inputs from the warehouse (docs/api-reference.md#outcome-events; docs/canary.md lists
 * exactly what counts). For one rule of one flag in one service and environment, over [fromMs,
 * toMs]:
 *   - exposures: evaluations of that rule (sum of evaluation_events.evaluations) with
 *     rollout_side 'in' (treatment) or 'out' (control); a failed evaluation is an exposure, not an
 *     error (docs/canary.md#what-counts);
 *   - errors and latency: application outcomes attributed to the side by the one outcome query
 *     every reader shares (attributedOutcomes), grouped by the side of the key's latest evaluation
 *     of the rule; an event whose key has none but whose `flags` names the flag counts for
 *     treatment when the value it saw is the rule's value, and for control otherwise only when the
 *     rule has no conditions (then everyone evaluated is on one of the sides).
 * Parameters are bound.
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
const RULE_SIDES = `rule_id = {ruleId:String} AND rollout_side IN ('in', 'out')`;

/** Outcomes grouped by the side of the canaried rule. */
const RULE_SIDE_GROUPING: OutcomeGrouping = {
  evaluations: RULE_SIDES,
  groupOfEvaluation: 'rollout_side',
  // The side of the key's latest evaluation of the rule, else the side the value in `flags` tells.
  groupsOf: (keyGroups) => `if(notEmpty(${keyGroups}), ${keyGroups}, arrayFilter(x -> x.2 != '', [({flagKey:String},
    if(mapContains(o.flags, {flagKey:String}),
      if(o.flags[{flagKey:String}] = {treatmentValue:String}, 'in', if({conditionsAlwaysHold:UInt8} = 1, 'out', '')), ''))]))`,
};

interface ExposureRow {
  side: Side;
  exposures: string | number;
}

export class CanaryWarehouse {
  constructor(private readonly analytics: Analytics) {}

  async cohorts(scope: CohortScope, fromMs: number, toMs: number): Promise<CohortPair> {
    const params = { ...scope, conditionsAlwaysHold: scope.conditionsAlwaysHold ? 1 : 0, fromMs, toMs };
    const { projectId, serviceId, environment, flagKey } = scope;
    const [exposures, outcomes] = await Promise.all([
      this.select<ExposureRow>(
        `SELECT rollout_side AS side, sum(evaluations) AS exposures
         FROM evaluation_events WHERE ${SCOPE} AND flag_key = {flagKey:String} AND ${RULE_SIDES}
           AND timestamp >= fromUnixTimestamp64Milli({fromMs:Int64}) AND timestamp <= fromUnixTimestamp64Milli({toMs:Int64})
         GROUP BY side`,
        params,
      ),
      // The check's window includes its end: the outcome window [fromMs, toMs + 1 ms).
      attributedOutcomes(this.analytics, { projectIds: [projectId], serviceId, environment, flagKey }, RULE_SIDE_GROUPING, { fromMs, toMs: toMs + 1 }, {
        params: { ruleId: scope.ruleId, treatmentValue: scope.treatmentValue, conditionsAlwaysHold: params.conditionsAlwaysHold },
      }),
    ]);
    const summary = (side: Side): CohortSummary => {
      const e = exposures.find((r) => r.side === side);
      return {
        exposures: Number(e?.exposures ?? 0),
        ...outcomesOf(outcomes, side),
      };
    };
    return { treatment: summary('in'), control: summary('out') };
  }

  private async select<T>(query: string, params: Record<string, unknown>): Promise<T[]> {
    const result = await this.analytics.client.query({ query, query_params: params, format: 'JSONEachRow' });
    return result.json<T>();
  }
}

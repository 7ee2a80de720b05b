import type { Analytics } from '../../../analytics/client';
import type { ArmErrors, ArmStats } from './allocation';

/**
 * A bandit's evidence from the warehouse (docs/api-reference.md#outcome-events,
 * docs/experiments.md#rewards and docs/experiments.md#guardrail-cutting-an-arm-on-errors), for one
 * flag in one service and environment over [fromMs, toMs] (the experiment so far). An evaluation
 * belongs to an arm when it served that variant (evaluation_events.variant).
 *
 * Conversions: each targeting key that was served a variant is one trial of the arm it was
 * served last; it is a success when it has an outcome event named `conversionEvent` in the
 * window attributed to that same arm: the event's `flags` names the flag with the value that
 * arm serves, or (without `flags` naming it) the key's own last served arm. An event whose key
 * was never served a variant is no trial and is not counted.
 *
 * Errors (the guardrail): requests = evaluations that served the arm; errors = `error` outcome
 * events attributed to the arm (through `flags` when it names the flag, else through the key's
 * last served arm). A failed evaluation is no application error (docs/insights.md#error-rate), as
 * everywhere else error rates are read.
 *
 * Values are compared as the JSON text both tables keep. Every parameter is bound.
 */

export interface ArmScope {
  projectId: string;
  serviceId: string;
  environment: string;
  flagKey: string;
  fromMs: number;
  toMs: number;
}

const SCOPE = 'project_id = {projectId:String} AND service_id = {serviceId:String} AND environment = {environment:String}';
const OUTCOME_SCOPE = 'o.project_id = {projectId:String} AND o.service_id = {serviceId:String} AND o.environment = {environment:String}';
const WINDOW = (column: string) => `${column} >= fromUnixTimestamp64Milli({fromMs:Int64}) AND ${column} <= fromUnixTimestamp64Milli({toMs:Int64})`;
const SERVED = `${SCOPE} AND flag_key = {flagKey:String} AND variant != '' AND ${WINDOW('timestamp')}`;

/** Per targeting key: the arm it was served last and that arm's value. */
const KEY_ARMS = `key_arms AS (
  SELECT targeting_key_hash, argMax(variant, timestamp) AS arm, argMax(value, timestamp) AS served
  FROM evaluation_events WHERE ${SERVED} AND targeting_key_hash != ''
  GROUP BY targeting_key_hash)`;

/** The value each arm served, as [(value, arm)]: how a `flags` entry finds its arm. */
const VALUE_ARMS = `value_arms AS (
  SELECT groupArray((value, arm)) AS pairs FROM (
    SELECT value, any(variant) AS arm FROM evaluation_events WHERE ${SERVED} GROUP BY value))`;

/** The arm an outcome row `o` is attributed to ('' when none). */
const ATTRIBUTED_ARM = `if(mapContains(o.flags, {flagKey:String}), arrayFirst(x -> x.1 = o.flags[{flagKey:String}], va.pairs).2, ka.arm)`;

export class BanditWarehouse {
  constructor(private readonly analytics: Analytics) {}

  /** Trials and successes per arm from evaluations and `conversionEvent` outcome events. */
  async conversions(scope: ArmScope, conversionEvent: string): Promise<ArmStats[]> {
    const rows = await this.select<{ arm: string; trials: string; successes: string }>(
      `WITH ${KEY_ARMS},
       converted AS (
         SELECT DISTINCT o.targeting_key_hash AS targeting_key_hash
         FROM outcome_events AS o INNER JOIN key_arms AS ka ON ka.targeting_key_hash = o.targeting_key_hash
         WHERE ${OUTCOME_SCOPE} AND o.event = {conversionEvent:String} AND ${WINDOW('o.timestamp')}
           AND (NOT mapContains(o.flags, {flagKey:String}) OR o.flags[{flagKey:String}] = ka.served))
       SELECT ka.arm AS arm, count() AS trials, countIf(c.targeting_key_hash != '') AS successes
       FROM key_arms AS ka LEFT JOIN converted AS c ON c.targeting_key_hash = ka.targeting_key_hash
       GROUP BY arm`,
      { ...scope, conversionEvent },
    );
    return rows.map((r) => ({ name: r.arm, trials: Number(r.trials), successes: Number(r.successes) }));
  }

  /** Requests and errors per arm for the errors guardrail. */
  async errors(scope: ArmScope): Promise<ArmErrors[]> {
    const [served, reported] = await Promise.all([
      this.select<{ arm: string; requests: string }>(
        `SELECT variant AS arm, sum(evaluations) AS requests FROM evaluation_events WHERE ${SERVED} GROUP BY arm`,
        { ...scope },
      ),
      this.select<{ arm: string; errors: string }>(
        `WITH ${KEY_ARMS}, ${VALUE_ARMS}
         SELECT ${ATTRIBUTED_ARM} AS arm, count() AS errors
         FROM outcome_events AS o ANY LEFT JOIN key_arms AS ka ON ka.targeting_key_hash = o.targeting_key_hash CROSS JOIN value_arms AS va
         WHERE ${OUTCOME_SCOPE} AND o.event = 'error' AND ${WINDOW('o.timestamp')}
         GROUP BY arm HAVING arm != ''`,
        { ...scope },
      ),
    ]);
    const arms = new Map<string, ArmErrors>();
    for (const r of served) arms.set(r.arm, { name: r.arm, requests: Number(r.requests), errors: 0 });
    for (const r of reported) {
      const arm = arms.get(r.arm);
      // An error attributed to an arm that served nothing in the window has no rate to raise.
      if (arm) arm.errors += Number(r.errors);
    }
    return [...arms.values()];
  }

  private async select<T>(query: string, params: Record<string, unknown>): Promise<T[]> {
    const result = await this.analytics.client.query({ query, query_params: params, format: 'JSONEachRow' });
    return result.json<T>();
  }
}

import type { Analytics } from '../../../analytics/client';
import type { AnalyticsSink } from '../../../analytics/rows';
import type { Config } from '../../config';
import type { ListenerRoutes } from '../../http/route';
import type { ContextEntry, ContextRing } from '../evaluation/contexts';
import type { SnapshotStore } from '../evaluation/snapshots';
import { ContextAttributeFilter } from './attributes';
import { RecentContextRecorder } from './recorder';
import { simulateRoutes } from './routes';
import { SimulateService } from './service';
import { RecentContextWarehouse } from './warehouse';

/** A key's context is written at most once a minute per instance: a busy key does not write a row per request. */
const RECORD_INTERVAL_MS = 60_000;
/** Keys remembered per generation (about 100 bytes each; two generations at most) and contexts waiting for the next turn. */
const MAX_TRACKED_KEYS = 50_000;
const MAX_PENDING_CONTEXTS = 10_000;

export interface SimulateFeature {
  /** Give to the evaluation feature: told every context its ring takes, it feeds the recent-contexts warehouse. */
  recordContext(entry: ContextEntry): void;
  /** The replaying service over evaluation's snapshots and context ring (one per process). */
  service(evaluation: { snapshots: SnapshotStore; contexts: ContextRing }): SimulateService;
  /** The route, over that service. */
  routes(evaluation: { snapshots: SnapshotStore; contexts: ContextRing }): ListenerRoutes;
}

/**
 * Counterfactual simulation (docs/simulate.md): the recorder that keeps recent
 * contexts in the warehouse (every process that evaluates), and the route that replays them.
 */
export function createSimulateFeature(deps: { config: Config; analytics: Analytics; sink: AnalyticsSink }): SimulateFeature {
  const { config } = deps;
  const filter = new ContextAttributeFilter(config.CONTEXT_ATTRIBUTE_DENYLIST, config.CONTEXT_ATTRIBUTE_MAX_BYTES);
  const recorder = new RecentContextRecorder({ sink: deps.sink, filter, intervalMs: RECORD_INTERVAL_MS, maxTracked: MAX_TRACKED_KEYS, maxPending: MAX_PENDING_CONTEXTS });
  let simulate: SimulateService | undefined;
  const service = (evaluation: { snapshots: SnapshotStore; contexts: ContextRing }) =>
    (simulate ??= new SimulateService({
      snapshots: evaluation.snapshots,
      ring: evaluation.contexts,
      warehouse: new RecentContextWarehouse(deps.analytics),
      filter,
      workBudget: { conditions: config.EVAL_BUDGET_CONDITIONS, regexMs: config.EVAL_BUDGET_REGEX_MS },
    }));
  return {
    recordContext: recorder.offer,
    service,
    routes: (evaluation) => ({ control: simulateRoutes({ simulate: service(evaluation) }) }),
  };
}

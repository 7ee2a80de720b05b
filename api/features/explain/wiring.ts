import type { AnyRoute } from '../../http/route';
import type { SnapshotStore } from '../evaluation/snapshots';
import { explainRoutes } from './routes';
import { ExplainService } from './service';

/** Explain reads the evaluation feature's snapshots, so it exists wherever evaluation does. */
export function explainFeatureRoutes(deps: { snapshots: SnapshotStore }): AnyRoute[] {
  return explainRoutes({ explain: new ExplainService(deps) });
}

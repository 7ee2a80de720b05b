import type { ListenerRoutes } from '../../http/route';
import type { SnapshotStore } from '../evaluation/snapshots';
import { explainRoutes } from './routes';
import { ExplainService } from './service';

/** Explain reads the evaluation feature's snapshots, so it exists wherever evaluation does. */
export function createExplainFeature(deps: { snapshots: SnapshotStore }): { routes: ListenerRoutes } {
  return { routes: { control: explainRoutes({ explain: new ExplainService(deps) }) } };
}

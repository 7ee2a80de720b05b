import { ENVIRONMENTS } from '../../domain/environments';
import type { ReadinessCheck } from '../../lib/management/readiness';
import type { Metrics } from '../../lib/metrics/metrics';
import type { SnapshotStore } from './snapshots';

/**
 * The snapshots' metrics (docs/operations.md#metrics), per environment name: a version that
 * moves with every change applied, the age of what is served (since the snapshot last changed
 * or was last confirmed against Postgres by the load or a reconcile), and how long changes took
 * from commit to being served here. Read from the store's change feed and stats; the
 * evaluation path is not touched. Call it once the store has started (loaded).
 */
export function watchSnapshots(metrics: Metrics, snapshots: SnapshotStore): void {
  const versions: Record<string, number> = {};
  const changedAt: Record<string, number> = {};
  for (const environment of ENVIRONMENTS) versions[environment] = 0;
  const loadedAt = Date.now();
  snapshots.onChange(({ event }) => {
    const now = Date.now();
    const environment = event.data.environment;
    versions[environment] = (versions[environment] ?? 0) + 1;
    changedAt[environment] = now;
    const committedAt = Date.parse(event.timestamp);
    if (Number.isFinite(committedAt)) metrics.propagation.observe(Math.max(0, now - committedAt) / 1000);
  });
  metrics.gauge({
    name: 'flagship_snapshot_version',
    help: 'Changes applied to the evaluation snapshot since this process loaded it, by environment',
    labelNames: ['environment'],
    collect: (set) => {
      for (const environment of ENVIRONMENTS) set({ environment }, versions[environment]);
    },
  });
  metrics.gauge({
    name: 'flagship_snapshot_age_seconds',
    help: 'Seconds since the evaluation snapshot last changed or was confirmed current against Postgres, by environment',
    labelNames: ['environment'],
    collect: (set) => {
      const stats = snapshots.snapshotStats();
      const reconciledAt = stats.lastReconcileAt === null ? loadedAt : Math.max(loadedAt, Date.parse(stats.lastReconcileAt));
      const now = Date.now();
      for (const environment of ENVIRONMENTS) set({ environment }, Math.max(0, now - Math.max(reconciledAt, changedAt[environment] ?? 0)) / 1000);
    },
  });
  metrics.gauge({
    name: 'flagship_snapshot_flags',
    help: 'Flags held in the evaluation snapshots (every service and environment)',
    collect: (set) => set({}, snapshots.snapshotStats().flags),
  });
}

/**
 * The data plane's readiness condition (docs/operations.md#readiness): the snapshots loaded.
 * Only the first load counts; a Postgres outage later leaves the process serving what it holds.
 */
export function snapshotReadiness(snapshots: SnapshotStore): ReadinessCheck {
  return () => (snapshots.snapshotStats().ready ? undefined : 'evaluation snapshots not loaded yet');
}

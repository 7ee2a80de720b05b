/**
 * A flag's rollbacks (or, without a flag, the project's), newest first: every restore is audited as flag.update with
 * metadata.rollbackTo (api/features/flags/service.ts), and says why through its metadata: a
 * canary's abort or breach (metadata.canary), the guardrail or the auto-rollback endpoint
 * (metadata.autoRollback), otherwise a person's rollback from the history.
 */
import { useAudit } from '../../api/resources';
import { DataTable } from '../data-table';
import { ActorName } from '../history/actor';
import { LoadState } from '../status';
import { when } from './format';
import type { AuditEntry } from './types';

/** How far back the history looks: the latest flag.update entries of the flag (or project). */
const LOOKBACK = 100;

interface RollbackMeta {
  rollbackTo?: number;
  /** The version the restore wrote. */
  version?: number;
  canary?: { action?: string; reason?: string; pipelineId?: string; requestedBy?: string };
  autoRollback?: { fromVersion?: number; reason?: string };
}

function whyOf(entry: AuditEntry): string {
  const m = entry.metadata as RollbackMeta;
  if (m.canary?.action === 'aborted') return `Canary aborted${m.canary.requestedBy ? ` by ${m.canary.requestedBy}` : ''}: ${m.canary.reason ?? ''}`;
  if (m.canary?.action === 'rolled_back') return `Canary gate failed: ${m.canary.reason ?? ''}`;
  if (m.canary) return `Canary ${m.canary.action ?? 'restore'}: ${m.canary.reason ?? ''}`;
  if (m.autoRollback) return `${entry.actor === 'system:guardrail' ? 'Guardrail' : 'Auto-rollback'} tripped on v${m.autoRollback.fromVersion ?? '?'}: ${m.autoRollback.reason ?? ''}`;
  return 'Rolled back by hand';
}

/** What a restore did, in one sentence: the version it wrote, the content it brought back, what caused it and when. */
export function restoreSentence(entry: AuditEntry): string {
  const m = entry.metadata as RollbackMeta;
  const cause =
    m.canary?.action === 'aborted'
      ? 'the canary abort'
      : m.canary?.action === 'rolled_back'
        ? "the canary's failed gate"
        : m.canary
          ? 'the canary'
          : m.autoRollback
            ? entry.actor === 'system:guardrail'
              ? 'the guardrail'
              : 'auto-rollback'
            : `${entry.actorDisplay.name} by hand`;
  return `Restored as version ${m.version ?? '?'} (the content of version ${m.rollbackTo}) by ${cause} at ${when(entry.timestamp)}`;
}

/** The restores among the flag's (or project's) latest changes, newest first; `refreshKey` reloads them when it changes. */
export function useRollbacks(projectId: string, flagId: string | undefined, refreshKey?: unknown) {
  const history = useAudit({ projectId, resourceId: flagId, resourceType: 'flag', action: 'flag.update', limit: LOOKBACK }, refreshKey);
  const rollbacks = history.data?.logs.filter((e) => typeof (e.metadata as RollbackMeta).rollbackTo === 'number') ?? [];
  return { history, rollbacks };
}

export function RollbackHistory({ projectId, flagId, refreshKey }: { projectId: string; flagId?: string; refreshKey?: unknown }) {
  const { history, rollbacks } = useRollbacks(projectId, flagId, refreshKey);
  return (
    <section aria-labelledby="rollbacks" className="rs-panel">
      <h2 id="rollbacks">Rollback history</h2>
      <LoadState loading={history.loading} error={history.error}>
        <DataTable
          frame="rs-scroll"
          caption="Rollbacks, newest first"
          rows={rollbacks}
          rowKey={(e) => e.id}
          empty={`No rollbacks among the latest ${LOOKBACK} flag changes${flagId ? ' of this flag' : ''}.`}
          columns={[
            { header: 'When', cell: (e) => when(e.timestamp) },
            ...(flagId ? [] : [{ header: 'Flag', cell: (e: AuditEntry) => <code>{e.resourceName}</code> }]),
            {
              header: 'Restored',
              cell: (e) => `content of v${(e.metadata as RollbackMeta).rollbackTo}${e.changes.length ? ` (${e.changes.map((c) => c.field).join(', ')})` : ''}`,
            },
            { header: 'By', cell: (e) => <ActorName display={e.actorDisplay} recorded={e.actor} /> },
            { header: 'Why', cell: whyOf },
          ]}
        />
      </LoadState>
    </section>
  );
}

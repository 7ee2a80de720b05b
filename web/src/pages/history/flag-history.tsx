import { useEffect, useId, useRef, useState } from 'react';
import { Link, useParams } from 'wouter';
import { api, call } from '../../api/client';
import { useFlagHistory } from '../../api/resources';
import { useAction } from '../../components/forms';
import { ActorName } from '../../components/history/actor';
import { diffJson, type FieldChange } from '../../components/history/diff';
import { DiffView } from '../../components/history/diff-view';
import { contentOf, type FlagVersion } from '../../components/history/flag-content';
import { FlagScopePicker, scopeQuery, useFlagScope } from '../../components/history/flag-scope';
import { Pager } from '../../components/history/pager';
import { When } from '../../components/history/value';
import { useTitle } from '../../page-title';

const PAGE_SIZE = 20;

/** The top-level fields a change touched (`targeting`, `name`), for a version's one-line summary. */
function touchedFields(changes: FieldChange[]): string[] {
  return [...new Set(changes.map((c) => c.path.split(/[.[]/)[0]))];
}

const CHANGE_WORDS: Record<FlagVersion['changeType'], string> = {
  create: 'Created',
  update: 'Updated',
  toggle: 'Toggled',
  delete: 'Deleted',
  rollback: 'Rolled back',
};

/**
 * A flag's versions (the history of docs/api-reference.md#flags), newest first: who changed what
 * and when, each version's field-level diff against the one before it, and rollback to any earlier
 * version (a new version with that version's content) after a confirm step.
 */
export default function FlagHistory() {
  const { projectId, flagKey } = useParams<{ projectId: string; flagKey: string }>();
  useTitle(`History of ${flagKey}`);
  const { serviceId, environment } = useFlagScope();
  const [offset, setOffset] = useState(0);
  useEffect(() => setOffset(0), [serviceId, environment]);

  // One more than a page: the version before the page's oldest, for that version's diff.
  const history = useFlagHistory(flagKey, { serviceId, environment, limit: PAGE_SIZE + 1, offset }, { enabled: !!serviceId });
  const [open, setOpen] = useState<ReadonlySet<number>>(new Set());
  const [confirming, setConfirming] = useState<number | undefined>();
  const rollbackCall = useAction();
  const [rolledBack, setRolledBack] = useState<{ from: number; to: number } | undefined>();
  // After a rollback the confirm button is gone: focus goes to what happened, not to the page's start.
  const notice = useRef<HTMLDivElement>(null);
  useEffect(() => {
    if (rolledBack) notice.current?.focus();
  }, [rolledBack]);

  const versions = history.data?.versions ?? [];
  const shown = versions.slice(0, PAGE_SIZE);
  const total = history.data?.total ?? 0;
  const latest = offset === 0 ? shown[0]?.version : undefined;
  const flagId = shown[0]?.snapshot.id;
  const query = scopeQuery(serviceId, environment);

  function toggle(version: number) {
    setOpen((current) => {
      const next = new Set(current);
      if (!next.delete(version)) next.add(version);
      return next;
    });
  }

  async function rollback(version: number) {
    setRolledBack(undefined);
    await rollbackCall.run('rollback', async () => {
      const flag = await call(api.POST('/api/flags/{key}/rollback/{version}', { params: { path: { key: flagKey, version }, query: { serviceId, environment } } }));
      setRolledBack({ from: version, to: flag.version });
      setConfirming(undefined);
      setOffset(0);
      await history.reload();
    });
  }

  return (
    <>
      <h1>
        History of <code>{flagKey}</code>
      </h1>
      <p className="page-links">
        {serviceId && (
          <>
            <Link href={`/projects/${encodeURIComponent(projectId)}/flags/${encodeURIComponent(flagKey)}?${query}`}>Back to the flag</Link>
            <Link href={`/projects/${encodeURIComponent(projectId)}/flags/${encodeURIComponent(flagKey)}/explain?${query}`}>Explain a context</Link>
          </>
        )}
        {flagId && (
          // The audit trail records each copy (service and environment) of a flag under its id.
          <Link href={`/projects/${encodeURIComponent(projectId)}/audit?${new URLSearchParams({ resourceType: 'flag', resourceId: flagId }).toString()}`}>
            Audit trail of this flag in {environment}
          </Link>
        )}
      </p>
      <FlagScopePicker projectId={projectId} />
      <div role="status" ref={notice} tabIndex={-1} className={rolledBack ? 'notice' : undefined}>
        {rolledBack && `Rolled back to version ${rolledBack.from}: the flag is now at version ${rolledBack.to}, with version ${rolledBack.from}'s content.`}
      </div>
      {rollbackCall.error && (
        <p role="alert" className="form-error">
          The rollback failed: {rollbackCall.error.message}
        </p>
      )}
      {!serviceId ? (
        <p>Choose the service whose copy of this flag to show.</p>
      ) : history.error ? (
        <p role="alert" className="form-error">
          {history.error.message}
        </p>
      ) : history.loading ? (
        <p role="status" className="muted">
          Loading…
        </p>
      ) : !shown.length ? (
        <p>This flag has no versions in {environment}.</p>
      ) : (
        <>
          <p className="muted">
            {total} version{total === 1 ? '' : 's'} in {environment}, newest first.
          </p>
          <ol className="versions" aria-label="Versions">
            {shown.map((entry, i) => (
              <VersionItem
                key={entry.id}
                entry={entry}
                previous={versions[i + 1]}
                isLatest={entry.version === latest}
                expanded={open.has(entry.version)}
                onToggle={() => toggle(entry.version)}
                confirming={confirming === entry.version}
                onAskRollback={() => {
                  setRolledBack(undefined);
                  rollbackCall.clearError();
                  setConfirming(entry.version);
                }}
                onCancelRollback={() => setConfirming(undefined)}
                onRollback={() => void rollback(entry.version)}
                rollingBack={rollbackCall.running !== undefined}
              />
            ))}
          </ol>
          <Pager label="Versions pages" offset={offset} limit={PAGE_SIZE} shown={shown.length} total={total} onOffset={setOffset} />
        </>
      )}
    </>
  );
}

interface VersionItemProps {
  entry: FlagVersion;
  /** The version before this one, when known (undefined for the first). */
  previous?: FlagVersion;
  isLatest: boolean;
  expanded: boolean;
  onToggle: () => void;
  confirming: boolean;
  onAskRollback: () => void;
  onCancelRollback: () => void;
  onRollback: () => void;
  rollingBack: boolean;
}

function VersionItem({ entry, previous, isLatest, expanded, onToggle, confirming, onAskRollback, onCancelRollback, onRollback, rollingBack }: VersionItemProps) {
  const id = useId();
  const confirmButton = useRef<HTMLButtonElement>(null);
  // A delete's snapshot is the flag before it: nothing of it remains afterwards.
  // Without the version before (only the first has none), there is nothing to compare with.
  const changes =
    entry.changeType === 'delete'
      ? diffJson(contentOf(entry.snapshot), undefined)
      : previous || entry.changeType === 'create'
        ? diffJson(previous && contentOf(previous.snapshot), contentOf(entry.snapshot))
        : undefined;
  const fields = changes ? touchedFields(changes) : [];
  const heading = `Version ${entry.version}`;

  const rollbackButton = useRef<HTMLButtonElement>(null);
  const wasConfirming = useRef(false);
  useEffect(() => {
    // Into the confirm step: focus its button; out of it (cancelled): back to where it began.
    if (confirming) confirmButton.current?.focus();
    else if (wasConfirming.current && document.activeElement === document.body) rollbackButton.current?.focus();
    wasConfirming.current = confirming;
  }, [confirming]);

  return (
    <li className="version" aria-labelledby={`${id}-heading`}>
      <h2 id={`${id}-heading`}>
        {heading} <span className={`change-type change-${entry.changeType}`}>{CHANGE_WORDS[entry.changeType]}</span>
        {isLatest && <span className="current-badge">Current</span>}
      </h2>
      <p className="muted">
        By{' '}
        <strong>
          <ActorName display={entry.actorDisplay} recorded={entry.actor} />
        </strong>{' '}
        · <When at={entry.createdAt} />
      </p>
      <p>
        {entry.changeType === 'create'
          ? 'The first version.'
          : !changes
            ? 'The version before this one is no longer kept.'
            : fields.length
              ? `Changed: ${fields.join(', ')}`
              : 'No field changed.'}
      </p>
      <div className="actions">
        {changes && (
          <button type="button" aria-expanded={expanded} aria-controls={`${id}-diff`} onClick={onToggle}>
            {expanded ? 'Hide' : 'Show'} changes in version {entry.version}
          </button>
        )}
        {!isLatest && entry.changeType !== 'delete' && (
          <button ref={rollbackButton} type="button" onClick={onAskRollback} disabled={confirming}>
            Roll back to version {entry.version}
          </button>
        )}
      </div>
      {confirming && (
        <div className="confirm" role="group" aria-labelledby={`${id}-confirm`}>
          <p id={`${id}-confirm`}>
            Roll back to version {entry.version}? The flag gets a new version with version {entry.version}'s content; evaluations change at once.
          </p>
          <button ref={confirmButton} type="button" className="primary" onClick={onRollback} disabled={rollingBack}>
            {rollingBack ? 'Rolling back…' : `Confirm rollback to version ${entry.version}`}
          </button>
          <button type="button" onClick={onCancelRollback} disabled={rollingBack}>
            Cancel
          </button>
        </div>
      )}
      <div id={`${id}-diff`} hidden={!expanded}>
        {expanded && changes && (
          <DiffView
            changes={changes}
            caption={entry.changeType === 'create' ? `${heading}: the flag as created` : `${heading} compared with version ${previous?.version ?? entry.version - 1}`}
          />
        )}
      </div>
    </li>
  );
}

import { Fragment, useId, useState, type FormEvent } from 'react';
import { Link, useLocation, useParams, useSearch } from 'wouter';
import type { paths } from '../../api/client';
import { useAudit, useAuditFacets, useMembers } from '../../api/resources';
import { ActorName, reasonOf } from '../../components/history/actor';
import { LoadState } from '../../components/status';
import { diffJson } from '../../components/history/diff';
import { DiffView } from '../../components/history/diff-view';
import { isEnvironment } from '../../api/environments';
import { scopeQuery } from '../../components/history/flag-scope';
import { Pager } from '../../components/history/pager';
import { JsonValue, When } from '../../components/history/value';

type AuditEntry = paths['/api/audit']['get']['responses'][200]['content']['application/json']['logs'][number];

const PAGE_SIZE = 25;
/** The filters the API takes (GET /api/audit), kept in the address so a filtered view can be reloaded, shared and gone back to. */
const FILTERS = ['action', 'resourceType', 'resourceId', 'userId', 'actor', 'startDate', 'endDate'] as const;
type Filter = (typeof FILTERS)[number];

/** Bookkeeping fields that change on every write: they would only add noise to an entry's diff. */
function withoutBookkeeping(record: Record<string, unknown> | null): Record<string, unknown> | undefined {
  if (!record) return undefined;
  // eslint-disable-next-line @typescript-eslint/no-unused-vars
  const { version, updatedAt, ...rest } = record;
  return rest;
}

/**
 * A project's audit trail (docs/api-reference.md#audit-log), newest first, filtered by action,
 * resource, member and dates, paged.
 */
export default function Audit() {
  const { projectId } = useParams<{ projectId: string }>();
  const search = new URLSearchParams(useSearch());
  const [location, navigate] = useLocation();
  const filters = Object.fromEntries(FILTERS.flatMap((name) => (search.get(name) ? [[name, search.get(name)!]] : []))) as Partial<Record<Filter, string>>;
  const offset = Math.max(0, Number(search.get('offset')) || 0);
  const key = JSON.stringify(filters);

  const logs = useAudit({ projectId, ...filters, limit: PAGE_SIZE, offset });
  const members = useMembers(projectId);
  const facets = useAuditFacets(projectId);

  function go(next: Partial<Record<Filter, string>>, nextOffset = 0) {
    const query = new URLSearchParams(Object.entries(next).filter(([, v]) => v) as [string, string][]);
    if (nextOffset) query.set('offset', String(nextOffset));
    const text = query.toString();
    navigate(text ? `${location}?${text}` : location);
  }

  function onFilter(event: FormEvent<HTMLFormElement>) {
    event.preventDefault();
    const data = new FormData(event.currentTarget);
    go(Object.fromEntries(FILTERS.map((name) => [name, String(data.get(name) ?? '').trim()])));
  }

  const id = useId();
  const filtered = Object.keys(filters).length > 0;
  return (
    <>
      <h1>Audit trail</h1>
      <form key={key} className="filters" onSubmit={onFilter} aria-label="Filter the audit trail">
        <div className="field">
          <label htmlFor={`${id}-action`}>Action</label>
          <PickList id={`${id}-action`} name="action" any="Any action" value={filters.action} choices={facets.data?.actions.map((action) => ({ value: action, label: action }))} />
        </div>
        <div className="field">
          <label htmlFor={`${id}-type`}>Resource type</label>
          <PickList id={`${id}-type`} name="resourceType" any="Any type" value={filters.resourceType} choices={facets.data?.resourceTypes.map((type) => ({ value: type, label: type }))} />
        </div>
        <div className="field">
          <label htmlFor={`${id}-actor`}>Who</label>
          <PickList
            id={`${id}-actor`}
            name="actor"
            any="Anyone or anything"
            value={filters.actor}
            choices={facets.data?.actors.map((a) => ({ value: a.actor, label: a.actorDisplay.kind === 'user' && a.actorDisplay.email ? `${a.actorDisplay.name} (${a.actorDisplay.email})` : a.actorDisplay.name }))}
          />
        </div>
        <div className="field">
          <label htmlFor={`${id}-resource`}>Resource id</label>
          <input id={`${id}-resource`} name="resourceId" defaultValue={filters.resourceId} maxLength={200} aria-describedby={`${id}-resource-hint`} />
          <p id={`${id}-resource-hint`} className="hint">
            Or use “Only this resource” on an entry.
          </p>
        </div>
        <div className="field">
          <label htmlFor={`${id}-user`}>Member</label>
          <select id={`${id}-user`} name="userId" defaultValue={filters.userId ?? ''} aria-describedby={`${id}-user-hint`}>
            <option value="">Anyone</option>
            {filters.userId && !members.data?.members.some((m) => m.userId === filters.userId) && <option value={filters.userId}>{filters.userId}</option>}
            {members.data?.members.map((member) => (
              <option key={member.userId} value={member.userId}>
                {member.name} ({member.email})
              </option>
            ))}
          </select>
          <p id={`${id}-user-hint`} className="hint">
            A member's changes, with those of the API tokens they created.
          </p>
        </div>
        <div className="field">
          <label htmlFor={`${id}-from`}>From</label>
          <input id={`${id}-from`} name="startDate" type="date" defaultValue={filters.startDate} />
        </div>
        <div className="field">
          <label htmlFor={`${id}-to`}>To (inclusive)</label>
          <input id={`${id}-to`} name="endDate" type="date" defaultValue={filters.endDate} />
        </div>
        <div className="filter-actions">
          <button type="submit" className="primary">
            Apply filters
          </button>
          {filtered && (
            <button type="button" onClick={() => go({})}>
              Clear filters
            </button>
          )}
        </div>
      </form>
      <LoadState loading={logs.loading} error={logs.error}>
        {logs.data && (
          <>
            <p className="muted" role="status">
              {logs.data.total} entr{logs.data.total === 1 ? 'y' : 'ies'}
              {filtered ? ' match the filters' : ''}, newest first.
            </p>
            {logs.data.logs.length > 0 && <AuditTable projectId={projectId} entries={logs.data.logs} onlyResource={(e) => go({ resourceType: e.resourceType, resourceId: e.resourceId })} />}
            <Pager label="Audit trail pages" offset={offset} limit={PAGE_SIZE} shown={logs.data.logs.length} total={logs.data.total} onOffset={(next) => go(filters, next)} />
          </>
        )}
      </LoadState>
    </>
  );
}

function AuditTable({ projectId, entries, onlyResource }: { projectId: string; entries: AuditEntry[]; onlyResource: (entry: AuditEntry) => void }) {
  const [open, setOpen] = useState<ReadonlySet<string>>(new Set());
  const toggle = (entryId: string) =>
    setOpen((current) => {
      const next = new Set(current);
      if (!next.delete(entryId)) next.add(entryId);
      return next;
    });
  return (
    <div className="table-scroll">
      <table className="audit">
        <caption className="visually-hidden">Audit entries, newest first</caption>
        <thead>
          <tr>
            <th scope="col">When</th>
            <th scope="col">Who</th>
            <th scope="col">Action</th>
            <th scope="col">Resource</th>
            <th scope="col">Changes</th>
          </tr>
        </thead>
        <tbody>
          {entries.map((entry) => {
            const expanded = open.has(entry.id);
            const detailsId = `audit-${entry.id}`;
            return (
              <Fragment key={entry.id}>
                <tr>
                  <td>
                    <When at={entry.timestamp} />
                  </td>
                  <td>
                    <ActorName display={entry.actorDisplay} recorded={entry.actor} />
                  </td>
                  <td>
                    <code>{entry.action}</code>
                  </td>
                  <td>
                    <ResourceCell projectId={projectId} entry={entry} />
                    <button type="button" className="link-button" onClick={() => onlyResource(entry)}>
                      Only this resource<span className="visually-hidden">: {entry.resourceName ?? entry.resourceId}</span>
                    </button>
                  </td>
                  <td className="audit-changes">
                    {changeSummary(entry)}
                    {reasonOf(entry.metadata) && <p className="audit-reason">Reason: {reasonOf(entry.metadata)}</p>}
                    <button type="button" className="link-button" aria-expanded={expanded} aria-controls={detailsId} onClick={() => toggle(entry.id)}>
                      {expanded ? 'Hide' : 'Show'} details<span className="visually-hidden"> of {entry.action} at {new Date(entry.timestamp).toLocaleString()}</span>
                    </button>
                  </td>
                </tr>
                <tr id={detailsId} hidden={!expanded} className="audit-details">
                  <td colSpan={5}>{expanded && <EntryDetails entry={entry} />}</td>
                </tr>
              </Fragment>
            );
          })}
        </tbody>
      </table>
    </div>
  );
}

/**
 * A filter's choices as a pick list: the values present in the trail (GET /api/audit/facets);
 * a value from the address that the trail no longer has stays choosable.
 */
function PickList({ id, name, any, value, choices }: { id: string; name: Filter; any: string; value?: string; choices?: { value: string; label: string }[] }) {
  return (
    <select id={id} name={name} defaultValue={value ?? ''} key={choices ? 'loaded' : 'loading'}>
      <option value="">{any}</option>
      {value && !choices?.some((c) => c.value === value) && <option value={value}>{value}</option>}
      {choices?.map((choice) => (
        <option key={choice.value} value={choice.value}>
          {choice.label}
        </option>
      ))}
    </select>
  );
}

/** A line on what an entry changed: which fields for an update; a whole creation or removal says so. */
function changeSummary(entry: AuditEntry) {
  if (!entry.before && entry.after) return 'Created';
  if (entry.before && !entry.after) return 'Removed';
  const fields = entry.changes.map((c) => c.field).filter((field) => field !== 'version' && field !== 'updatedAt');
  return fields.length ? fields.join(', ') : <span className="muted">—</span>;
}

function ResourceCell({ projectId, entry }: { projectId: string; entry: AuditEntry }) {
  const label = (
    <>
      {entry.resourceType} <code title={entry.resourceName && entry.resourceName !== entry.resourceId ? `${entry.resourceName} (${entry.resourceId})` : entry.resourceId}>{entry.resourceName ?? entry.resourceId}</code>
    </>
  );
  const { serviceId, environment } = entry.metadata as { serviceId?: unknown; environment?: unknown };
  // A flag's entry links to that copy's history (the entry's metadata names its service and environment).
  if (entry.resourceType === 'flag' && entry.resourceName && typeof serviceId === 'string' && isEnvironment(environment)) {
    const href = `/projects/${encodeURIComponent(projectId)}/flags/${encodeURIComponent(entry.resourceName)}/history?${scopeQuery(serviceId, environment)}`;
    return (
      <div>
        <Link href={href}>{label}</Link> <span className="muted">({environment as string})</span>
      </div>
    );
  }
  return <div>{label}</div>;
}

function EntryDetails({ entry }: { entry: AuditEntry }) {
  const changes = diffJson(withoutBookkeeping(entry.before), withoutBookkeeping(entry.after));
  const metadata = Object.entries(entry.metadata);
  return (
    <div className="entry-details">
      {entry.before || entry.after ? <DiffView changes={changes} caption={`Fields ${entry.action} changed`} /> : <p className="muted">No before/after recorded for this action.</p>}
      {(metadata.length > 0 || entry.ipAddress) && (
        <dl className="facts">
          {metadata.map(([name, value]) => (
            <Fragment key={name}>
              <dt>{name}</dt>
              <dd>
                <JsonValue value={value} />
              </dd>
            </Fragment>
          ))}
          {entry.ipAddress && (
            <>
              <dt>IP address</dt>
              <dd>{entry.ipAddress}</dd>
            </>
          )}
        </dl>
      )}
    </div>
  );
}

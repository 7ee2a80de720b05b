import { Link, useLocation, useParams, useSearch } from 'wouter';
import { useChangeRequests } from '../../api/resources';
import { environmentsOf, changeRequestHref, STATUS_WORDS, STATUSES, type ChangeRequestStatus } from '../../components/change-requests/model';
import { DataTable } from '../../components/data-table';
import { SelectField } from '../../components/forms';
import { Pager } from '../../components/history/pager';
import { When } from '../../components/history/value';
import { LoadState } from '../../components/status';

const PAGE_SIZE = 25;
/** The filter's value for every status (the API's status parameter left out). */
const ANY = 'any';

/**
 * A project's change requests (docs/change-requests.md), pending ones unless another status is
 * chosen: what each is, who opened it, where it applies and when. The filter lives in the address
 * (`?status=`), so a filtered inbox can be shared and survives a reload.
 */
export default function ChangeRequestInbox() {
  const { projectId } = useParams<{ projectId: string }>();
  const search = new URLSearchParams(useSearch());
  const [location, navigate] = useLocation();
  const chosen = search.get('status') ?? 'pending';
  const status = STATUSES.includes(chosen as ChangeRequestStatus) ? (chosen as ChangeRequestStatus) : undefined;
  const offset = Math.max(0, Number(search.get('offset')) || 0);
  const requests = useChangeRequests(projectId, { ...(status ? { status } : {}), limit: PAGE_SIZE, offset });
  const rows = requests.data?.changeRequests ?? [];

  function show(next: Record<string, string>) {
    navigate(`${location}?${new URLSearchParams({ status: chosen, ...next }).toString()}`, { replace: true });
  }

  return (
    <>
      <h1>Change requests</h1>
      <p className="muted">
        Changes to environments whose change policy wants approvals wait here until enough people approve them; then they apply, by hand or at their scheduled
        time.
      </p>
      <SelectField label="Status" name="status" value={status ?? ANY} onChange={(e) => show({ status: e.target.value })}>
        {STATUSES.map((s) => (
          <option key={s} value={s}>
            {STATUS_WORDS[s]}
          </option>
        ))}
        <option value={ANY}>Any status</option>
      </SelectField>
      <LoadState loading={requests.loading} error={requests.error}>
        <DataTable
          caption={`${status ? STATUS_WORDS[status] : 'All'} change requests`}
          rows={rows}
          rowKey={(r) => r.id}
          empty={status ? `No ${status} change requests.` : 'No change requests yet.'}
          columns={[
            { header: 'Title', cell: (r) => <Link href={changeRequestHref(projectId, r.id)}>{r.title}</Link> },
            { header: 'Author', cell: (r) => r.createdByName },
            { header: 'Environments', cell: (r) => environmentsOf(r).join(', ') },
            { header: 'Status', cell: (r) => <span className={`cr-status cr-status-${r.status}`}>{STATUS_WORDS[r.status]}</span> },
            { header: 'Scheduled', cell: (r) => (r.scheduledAt ? <When at={r.scheduledAt} /> : <span className="muted">Not scheduled</span>) },
          ]}
        />
        <Pager label="Change request pages" offset={offset} limit={PAGE_SIZE} shown={rows.length} total={requests.data?.total ?? 0} onOffset={(o) => show({ offset: String(o) })} />
      </LoadState>
    </>
  );
}

import { useEffect, useEffectEvent, useState } from 'react';
import { Link, useLocation, useParams, useSearch } from 'wouter';
import type { paths } from '../../api/client';
import { useFlags, useServices } from '../../api/resources';
import { DataTable } from '../../components/data-table';
import { environmentOption, rememberEnvironment, rememberedEnvironment } from '../../components/flags/environments';
import { FlagSwitch } from '../../components/flags/flag-switch';
import { RefusedButton } from '../../components/forms';
import { ENVIRONMENTS, FLAG_TYPES, flagHref, isEnvironment, type Environment, type FlagType } from '../../components/flags/model';
import { NEEDS, useProjectAccess } from '../../components/settings/access';
import { LoadState } from '../../components/status';

type ListedFlag = paths['/api/flags']['get']['responses'][200]['content']['application/json']['flags'][number];

const PAGE_SIZE = 25;
/** The other environments' states are read in one page of the API's largest size (docs/api-reference.md#flags). */
const STATES_PAGE_SIZE = 100;
/** Typing in the search box asks the server once the user pauses. */
const SEARCH_DELAY_MS = 250;

/**
 * A project's flags: filters (search, tags, enabled, type, service) and offset paging live in the
 * address, so a filtered view can be shared and survives reloads. The rows are the chosen
 * environment's (the last one chosen in the project when the address names none); every
 * environment's on/off state is a column whose cells open that environment's flag page, and the
 * chosen environment's cells switch.
 */
export default function FlagsList() {
  const { projectId } = useParams<{ projectId: string }>();
  const search = new URLSearchParams(useSearch());
  const environmentParam = search.get('environment');
  const [location, navigate] = useLocation();
  const filters = {
    serviceId: search.get('serviceId') ?? '',
    environment: isEnvironment(environmentParam) ? environmentParam : rememberedEnvironment(projectId),
    search: search.get('search') ?? '',
    tags: search.get('tags') ?? '',
    enabled: search.get('enabled') ?? '',
    type: search.get('type') ?? '',
    offset: Math.max(0, Number(search.get('offset')) || 0),
  };

  /** A filter change starts at the first page again; the history is not filled with keystrokes. */
  function setFilter(changes: Partial<Record<keyof typeof filters, string | number>>) {
    const next = new URLSearchParams();
    const merged = { ...filters, offset: 0, ...changes };
    for (const [name, value] of Object.entries(merged)) if (value !== '' && value !== 0) next.set(name, String(value));
    navigate(`${location}${next.size ? `?${next}` : ''}`, { replace: true });
  }

  const [searchText, setSearchText] = useState(filters.search);
  // Only the typed text starts the timer; the filters it merges with are read when it fires.
  const applySearch = useEffectEvent((text: string) => {
    if (text !== filters.search) setFilter({ search: text });
  });
  useEffect(() => {
    const timer = setTimeout(() => applySearch(searchText.trim()), SEARCH_DELAY_MS);
    return () => clearTimeout(timer);
  }, [searchText]);
  const [tagsText, setTagsText] = useState(filters.tags);
  const canCreate = useProjectAccess(projectId).can('flags:write');
  useEffect(() => {
    if (isEnvironment(environmentParam)) rememberEnvironment(projectId, environmentParam);
  }, [projectId, environmentParam]);

  const services = useServices(projectId);
  const serviceName = new Map(services.data?.services.map((s) => [s.id, s.name]));
  const flags = useFlags({
    projectId,
    environment: filters.environment,
    limit: PAGE_SIZE,
    offset: filters.offset,
    ...(filters.serviceId ? { serviceId: filters.serviceId } : {}),
    ...(filters.search ? { search: filters.search } : {}),
    ...(filters.tags ? { tags: filters.tags } : {}),
    ...(filters.enabled === 'true' || filters.enabled === 'false' ? { enabled: filters.enabled } : {}),
    ...(FLAG_TYPES.includes(filters.type as FlagType) ? { type: filters.type as FlagType } : {}),
    fields: 'key,name,type,enabled,tags,updatedAt,serviceId,environment,version',
  });
  const page = flags.data;
  const states = useEnvironmentStates(projectId, filters);
  const newHref = `/projects/${encodeURIComponent(projectId)}/flags/new${filters.serviceId ? `?serviceId=${encodeURIComponent(filters.serviceId)}` : ''}`;

  return (
    <>
      <div className="fl-page-head">
        <h1>Flags</h1>
        {canCreate ? (
          <Link href={newHref} className="fl-button primary">
            Create flag
          </Link>
        ) : (
          <RefusedButton className="primary" reason={NEEDS['flags:create']}>
            Create flag
          </RefusedButton>
        )}
      </div>
      <form className="fl-flag-filters" role="search" aria-label="Filter flags" onSubmit={(e) => e.preventDefault()}>
        <label>
          <span>Service</span>
          <select value={filters.serviceId} onChange={(e) => setFilter({ serviceId: e.target.value })}>
            <option value="">All services</option>
            {services.data?.services.map((s) => (
              <option key={s.id} value={s.id}>
                {s.name}
              </option>
            ))}
          </select>
        </label>
        <label>
          <span>Environment</span>
          <select value={filters.environment} onChange={(e) => setFilter({ environment: e.target.value })}>
            {ENVIRONMENTS.map((env) => (
              <option key={env} value={env}>
                {environmentOption(env)}
              </option>
            ))}
          </select>
        </label>
        <label>
          <span>Search</span>
          <input type="search" value={searchText} placeholder="Key or name" maxLength={200} onChange={(e) => setSearchText(e.target.value)} />
        </label>
        <label>
          <span>Tags</span>
          <input
            value={tagsText}
            placeholder="e.g. checkout, beta"
            maxLength={2000}
            aria-describedby="tags-hint"
            onChange={(e) => setTagsText(e.target.value)}
            onBlur={() => tagsText !== filters.tags && setFilter({ tags: tagsText.trim() })}
            onKeyDown={(e) => e.key === 'Enter' && setFilter({ tags: tagsText.trim() })}
          />
          <span id="tags-hint" className="visually-hidden">
            Comma-separated; flags with any of them
          </span>
        </label>
        <label>
          <span>State</span>
          <select value={filters.enabled} onChange={(e) => setFilter({ enabled: e.target.value })}>
            <option value="">Any</option>
            <option value="true">Enabled</option>
            <option value="false">Disabled</option>
          </select>
        </label>
        <label>
          <span>Type</span>
          <select value={filters.type} onChange={(e) => setFilter({ type: e.target.value })}>
            <option value="">Any</option>
            {FLAG_TYPES.map((t) => (
              <option key={t}>{t}</option>
            ))}
          </select>
        </label>
      </form>
      <LoadState loading={flags.loading} error={flags.error ?? services.error}>
        <DataTable
          frame="fl-table-scroll"
          className="fl-flags-table"
          caption={`Flags in ${filters.environment}, with their state in every environment`}
          rows={page?.flags ?? []}
          rowKey={(flag) => `${flag.serviceId}/${flag.key}`}
          empty={
            filters.search || filters.tags || filters.enabled || filters.type
              ? 'No flag matches these filters.'
              : services.data?.services.length === 0
                ? 'This project has no services yet: create one on the project overview, then its flags.'
                : 'No flags here yet.'
          }
          columns={[
            {
              header: 'Key',
              cell: (flag) => (
                <Link href={flagHref(projectId, flag.key!, flag.serviceId!, filters.environment)}>
                  <code className="fl-key" title={flag.key}>
                    {flag.key}
                  </code>
                </Link>
              ),
            },
            { header: 'Name', cell: (flag) => flag.name },
            ...(filters.serviceId ? [] : [{ header: 'Service', cell: (flag: ListedFlag) => serviceName.get(flag.serviceId!) ?? flag.serviceId }]),
            { header: 'Type', cell: (flag) => flag.type },
            ...ENVIRONMENTS.map((env) => ({
              header: environmentOption(env),
              cell: (flag: ListedFlag) => {
                const state = env === filters.environment ? flag.enabled : states[env]?.(`${flag.serviceId}/${flag.key}`);
                return (
                  <span className={`fl-env-cell fl-env-cell-${env}`}>
                    {env === filters.environment && (
                      <FlagSwitch
                        projectId={projectId}
                        flagKey={flag.key!}
                        serviceId={flag.serviceId!}
                        environment={env}
                        enabled={!!flag.enabled}
                        version={flag.version}
                        label={`Enabled: ${flag.key}`}
                      />
                    )}
                    <Link href={flagHref(projectId, flag.key!, flag.serviceId!, env)} aria-label={`${env}: ${env === filters.environment ? 'open' : stateWord(state)}`}>
                      {env === filters.environment ? 'open' : stateWord(state)}
                    </Link>
                  </span>
                );
              },
            })),
            {
              header: 'Tags',
              cell: (flag) => (
                <ul className="fl-tags" aria-label="Tags">
                  {flag.tags?.map((tag) => (
                    <li key={tag}>
                      <button
                        type="button"
                        className="fl-tag"
                        aria-label={`Filter by tag ${tag}`}
                        onClick={() => {
                          setTagsText(tag);
                          setFilter({ tags: tag });
                        }}
                      >
                        {tag}
                      </button>
                    </li>
                  ))}
                </ul>
              ),
            },
            { header: 'Updated', cell: (flag) => <time dateTime={flag.updatedAt}>{flag.updatedAt ? new Date(flag.updatedAt).toLocaleString() : ''}</time> },
          ]}
        />
        {page && page.flags.length > 0 && (
          <nav className="fl-pager" aria-label="Pages of flags">
            <button type="button" disabled={filters.offset === 0} onClick={() => setFilter({ ...filters, offset: Math.max(0, filters.offset - PAGE_SIZE) })}>
              Previous page
            </button>
            <span role="status">
              {filters.offset + 1}–{filters.offset + page.flags.length} of {page.total}
            </span>
            <button type="button" disabled={!page.hasMore} onClick={() => setFilter({ ...filters, offset: filters.offset + PAGE_SIZE })}>
              Next page
            </button>
          </nav>
        )}
      </LoadState>
    </>
  );
}

/** null: not created there; undefined: past the page of states read (or not read yet). */
const stateWord = (enabled: boolean | null | undefined) => (enabled === null ? 'not created' : enabled === undefined ? 'open' : enabled ? 'on' : 'off');

/**
 * The on/off state per flag (service/key) in the environments other than the chosen one, under the
 * same filters except the state filter, which is about the chosen environment.
 */
function useEnvironmentStates(projectId: string, filters: { environment: Environment; serviceId: string; search: string; tags: string; type: string }) {
  const query = (environment: Environment) => ({
    projectId,
    environment,
    limit: STATES_PAGE_SIZE,
    ...(filters.serviceId ? { serviceId: filters.serviceId } : {}),
    ...(filters.search ? { search: filters.search } : {}),
    ...(filters.tags ? { tags: filters.tags } : {}),
    ...(FLAG_TYPES.includes(filters.type as FlagType) ? { type: filters.type as FlagType } : {}),
    fields: 'key,serviceId,enabled',
  });
  const others = ENVIRONMENTS.filter((env) => env !== filters.environment);
  const first = useFlags(query(others[0]));
  const second = useFlags(query(others[1]));
  const byEnvironment: Partial<Record<Environment, (serviceAndKey: string) => boolean | null | undefined>> = {};
  [first, second].forEach((answer, i) => {
    const page = answer.data;
    if (!page) return;
    const enabled = new Map(page.flags.map((f) => [`${f.serviceId}/${f.key}`, !!f.enabled]));
    // Missing from a complete answer: not created there; from a partial one: unknown.
    byEnvironment[others[i]] = (serviceAndKey) => enabled.get(serviceAndKey) ?? (page.hasMore ? undefined : null);
  });
  return byEnvironment;
}

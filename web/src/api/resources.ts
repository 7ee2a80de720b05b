/**
 * Every read the console makes, one hook per resource, through TanStack Query:
 * - answers are cached by key, so a page visited again shows what it had while it refetches;
 * - an answer belongs to the key it was asked for, so an older request finishing late (a filter
 *   typed on, a flag switched) never replaces what the page now shows;
 * - `reload()` (after a mutation) invalidates the resource, so every view of it refetches;
 * - while a new key loads, the previous answer stays shown (no layout shift).
 * Failures arrive as ApiError (client.ts), never retried: the server's words are shown at once.
 */
import { useCallback, useEffect, useRef } from 'react';
import { keepPreviousData, QueryClient, useInfiniteQuery, useQuery, useQueryClient, type QueryKey } from '@tanstack/react-query';
import { api, ApiError, asApiError, call, type paths } from './client';
import { ENVIRONMENTS, type Environment } from './environments';

declare module '@tanstack/react-query' {
  interface Register {
    defaultError: ApiError;
  }
}

export const queryClient = new QueryClient({
  defaultOptions: { queries: { retry: false, refetchOnWindowFocus: false, placeholderData: keepPreviousData } },
});

export interface Resource<T> {
  data: T | undefined;
  error: ApiError | undefined;
  /** Nothing to show yet (a first load; not a refetch, which keeps the previous answer). */
  loading: boolean;
  /** Refetches this resource and everything under its key (call it after changing it). */
  reload(): Promise<void>;
}

interface ResourceOptions<T> {
  /** False while an input the request needs is missing: nothing is fetched. */
  enabled?: boolean;
  /** Refetch period in ms while the answer says so (paused while the tab is hidden). */
  pollMs?: (data: T | undefined) => number | false;
  /** False: every answer is a new object even when equal to the last (for pages that react to each answer). */
  structuralSharing?: boolean;
}

function useResource<T>(key: QueryKey, load: () => Promise<T>, { enabled = true, pollMs, structuralSharing = true }: ResourceOptions<T> = {}): Resource<T> {
  const client = useQueryClient();
  const query = useQuery<T>({
    queryKey: key,
    queryFn: () => load().catch((caught: unknown) => Promise.reject(asApiError(caught))),
    enabled,
    structuralSharing,
    refetchInterval: pollMs ? (q) => pollMs(q.state.data) : undefined,
  });
  // `reload` keeps its identity across renders (pages pass it to effects and timers).
  const latestKey = useRef(key);
  useEffect(() => {
    latestKey.current = key;
  });
  const reload = useCallback(() => client.invalidateQueries({ queryKey: latestKey.current }), [client]);
  return { data: query.data, error: query.error ?? undefined, loading: query.isLoading, reload };
}

/** Answers 404 as null: "there is none" is an answer, not a failure. */
async function orNone<T>(request: Promise<T>): Promise<T | null> {
  try {
    return await request;
  } catch (error) {
    if (error instanceof ApiError && error.status === 404) return null;
    throw error;
  }
}

type Query<P extends keyof paths> = paths[P] extends { get: { parameters: { query?: infer Q } } } ? NonNullable<Q> : never;

/** Services offered in pickers: the first 100 of the project. */
const SERVICE_CHOICES = 100;

export const useProject = (projectId: string) => useResource(['projects', projectId], () => call(api.GET('/api/projects/{id}', { params: { path: { id: projectId } } })));

export const useServices = (projectId: string) =>
  useResource(['projects', projectId, 'services'], () => call(api.GET('/api/services', { params: { query: { projectId, limit: SERVICE_CHOICES } } })));

/** One service, or null when it is gone or not the caller's. */
export const useService = (serviceId: string) =>
  useResource(['services', serviceId], () => call(api.GET('/api/services/{id}', { params: { path: { id: serviceId } } })).catch(() => null));

/** Where this deployment's SDK endpoints are (docs/api-reference.md#sdk-endpoints). */
export const useSdkEndpoints = (projectId: string) =>
  useResource(['projects', projectId, 'sdk-endpoints'], () => call(api.GET('/api/projects/{id}/sdk-endpoints', { params: { path: { id: projectId } } })));

export const useMembers = (projectId: string) =>
  useResource(['projects', projectId, 'members'], () => call(api.GET('/api/projects/{id}/members', { params: { path: { id: projectId } } })));

export const usePendingInvitations = (projectId: string) =>
  useResource(['projects', projectId, 'invitations'], () =>
    call(api.GET('/api/projects/{id}/invitations', { params: { path: { id: projectId }, query: { status: 'pending' } } })),
  );

export const useProjectTokens = (projectId: string) =>
  useResource(['projects', projectId, 'tokens'], () => call(api.GET('/api/projects/{id}/tokens', { params: { path: { id: projectId } } })));

export const useCohorts = (projectId: string) =>
  useResource(['projects', projectId, 'cohorts'], () => call(api.GET('/api/projects/{id}/cohorts', { params: { path: { id: projectId } } })));

export const useWebhooks = (projectId: string) =>
  useResource(['projects', projectId, 'webhooks'], () => call(api.GET('/api/webhooks', { params: { query: { projectId } } })));

export const useWebhook = (webhookId: string) => useResource(['webhooks', webhookId], () => call(api.GET('/api/webhooks/{id}', { params: { path: { id: webhookId } } })));

/**
 * A webhook's delivery log, newest first, a page at a time (`fetchNextPage` for older ones).
 * Keyed by the page size: the webhooks list reads a few for each endpoint's health, the log more.
 */
export const useWebhookDeliveries = (webhookId: string, limit: number) =>
  useInfiniteQuery({
    queryKey: ['webhooks', webhookId, 'deliveries', limit],
    queryFn: ({ pageParam }) =>
      call(api.GET('/api/webhooks/{id}/deliveries', { params: { path: { id: webhookId }, query: { limit, ...(pageParam ? { cursor: pageParam } : {}) } } })),
    initialPageParam: '',
    getNextPageParam: (page) => (page.hasMore && page.nextCursor ? page.nextCursor : undefined),
  });

export const useAlertChannels = (orgId: string) =>
  useResource(['orgs', orgId, 'alert-channels'], () => call(api.GET('/api/orgs/{orgId}/alert-channels', { params: { path: { orgId } } })));

export const usePersonalTokens = () => useResource(['me', 'personal-tokens'], () => call(api.GET('/api/users/me/personal-tokens')));

/** GET /api/users/me/connections documents no body; this is OAuthService.listConnections' shape. */
export interface Connection {
  id: string;
  client: { id: string; name: string };
  projectIds: string[];
  scope: string;
  createdAt: string;
  lastUsedAt: string | null;
}

export const useConnections = () =>
  useResource(['me', 'connections'], async () => (await call(api.GET('/api/users/me/connections'))) as unknown as { connections: Connection[] });

export const useFlags = (query: Query<'/api/flags'>, options?: { enabled?: boolean }) =>
  useResource(['projects', query.projectId, 'flags', query], () => call(api.GET('/api/flags', { params: { query } })), options);

/** The global flag search (docs/api-reference.md#global-flag-search); nothing is asked while `q` is empty. */
export const useFlagSearch = (q: string, limit: number) =>
  useResource(['search', 'flags', q, limit], () => call(api.GET('/api/search/flags', { params: { query: { q, limit } } })), { enabled: q.length > 0 });

export const useFlag = (key: string, serviceId: string, environment: Environment) =>
  useResource(['flags', key, serviceId, environment], () => call(api.GET('/api/flags/{key}', { params: { path: { key }, query: { serviceId, environment } } })));

/** The flag's record in every environment (null where it does not exist). */
export const useFlagEnvironments = (key: string, serviceId: string) =>
  useResource(
    ['flags', key, serviceId, 'environments'],
    async () => {
      const records = await Promise.all(ENVIRONMENTS.map((environment) => orNone(call(api.GET('/api/flags/{key}', { params: { path: { key }, query: { serviceId, environment } } })))));
      return Object.fromEntries(ENVIRONMENTS.map((environment, i) => [environment, records[i]])) as Record<Environment, (typeof records)[number]>;
    },
    // Every answer is a new object, also when equal: the page restarts its editor from each one.
    { structuralSharing: false },
  );

export const useFlagHistory = (key: string, query: Query<'/api/flags/{key}/history'>, options?: { enabled?: boolean; cache?: () => RequestCache }) =>
  useResource(
    ['flags', key, query.serviceId, query.environment, 'history', query],
    () => call(api.GET('/api/flags/{key}/history', { params: { path: { key }, query }, cache: options?.cache?.() })),
    { enabled: options?.enabled },
  );

export const useFlagMetrics = (key: string, query: Query<'/api/flags/{key}/metrics'>, options?: { enabled?: boolean; cache?: () => RequestCache }) =>
  useResource(
    ['flags', key, query.serviceId, query.environment, 'metrics', query],
    () => call(api.GET('/api/flags/{key}/metrics', { params: { path: { key }, query }, cache: options?.cache?.() })),
    { enabled: options?.enabled },
  );

export const useFlagWatch = (key: string, serviceId: string, environment: Environment) =>
  useResource(['flags', key, serviceId, environment, 'watch'], () =>
    call(api.GET('/api/flags/{key}/watch', { params: { path: { key }, query: { serviceId, environment } } })),
  );

/** The active triggers of every flag of a service, the first 100 by flag key (the triggers page's overview). */
export const useServiceTriggers = (serviceId: string) =>
  useResource(['services', serviceId, 'triggers'], () => call(api.GET('/api/triggers', { params: { query: { serviceId, limit: 100 } } })), { enabled: !!serviceId });

export const useFlagTriggers = (key: string, serviceId: string) =>
  useResource(['flags', key, serviceId, 'triggers'], () => call(api.GET('/api/flags/{key}/triggers', { params: { path: { key }, query: { serviceId } } })));

export const useAutoRollbackState = (key: string, serviceId: string, environment: Environment, options?: { enabled?: boolean }) =>
  useResource(
    ['flags', key, serviceId, environment, 'auto-rollback'],
    () => call(api.GET('/api/flags/{key}/auto-rollback', { params: { path: { key }, query: { serviceId, environment } } })),
    options,
  );

type CanaryRecord = paths['/api/flags/{key}/canary']['get']['responses'][200]['content']['application/json'];
const canaryKey = (key: string, serviceId: string, environment: Environment) => ['flags', key, serviceId, environment, 'canary'];

/** The flag's active canary, else its latest, else null; polled while `pollMs` says so. */
export const useCanary = (key: string, serviceId: string, environment: Environment, pollMs: (record: CanaryRecord | null | undefined) => number | false) =>
  useResource(
    canaryKey(key, serviceId, environment),
    () => orNone(call(api.GET('/api/flags/{key}/canary', { params: { path: { key }, query: { serviceId, environment } } }))),
    { pollMs },
  );

/**
 * Shows a canary as an action answered it. A poll still in flight was sent before the action and
 * would show the older state: it is cancelled first.
 */
export function useSetCanary(key: string, serviceId: string, environment: Environment) {
  const client = useQueryClient();
  return async (record: CanaryRecord) => {
    await client.cancelQueries({ queryKey: canaryKey(key, serviceId, environment) });
    client.setQueryData(canaryKey(key, serviceId, environment), record);
  };
}

export const useCanaries = (projectId: string, limit: number, pollMs: (records: CanaryRecord[] | undefined) => number | false) =>
  useResource(
    ['projects', projectId, 'canaries'],
    async () => (await call(api.GET('/api/projects/{id}/canaries', { params: { path: { id: projectId }, query: { limit } } }))).canaries,
    { pollMs },
  );

/** Audit entries; refetched also when `after` changes (something known to write entries happened). */
export const useAudit = (query: Query<'/api/audit'>, after?: unknown) =>
  useResource(['projects', query.projectId, 'audit', query, after], () => call(api.GET('/api/audit', { params: { query } })));

/** The actions, resource types and named actors present in a project's audit trail: the choices of its filters. */
export const useAuditFacets = (projectId: string) =>
  useResource(['projects', projectId, 'audit', 'facets'], () => call(api.GET('/api/audit/facets', { params: { query: { projectId } } })));

export const useEvaluationHeatmap = (projectId: string, query: Query<'/api/projects/{id}/evaluation-heatmap'>, options?: { enabled?: boolean }) =>
  useResource(
    ['projects', projectId, 'evaluation-heatmap', query],
    () => call(api.GET('/api/projects/{id}/evaluation-heatmap', { params: { path: { id: projectId }, query } })),
    options,
  );

export const useWebVitals = (query: Query<'/api/analytics/vitals'>) =>
  useResource(['analytics', 'vitals', query], () => call(api.GET('/api/analytics/vitals', { params: { query } })));

export const useSiteOverview = (query: Query<'/api/analytics/overview'>) =>
  useResource(['analytics', 'overview', query], () => call(api.GET('/api/analytics/overview', { params: { query } })));

/** Browser events per service, counted up to `atMost` (the newest): which sites have data. */
export const useSiteEventCounts = (serviceIds: string[], atMost: number) =>
  useResource(['analytics', 'site-event-counts', serviceIds, atMost], async () => {
    const counts = await Promise.all(serviceIds.map((siteId) => call(api.GET('/api/analytics/events', { params: { query: { siteId, limit: atMost } } }))));
    return new Map(serviceIds.map((id, i) => [id, counts[i].events.length]));
  }, { enabled: serviceIds.length > 0 });

export const useEventNames = (query: Query<'/api/analytics/events/names'>) =>
  useResource(['analytics', 'event-names', query], () => call(api.GET('/api/analytics/events/names', { params: { query } })));

export const useFlagVariants = (key: string, query: Query<'/api/analytics/flags/{key}/variants'>, options?: { enabled?: boolean }) =>
  useResource(['analytics', 'variants', key, query], () => call(api.GET('/api/analytics/flags/{key}/variants', { params: { path: { key }, query } })), options);

export const useBanditExperiments = (projectId: string, limit: number) =>
  useResource(['projects', projectId, 'bandits'], () => call(api.GET('/api/experiments/bandit', { params: { query: { projectId, limit } } })));

export const useChangePolicy = (projectId: string) =>
  useResource(['projects', projectId, 'change-policy'], () => call(api.GET('/api/projects/{id}/change-policy', { params: { path: { id: projectId } } })));

export const useChangeRequests = (projectId: string, query: Query<'/api/projects/{id}/change-requests'>) =>
  useResource(['projects', projectId, 'change-requests', query], () =>
    call(api.GET('/api/projects/{id}/change-requests', { params: { path: { id: projectId }, query } })),
  );

export const useChangeRequest = (projectId: string, requestId: string) =>
  useResource(['projects', projectId, 'change-requests', requestId], () =>
    call(api.GET('/api/projects/{id}/change-requests/{requestId}', { params: { path: { id: projectId, requestId } } })),
  );

export const useDemo = () => useResource(['demo'], () => call(api.GET('/api/demo')));

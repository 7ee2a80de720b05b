/**
 * Every screen of the console, in one table: the router, the navigation, the page title and the
 * screen_viewed telemetry all read it. A new page is one entry here and one module under pages/
 * (web/README.md). Pages load on demand (lazyPage, a retryable React.lazy), so the first load stays small.
 */
import { lazyPage, type RetryablePage } from './page-boundary';

export interface ConsoleRoute {
  /** A wouter pattern (`/projects/:projectId/flags`); `:projectId` makes it a project page. */
  path: string;
  /** Stable screen name for telemetry (screen_viewed) and tests; never contains ids. */
  screen: string;
  /** The document title (and usually the page's heading). */
  title: string;
  /** public: anyone; signed-out: only without a session (sign-in); user: a signed-in user. */
  access: 'public' | 'signed-out' | 'user';
  /** lazyPage(() => import('./pages/...')): loaded on demand, loaded again by the page's Retry. */
  page: RetryablePage;
  /** In the navigation: global links always, project links when a project is selected. */
  nav?: { label: string; scope: 'global' | 'project'; order: number };
}

export const routes: ConsoleRoute[] = [
  { path: '/signin', screen: 'sign_in', title: 'Sign in', access: 'signed-out', page: lazyPage(() => import('./pages/sign-in')) },
  { path: '/signup', screen: 'sign_up', title: 'Create an account', access: 'signed-out', page: lazyPage(() => import('./pages/sign-up')) },
  // Linked from mails (api/features/accounts, api/features/invitations): the paths are fixed.
  { path: '/verify-email', screen: 'verify_email', title: 'Verify your e-mail address', access: 'public', page: lazyPage(() => import('./pages/verify-email')) },
  { path: '/invitations/accept', screen: 'accept_invitation', title: 'Accept an invitation', access: 'public', page: lazyPage(() => import('./pages/accept-invitation')) },
  {
    path: '/projects',
    screen: 'projects',
    title: 'Projects',
    access: 'user',
    page: lazyPage(() => import('./pages/projects')),
    nav: { label: 'Projects', scope: 'global', order: 10 },
  },
  {
    path: '/projects/:projectId',
    screen: 'project_home',
    title: 'Project overview',
    access: 'user',
    page: lazyPage(() => import('./pages/project-home')),
    nav: { label: 'Overview', scope: 'project', order: 10 },
  },
  // A service's ids, endpoints, bound token and OpenFeature snippets; linked from the project's overview.
  { path: '/projects/:projectId/services/:serviceId/connect', screen: 'connect_sdk', title: 'Connect an SDK', access: 'user', page: lazyPage(() => import('./pages/services/connect')) },
  {
    path: '/projects/:projectId/flags',
    screen: 'flags',
    title: 'Flags',
    access: 'user',
    page: lazyPage(() => import('./pages/flags/list')),
    nav: { label: 'Flags', scope: 'project', order: 20 },
  },
  // Before the detail route, which it would otherwise match (so a flag keyed "new" has no detail page in the console).
  { path: '/projects/:projectId/flags/new', screen: 'flag_create', title: 'Create a flag', access: 'user', page: lazyPage(() => import('./pages/flags/new')) },
  // Query serviceId and environment: a flag is one record per (service, environment, key).
  { path: '/projects/:projectId/flags/:flagKey', screen: 'flag_detail', title: 'Flag', access: 'user', page: lazyPage(() => import('./pages/flags/detail')) },
  {
    path: '/projects/:projectId/releases',
    screen: 'releases',
    title: 'Releases',
    access: 'user',
    page: lazyPage(() => import('./pages/releases')),
    nav: { label: 'Releases', scope: 'project', order: 30 },
  },
  {
    path: '/projects/:projectId/change-requests',
    screen: 'change_requests',
    title: 'Change requests',
    access: 'user',
    page: lazyPage(() => import('./pages/change-requests/inbox')),
    nav: { label: 'Change requests', scope: 'project', order: 25 },
  },
  { path: '/projects/:projectId/change-requests/:requestId', screen: 'change_request', title: 'Change request', access: 'user', page: lazyPage(() => import('./pages/change-requests/detail')) },
  // A flag's canary timeline, guardrail and rollbacks: ?serviceId=&environment= name the flag's record.
  { path: '/projects/:projectId/releases/flags/:flagKey', screen: 'flag_release', title: 'Flag release safety', access: 'user', page: lazyPage(() => import('./pages/releases/flag')) },
  { path: '/projects/:projectId/releases/guardrails', screen: 'guardrails', title: 'Guardrails', access: 'user', page: lazyPage(() => import('./pages/releases/guardrails')) },
  // Flag history, audit and explain; flag pages link here with ?serviceId=&environment=.
  { path: '/projects/:projectId/flags/:flagKey/history', screen: 'flag_history', title: 'Flag history', access: 'user', page: lazyPage(() => import('./pages/history/flag-history')) },
  { path: '/projects/:projectId/flags/:flagKey/explain', screen: 'flag_explain', title: 'Explain a flag', access: 'user', page: lazyPage(() => import('./pages/history/explain')) },
  {
    path: '/projects/:projectId/audit',
    screen: 'audit',
    title: 'Audit trail',
    access: 'user',
    page: lazyPage(() => import('./pages/history/audit')),
    nav: { label: 'Audit', scope: 'project', order: 60 },
  },
  // The public demo grid (docs/api-reference.md#demo-service): anyone, signed in or not.
  { path: '/demo', screen: 'demo', title: 'Demo', access: 'public', page: lazyPage(() => import('./pages/demo/demo-grid-page')), nav: { label: 'Demo', scope: 'global', order: 90 } },
  // Settings: the project's sections, and the user's own credentials under /account.
  {
    path: '/projects/:projectId/settings',
    screen: 'settings',
    title: 'Settings',
    access: 'user',
    page: lazyPage(() => import('./pages/settings')),
    nav: { label: 'Settings', scope: 'project', order: 90 },
  },
  { path: '/projects/:projectId/settings/members', screen: 'settings_members', title: 'Members', access: 'user', page: lazyPage(() => import('./pages/settings/members')) },
  { path: '/projects/:projectId/settings/tokens', screen: 'settings_tokens', title: 'API tokens', access: 'user', page: lazyPage(() => import('./pages/settings/tokens')) },
  { path: '/projects/:projectId/settings/webhooks', screen: 'settings_webhooks', title: 'Webhooks', access: 'user', page: lazyPage(() => import('./pages/settings/webhooks')) },
  { path: '/projects/:projectId/settings/webhooks/:webhookId', screen: 'settings_webhook', title: 'Webhook', access: 'user', page: lazyPage(() => import('./pages/settings/webhook')) },
  { path: '/projects/:projectId/settings/alert-channels', screen: 'settings_alert_channels', title: 'Alert channels', access: 'user', page: lazyPage(() => import('./pages/settings/alert-channels')) },
  { path: '/projects/:projectId/settings/change-policy', screen: 'settings_change_policy', title: 'Change policy', access: 'user', page: lazyPage(() => import('./pages/settings/change-policy')) },
  { path: '/projects/:projectId/settings/triggers', screen: 'settings_triggers', title: 'Triggers', access: 'user', page: lazyPage(() => import('./pages/settings/triggers')) },
  {
    path: '/account/tokens',
    screen: 'account_tokens',
    title: 'Personal tokens',
    access: 'user',
    page: lazyPage(() => import('./pages/settings/account-tokens')),
    nav: { label: 'Account', scope: 'global', order: 80 },
  },
  { path: '/account/connections', screen: 'account_connections', title: 'MCP connections', access: 'user', page: lazyPage(() => import('./pages/settings/account-connections')) },
  // Linked from the mail to each e-mail alert channel recipient (api/features/alert-channels): the path is fixed.
  { path: '/alert-channels/confirm', screen: 'confirm_alert_recipient', title: 'Confirm alert e-mails', access: 'public', page: lazyPage(() => import('./pages/settings/confirm-alert-recipient')) },
  {
    path: '/projects/:projectId/metrics',
    screen: 'project_metrics',
    title: 'Metrics',
    access: 'user',
    page: lazyPage(() => import('./pages/metrics/project-metrics')),
    nav: { label: 'Metrics', scope: 'project', order: 40 },
  },
  // Linked from a flag's page with ?serviceId=&environment= (and optionally &range=).
  { path: '/projects/:projectId/flags/:flagKey/metrics', screen: 'flag_metrics', title: 'Flag metrics', access: 'user', page: lazyPage(() => import('./pages/metrics/flag-metrics')) },
];

/** A route's path with the current project filled in (for project-scoped links). */
export function hrefOf(route: ConsoleRoute, projectId: string | undefined): string | undefined {
  if (!route.path.includes(':projectId')) return route.path;
  return projectId ? route.path.replace(':projectId', encodeURIComponent(projectId)) : undefined;
}

/** Links to one flag's pages (a flag record is one service and environment); every area links to the others. */

/** The flag's page, or `page` under it (`/history`, `/explain`, `/metrics`), with `extra` query parameters. */
export function flagHref(projectId: string, flagKey: string, serviceId: string, environment: string, page = '', extra: Record<string, string> = {}): string {
  const query = new URLSearchParams({ serviceId, environment, ...extra });
  return `/projects/${encodeURIComponent(projectId)}/flags/${encodeURIComponent(flagKey)}${page}?${query.toString()}`;
}

/** The flag's release page (canary timeline, guardrail, rollbacks). */
export function flagReleaseHref(projectId: string, flagKey: string, serviceId: string, environment: string): string {
  const query = new URLSearchParams({ serviceId, environment });
  return `/projects/${encodeURIComponent(projectId)}/releases/flags/${encodeURIComponent(flagKey)}?${query.toString()}`;
}

/** The triggers page showing the flag's trigger URLs (the flag's triggers are kept under project settings). */
export function flagTriggersHref(projectId: string, flagKey: string, serviceId: string): string {
  const query = new URLSearchParams({ serviceId, flag: flagKey });
  return `/projects/${encodeURIComponent(projectId)}/settings/triggers?${query.toString()}`;
}

import type { Logger } from '../../infra/logger';
import type { Sql } from '../../infra/postgres';
import { ENVIRONMENTS, type Environment } from '../../domain/environments';

export interface DemoServiceDescription {
  serviceId: string;
  /** Environments in which the service has flags (all three for a demo service without flags yet). */
  environments: Environment[];
}

export interface DemoRegistryDeps {
  sql: Sql;
  logger: Logger;
  /** DEMO_SERVICE_IDS: the same on every replica, so not stored. */
  configured: readonly string[];
  /** How often the stored list is re-read (a service seeded by another replica appears within it). */
  refreshMs?: number;
}

/**
 * Which services are public demo services (docs/api-reference.md#demo-service): the configured ids
 * plus the services stored in `demo_services` (the one the embedded profile seeds). The answer is
 * in memory, so the hot paths (list, evaluation, bulk PATCH) ask it synchronously.
 *
 * `isDemo`/`list` are the same questions under the names the evaluation feature's
 * `DemoServices` interface uses, so this object can be passed to it as is.
 */
export class DemoServiceRegistry {
  private readonly configured: ReadonlySet<string>;
  private stored = new Set<string>();
  private timer?: NodeJS.Timeout;

  constructor(private readonly deps: DemoRegistryDeps) {
    this.configured = new Set(deps.configured);
  }

  isDemoService(serviceId: string): boolean {
    return this.configured.has(serviceId) || this.stored.has(serviceId);
  }

  demoServiceIds(): string[] {
    return [...new Set([...this.configured, ...this.stored])].sort();
  }

  isDemo(serviceId: string): boolean {
    return this.isDemoService(serviceId);
  }

  list(): string[] {
    return this.demoServiceIds();
  }

  /** Re-reads the stored demo services. */
  async refresh(): Promise<void> {
    const rows = await this.deps.sql<{ service_id: string }[]>`SELECT service_id FROM demo_services`;
    this.stored = new Set(rows.map((r) => r.service_id));
  }

  /** Loads once, then keeps re-reading in the background until `stop`. */
  async start(): Promise<void> {
    await this.refresh();
    const every = this.deps.refreshMs ?? 30_000;
    this.timer = setInterval(() => {
      this.refresh().catch((error) => this.deps.logger.warn({ err: error }, 'reloading demo services failed'));
    }, every);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  /**
   * GET /api/demo: the demo services that exist, each with the environments it has flags in.
   * A configured id without a service is left out (nothing could be read or written there).
   */
  async describe(): Promise<DemoServiceDescription[]> {
    const ids = this.demoServiceIds();
    if (!ids.length) return [];
    const sql = this.deps.sql;
    const rows = await sql<{ id: string; environments: Environment[] | null }[]>`
      SELECT s.id, (SELECT array_agg(DISTINCT f.environment) FROM flags f WHERE f.service_id = s.id) AS environments
      FROM services s WHERE s.id = ANY(${sql.array(ids)}::text[]) ORDER BY s.id`;
    return rows.map((r) => ({
      serviceId: r.id,
      environments: r.environments?.length ? ENVIRONMENTS.filter((e) => r.environments!.includes(e)) : [...ENVIRONMENTS],
    }));
  }
}

/** What keeps a process from serving, in words an operator reads in /readyz; undefined once it can. */
export type ReadinessCheck = () => string | undefined;

/**
 * Whether this process can serve (docs/operations.md#readiness): every registered condition
 * holds and it is not draining. Conditions read state the process keeps anyway (snapshots
 * loaded, listeners started); none does I/O, so a backend outage after start does not make a
 * process that still serves from memory unready.
 */
export class Readiness {
  private readonly checks = new Map<string, ReadinessCheck>();
  private draining = false;

  /** Adds a condition under a name (`snapshots`, `listeners` ...). */
  require(name: string, check: ReadinessCheck): void {
    this.checks.set(name, check);
  }

  /** From now on unready: the load balancer stops sending requests while in-flight ones finish. */
  drain(): void {
    this.draining = true;
  }

  state(): { ready: boolean; reasons: Record<string, string> } {
    const reasons: Record<string, string> = {};
    if (this.draining) reasons.draining = 'the process is shutting down';
    for (const [name, check] of this.checks) {
      const reason = check();
      if (reason !== undefined) reasons[name] = reason;
    }
    return { ready: Object.keys(reasons).length === 0, reasons };
  }
}

import { actingUser, type Principal } from '../auth/principal';
import type { Cache } from './cache';
import type { Logger } from './logger';
import type { Sql } from './postgres';

/**
 * Where the read routes that allow it (`reads: 'replica'`, api/http/route.ts) read: a Postgres
 * streaming replica (DATABASE_READ_URL, docs/operations.md#read-replica), while each caller still
 * reads their own writes. After a caller's write the primary's WAL position is noted under their
 * identity (in the shared cache, so every process of the deployment sees it); their next reads go
 * to the replica only once it has replayed past that position, and to the primary until then.
 * A replica that stops answering sends every read to the primary until it answers again.
 */
export class ReadRouting {
  private replicaDownUntil = 0;
  private probe: NodeJS.Timeout | undefined;

  constructor(
    private readonly deps: {
      primary: Sql;
      replica: Sql;
      cache: Cache;
      logger: Logger;
      /** How long a write's position is remembered: a replica further behind than this serves older reads. */
      rememberSeconds?: number;
      /** How long reads avoid a replica that failed to answer. */
      retryAfterMs?: number;
    },
  ) {}

  /**
   * Asks the replica every `intervalMs` whether it answers, so reads of callers who did not write
   * lately leave a replica that went away within one interval.
   */
  watch(intervalMs = 5_000): void {
    const probe = () =>
      void this.deps.replica`SELECT 1`.then(
        () => (this.replicaDownUntil = 0),
        (error: unknown) => this.replicaFailed(error),
      );
    probe();
    this.probe = setInterval(probe, intervalMs);
    this.probe.unref();
  }

  stop(): void {
    clearInterval(this.probe);
  }

  /** Notes that `principal` wrote: the primary's WAL position now covers that write. */
  async wrote(principal: Principal): Promise<void> {
    const key = writerKey(principal);
    if (!key) return;
    // The insert position, not pg_current_wal_lsn() (written so far): with synchronous_commit off
    // the write's commit record may not be written yet, and a replica past the written position
    // could still lack it.
    const [row] = await this.deps.primary<{ lsn: string }[]>`SELECT pg_current_wal_insert_lsn()::text AS lsn`;
    await this.deps.cache.set(key, row!.lsn, this.deps.rememberSeconds ?? 60);
  }

  /** The pool `principal`'s read goes to. */
  async readerFor(principal: Principal): Promise<Sql> {
    if (Date.now() < this.replicaDownUntil) return this.deps.primary;
    const key = writerKey(principal);
    const wroteAt = key ? await this.deps.cache.get(key) : null;
    try {
      if (!wroteAt) return this.deps.replica;
      const [row] = await this.deps.replica<{ caught: boolean | null }[]>`SELECT pg_last_wal_replay_lsn() >= ${wroteAt}::pg_lsn AS caught`;
      // Null on a server that is not a standby (a replica promoted to primary has every write).
      return row!.caught === false ? this.deps.primary : this.deps.replica;
    } catch (error) {
      this.replicaFailed(error);
      return this.deps.primary;
    }
  }

  /**
   * After a read on `reader` threw: true when it was the replica, which reads then avoid for a
   * while; the read is answered again from the primary (reads are safe to repeat).
   */
  failedOn(reader: Sql, error: unknown): boolean {
    if (reader !== this.deps.replica) return false;
    this.replicaFailed(error);
    return true;
  }

  get primary(): Sql {
    return this.deps.primary;
  }

  private replicaFailed(error: unknown): void {
    if (Date.now() >= this.replicaDownUntil) this.deps.logger.warn({ err: error }, 'the read replica did not answer: reading from the primary');
    this.replicaDownUntil = Date.now() + (this.deps.retryAfterMs ?? 5_000);
  }
}

/** Whose writes a read must see: a person (session, personal or connector token) or a project token. */
function writerKey(principal: Principal): string | undefined {
  const user = actingUser(principal);
  if (user) return `read-your-writes:user:${user.id}`;
  return principal.type === 'project_api_token' ? `read-your-writes:token:${principal.tokenId}` : undefined;
}

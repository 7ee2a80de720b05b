import type { ApiClient } from '../api';
import { CliError } from '../errors';
import type { Output } from '../output';
import type { Flag } from './flags';

export interface TailOptions {
  key: string;
  serviceId: string;
  environment: string;
  /** A project API token: follow the SSE stream. Without one, the history is read every `intervalMs`. */
  projectToken?: string;
  intervalMs: number;
}

interface Version {
  version: number;
  changeType: string;
  actor: string;
  /** Who, by name (docs/api-reference.md#audit-log). */
  actorDisplay?: { name: string };
  createdAt: string;
  snapshot: Flag;
}

/** One change per line (one JSON object per line with --json), until interrupted. */
export async function tailFlag(api: ApiClient, out: Output, opts: TailOptions): Promise<void> {
  const stop = new Promise<void>((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
  if (opts.projectToken) await followStream(api, out, opts, stop);
  else await pollHistory(api, out, opts, stop);
}

/** `actor` as recorded, `by` the name it stands for (printed). */
const report = (out: Output, change: { at: string; version: number; change: string; enabled: boolean; actor?: string; by?: string; flag: Flag }) =>
  out.result(change, () => out.line(`${change.at}  v${change.version}  ${change.change.padEnd(8)} ${change.enabled ? 'ON ' : 'OFF'}${change.by ? `  by ${change.by}` : ''}`));

/**
 * Personal tokens are refused on SSE streams (docs/api-reference.md#personal-access-tokens), so
 * without a project token the CLI reads the flag's version history, which a personal token may:
 * every change is a version there.
 */
async function pollHistory(api: ApiClient, out: Output, opts: TailOptions, stop: Promise<void>): Promise<void> {
  const path = `/api/flags/${encodeURIComponent(opts.key)}/history`;
  const query = { serviceId: opts.serviceId, environment: opts.environment, limit: 100 };
  let last: number | undefined;
  let stopped = false;
  void stop.then(() => (stopped = true));
  out.say(`Following ${opts.key} in ${opts.environment} (history every ${opts.intervalMs / 1000} s; Ctrl-C to stop)`);
  while (!stopped) {
    const { versions } = await api.get<{ versions: Version[] }>(path, query);
    const fresh = versions.filter((v) => last === undefined || v.version > last).reverse();
    // The first read shows where the flag stands, not its whole past.
    for (const v of last === undefined ? fresh.slice(-1) : fresh) {
      report(out, { at: v.createdAt, version: v.version, change: v.changeType, enabled: v.snapshot.enabled, actor: v.actor, by: v.actorDisplay?.name ?? v.actor, flag: v.snapshot });
    }
    if (fresh.length) last = fresh[fresh.length - 1].version;
    await Promise.race([stop, new Promise((resolve) => setTimeout(resolve, opts.intervalMs))]);
  }
}

/** The service's SSE stream with a project API token, filtered to this flag. */
async function followStream(api: ApiClient, out: Output, opts: TailOptions, stop: Promise<void>): Promise<void> {
  const url = api.url('/api/flags/stream', { serviceId: opts.serviceId, environment: opts.environment });
  const authorization = `Bearer ${opts.projectToken}`;
  // Loaded only here: the one command that needs an SSE client.
  const { EventSource } = await import('eventsource');
  const source = new EventSource(url, {
    fetch: (input, init) => fetch(input, { ...init, headers: { ...(init?.headers as Record<string, string>), authorization } }),
  });
  try {
    await new Promise<void>((resolve, reject) => {
      void stop.then(resolve);
      source.onopen = () => out.say(`Following ${opts.key} in ${opts.environment} (SSE stream; Ctrl-C to stop)`);
      source.onmessage = (event) => {
        const message = JSON.parse(event.data) as { type: string; flag?: Flag; timestamp?: string };
        if ((message.type === 'flag-update' || message.type === 'flag-deleted') && message.flag?.key === opts.key) {
          const flag = message.flag;
          report(out, { at: flag.updatedAt, version: flag.version, change: message.type === 'flag-deleted' ? 'delete' : 'update', enabled: flag.enabled, flag });
        }
      };
      source.onerror = (event) => {
        // The client reconnects by itself after network errors; a refusal closes it for good.
        if (source.readyState === source.CLOSED) reject(new CliError(`The stream was refused${event.code ? ` (HTTP ${event.code})` : ''}: ${event.message ?? 'check the project token'}`));
        else out.say('Stream interrupted; reconnecting…');
      };
    });
  } finally {
    source.close();
  }
}

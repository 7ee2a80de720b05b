/**
 * Keeps a GridStore in step with the demo service (docs/api-reference.md#demo-service): the whole
 * grid from the demo list (4,096 flags, `fields=key,enabled,version`), re-read with its weak ETag
 * as If-None-Match (a 304 costs no body) every REFRESH_MS and whenever the stream reconnects; live
 * `flag-update` messages from GET /api/flags/stream in between. The last list answer and its ETag
 * are kept in sessionStorage, so a reload paints the grid at once and asks only whether it changed.
 * The stream is on the console's own origin: the control plane serves it as well as the data plane,
 * so the CSP's connect-src 'self' covers it and no CORS is involved.
 */
import { useEffect, useState } from 'react';
import { api, asApiError, call, type ApiError } from '../../api/client';
import { cellIndexOf, GRID_CELLS, type GridStore } from '../../components/demo/grid-store';
import type { Environment } from '../../api/environments';

/** Safety net for missed stream messages: a 304 when nothing changed. */
const REFRESH_MS = 30_000;
/** After the server closed the stream for good (EventSource gives up on an error status). */
const REOPEN_MS = 5_000;

export type LiveState = 'connecting' | 'live' | 'reconnecting';

interface ListedFlag {
  key?: string;
  enabled?: boolean;
  version?: number;
}

type Row = { index: number; enabled: boolean; version?: number };

/**
 * A list answer as kept in sessionStorage: '1' for a cell that is on, '0' off. Versions are not
 * kept: the next answer from the server always wins over a restored cell (even after a reset).
 */
interface SavedList {
  etag: string;
  cells: string;
}

interface StreamMessage {
  type?: string;
  flagKey?: string;
  flag?: ListedFlag;
}

export function useDemoSync(store: GridStore, serviceId: string, environment: Environment) {
  const [live, setLive] = useState<LiveState>('connecting');
  const [loadError, setLoadError] = useState<ApiError | undefined>();

  useEffect(() => {
    let stopped = false;
    const storageKey = `demo-grid:${serviceId}:${environment}`;
    const saved = restore(storageKey);
    let etag = saved?.etag;
    if (saved) store.applyList(saved.rows);
    let loading: Promise<void> | undefined;

    async function readList(): Promise<void> {
      const { data, error, response } = await api.GET('/api/flags', {
        params: { query: { serviceId, environment, limit: GRID_CELLS, fields: 'key,enabled,version' } },
        headers: etag ? { 'If-None-Match': etag } : undefined,
      });
      if (stopped || response.status === 304) return;
      const page = await call(Promise.resolve({ data, error, response }));
      etag = response.headers.get('ETag') ?? undefined;
      const rows: Row[] = [];
      for (const flag of page.flags as ListedFlag[]) {
        const index = cellIndexOf(flag.key);
        if (index !== undefined) rows.push({ index, enabled: flag.enabled === true, version: flag.version });
      }
      store.applyList(rows);
      if (etag) save(storageKey, etag, rows);
    }

    /** One read at a time; a failure is shown until a later read succeeds. */
    function refresh(): void {
      loading ??= readList()
        .then(() => {
          if (!stopped) setLoadError(undefined);
        })
        .catch((caught: unknown) => {
          if (!stopped) setLoadError(asApiError(caught));
        })
        .finally(() => {
          loading = undefined;
        });
    }

    let source: EventSource | undefined;
    let reopen: ReturnType<typeof setTimeout> | undefined;
    let opened = false;

    function openStream(): void {
      const query = new URLSearchParams({ serviceId, environment });
      source = new EventSource(`/api/flags/stream?${query}`);
      source.onmessage = (event: MessageEvent<string>) => {
        let message: StreamMessage;
        try {
          message = JSON.parse(event.data) as StreamMessage;
        } catch {
          return;
        }
        if (message.type === 'connected') {
          setLive('live');
          // Back after a gap: the stream replays what it kept, the list read covers the rest.
          if (opened) refresh();
          opened = true;
        } else if (message.type === 'flag-update' && message.flag) {
          const index = cellIndexOf(message.flag.key);
          if (index !== undefined) store.applyServer(index, message.flag.enabled === true, message.flag.version);
        } else if (message.type === 'flag-deleted') {
          const index = cellIndexOf(message.flagKey);
          if (index !== undefined) store.applyServer(index, false);
        }
      };
      source.onerror = () => {
        if (stopped) return;
        setLive('reconnecting');
        // CLOSED: the server answered with an error (429 when too many streams are open): retry ourselves.
        if (source?.readyState === EventSource.CLOSED) {
          source.close();
          reopen = setTimeout(openStream, REOPEN_MS);
        }
      };
    }

    setLive('connecting');
    setLoadError(undefined);
    refresh();
    openStream();
    const timer = setInterval(refresh, REFRESH_MS);
    return () => {
      stopped = true;
      clearInterval(timer);
      clearTimeout(reopen);
      source?.close();
    };
  }, [store, serviceId, environment]);

  return { live, loadError };
}

function save(key: string, etag: string, rows: Row[]): void {
  const cells = new Array<string>(GRID_CELLS).fill('0');
  for (const row of rows) if (row.enabled) cells[row.index] = '1';
  try {
    sessionStorage.setItem(key, JSON.stringify({ etag, cells: cells.join('') } satisfies SavedList));
  } catch {
    // Storage full or refused: the next load reads the grid whole.
  }
}

function restore(key: string): { etag: string; rows: Row[] } | undefined {
  try {
    const saved = JSON.parse(sessionStorage.getItem(key) ?? 'null') as SavedList | null;
    if (typeof saved?.etag !== 'string' || typeof saved.cells !== 'string' || saved.cells.length !== GRID_CELLS) return undefined;
    return { etag: saved.etag, rows: Array.from(saved.cells, (cell, index) => ({ index, enabled: cell === '1' })) };
  } catch {
    return undefined;
  }
}

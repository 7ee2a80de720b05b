import type { Request, Response } from 'express';
import { badRequest } from '../../http/errors';
import type { HANDLED, Reply } from '../../http/route';
import { FlagResponseSchema } from './schema';
import type { FlagListFilter, FlagPage, ListPosition } from './store';
import type { FlagRecord, FlagResponse } from './types';

/**
 * Paging and projection of GET /api/flags, shared by the flags list route and the demo list
 * (api/features/demo/list.ts): cursors, `?fields=`, and the page body both send.
 */

export const LIST_DEFAULT_LIMIT = 50;
export const LIST_MAX_LIMIT = 100;

/** Fields `?fields=` may name: every field of the record, and its in-process compatibility. */
export const PROJECTABLE_FIELDS = FlagResponseSchema.keyof().options;

/** GET /api/flags query, as the flags list route validated it. */
export interface FlagListQuery extends Partial<FlagListFilter> {
  limit?: number;
  offset: number;
  cursor?: string;
  cursor_direction: 'next' | 'prev';
  fields?: string[];
}

/**
 * Asked first by the flags list route: answers the request itself (the demo list), or returns
 * undefined and the route goes on with its normal, authenticated path.
 */
export type FlagListOverride = (ctx: { query: FlagListQuery; req: Request; res: Response }) => Promise<Reply | typeof HANDLED | undefined>;

/** The rows a list query asks for: `offset` rows skipped, or the page after / before a cursor. */
export interface PageRequest {
  limit: number;
  offset: number;
  after?: ListPosition;
  before?: ListPosition;
}

/** The response body of a list page (the same for the demo list, whose ETag hashes it). */
export interface ListPageBody {
  flags: Partial<FlagResponse>[];
  total: number;
  limit: number;
  offset: number;
  hasMore: boolean;
  nextCursor: string | null;
  prevCursor: string | null;
}

export function encodeCursor(p: ListPosition): string {
  return Buffer.from(JSON.stringify([p.key, p.id])).toString('base64url');
}

export function decodeCursor(cursor: string): ListPosition {
  try {
    const [key, id] = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as unknown[];
    if (typeof key === 'string' && typeof id === 'string') return { key, id };
  } catch {
    // Falls through to the 400 below.
  }
  throw badRequest('Validation failed: query.cursor: not a cursor returned by this API', [{ path: 'query.cursor', message: 'invalid cursor' }]);
}

/** The page a query asks for, at most `limit` rows; 400 when it names both an offset and a cursor. */
export function pageRequest(query: Pick<FlagListQuery, 'offset' | 'cursor' | 'cursor_direction'>, limit: number): PageRequest {
  if (query.cursor && query.offset > 0) {
    throw badRequest('Validation failed: query.offset: use either offset or cursor paging', [
      { path: 'query.offset', message: 'use either offset or cursor paging' },
    ]);
  }
  const position = query.cursor ? decodeCursor(query.cursor) : undefined;
  return {
    limit,
    offset: query.offset,
    after: position && query.cursor_direction === 'next' ? position : undefined,
    before: position && query.cursor_direction === 'prev' ? position : undefined,
  };
}

/** Only the named fields of the flag (all of them without `fields`). */
function project(flag: FlagRecord | FlagResponse, fields: string[] | undefined): Partial<FlagResponse> {
  if (!fields) return flag;
  const out: Record<string, unknown> = {};
  for (const f of fields) out[f] = flag[f as keyof typeof flag];
  return out as Partial<FlagResponse>;
}

/** The body of one page: projected flags, counts, and cursors to the neighbouring pages. */
export function pageBody(page: FlagPage, request: Pick<PageRequest, 'limit' | 'offset'>, fields: string[] | undefined): ListPageBody {
  const first = page.flags[0];
  const last = page.flags.at(-1);
  return {
    flags: page.flags.map((f) => project(f, fields)),
    total: page.total,
    limit: request.limit,
    offset: request.offset,
    hasMore: page.hasAfter,
    nextCursor: page.hasAfter && last ? encodeCursor(last) : null,
    prevCursor: page.hasBefore && first ? encodeCursor(first) : null,
  };
}

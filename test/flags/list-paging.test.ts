import { decodeCursor, encodeCursor, pageBody, pageRequest } from '../../api/features/flags/list-paging';
import type { FlagRecord } from '../../api/features/flags/types';

function flag(key: string): FlagRecord {
  return {
    id: `flg_${key}`,
    projectId: 'prj_1',
    serviceId: 'svc_1',
    environment: 'development',
    key,
    name: key,
    description: '',
    type: 'boolean',
    enabled: false,
    defaultValue: false,
    tags: [],
    variants: [],
    targeting: [],
    isPublic: false,
    version: 1,
    createdAt: '2026-01-01T00:00:00.000Z',
    updatedAt: '2026-01-01T00:00:00.000Z',
  };
}

describe('flag list paging', () => {
  it('round-trips a cursor and refuses one it did not make', () => {
    expect(decodeCursor(encodeCursor({ key: 'a,b', id: 'flg_1' }))).toEqual({ key: 'a,b', id: 'flg_1' });
    for (const bad of ['', 'not-base64!', Buffer.from('[1,2]').toString('base64url'), Buffer.from('{}').toString('base64url')]) {
      expect(() => decodeCursor(bad)).toThrow(expect.objectContaining({ status: 400 }));
    }
  });

  it('asks for an offset page, or the page after / before a cursor, never both', () => {
    expect(pageRequest({ offset: 20, cursor_direction: 'next' }, 10)).toEqual({ limit: 10, offset: 20, after: undefined, before: undefined });
    const cursor = encodeCursor({ key: 'k', id: 'i' });
    expect(pageRequest({ offset: 0, cursor, cursor_direction: 'next' }, 10)).toMatchObject({ after: { key: 'k', id: 'i' }, before: undefined });
    expect(pageRequest({ offset: 0, cursor, cursor_direction: 'prev' }, 10)).toMatchObject({ after: undefined, before: { key: 'k', id: 'i' } });
    expect(() => pageRequest({ offset: 1, cursor, cursor_direction: 'next' }, 10)).toThrow(
      expect.objectContaining({ status: 400, message: 'Validation failed: query.offset: use either offset or cursor paging' }),
    );
  });

  it('assembles a page with projected flags and cursors only towards rows that exist', () => {
    const flags = [flag('a'), flag('b')];
    const middle = pageBody({ flags, total: 9, hasAfter: true, hasBefore: true }, { limit: 2, offset: 4 }, ['key', 'enabled']);
    expect(middle).toEqual({
      flags: [
        { key: 'a', enabled: false },
        { key: 'b', enabled: false },
      ],
      total: 9,
      limit: 2,
      offset: 4,
      hasMore: true,
      nextCursor: encodeCursor(flags[1]),
      prevCursor: encodeCursor(flags[0]),
    });
    // Key order is part of the body the demo list hashes into its ETag.
    expect(Object.keys(middle)).toEqual(['flags', 'total', 'limit', 'offset', 'hasMore', 'nextCursor', 'prevCursor']);
    expect(pageBody({ flags, total: 2, hasAfter: false, hasBefore: false }, { limit: 50, offset: 0 }, undefined)).toMatchObject({
      flags,
      hasMore: false,
      nextCursor: null,
      prevCursor: null,
    });
    expect(pageBody({ flags: [], total: 0, hasAfter: false, hasBefore: true }, { limit: 50, offset: 10 }, undefined).prevCursor).toBeNull();
  });
});

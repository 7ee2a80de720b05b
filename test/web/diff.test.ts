import { diffJson } from '../../web/src/components/history/diff';

describe('diffJson (the console history diff)', () => {
  it('finds nothing between equal values, whatever the key order', () => {
    expect(diffJson({ a: 1, b: { c: [1, 2] } }, { b: { c: [1, 2] }, a: 1 })).toEqual([]);
  });

  it('lists changed, added and removed fields with their paths', () => {
    expect(diffJson({ name: 'A', enabled: false, tags: ['x'] }, { name: 'B', enabled: false, description: 'new', tags: [] })).toEqual([
      { path: 'name', before: 'A', after: 'B', kind: 'changed' },
      { path: 'tags[0]', before: 'x', kind: 'removed' },
      { path: 'description', after: 'new', kind: 'added' },
    ]);
  });

  it('matches targeting rules by id and variants by name, so an inserted rule is one addition', () => {
    const rule = (id: string, value: unknown) => ({ id, conditions: [{ property: 'plan', operator: 'equals', value }], value: true });
    const before = { targeting: [rule('r1', 'pro'), rule('r2', 'free')], variants: [{ name: 'on', value: true, weight: 50 }] };
    const after = { targeting: [rule('r0', 'team'), rule('r1', 'pro'), rule('r2', 'enterprise')], variants: [{ name: 'on', value: true, weight: 100 }] };
    expect(diffJson(before, after)).toEqual([
      { path: 'targeting[r2].conditions[0].value', before: 'free', after: 'enterprise', kind: 'changed' },
      { path: 'targeting[r0].id', after: 'r0', kind: 'added' },
      { path: 'targeting[r0].conditions[0].property', after: 'plan', kind: 'added' },
      { path: 'targeting[r0].conditions[0].operator', after: 'equals', kind: 'added' },
      { path: 'targeting[r0].conditions[0].value', after: 'team', kind: 'added' },
      { path: 'targeting[r0].value', after: true, kind: 'added' },
      { path: 'variants[on].weight', before: 50, after: 100, kind: 'changed' },
    ]);
  });

  it('compares arrays without ids by position, and a change of kind (object to list) whole', () => {
    expect(diffJson([1, 2], [1, 3, 4])).toEqual([
      { path: '[1]', before: 2, after: 3, kind: 'changed' },
      { path: '[2]', after: 4, kind: 'added' },
    ]);
    expect(diffJson({ v: { a: 1 } }, { v: [1] })).toEqual([{ path: 'v', before: { a: 1 }, after: [1], kind: 'changed' }]);
  });

  it('treats a whole value added or removed as its leaves, and empty containers as one entry', () => {
    expect(diffJson(undefined, { a: { b: 1 }, c: [] })).toEqual([
      { path: 'a.b', after: 1, kind: 'added' },
      { path: 'c', after: [], kind: 'added' },
    ]);
    expect(diffJson('x', undefined)).toEqual([{ path: '(value)', before: 'x', kind: 'removed' }]);
    expect(diffJson(null, 0)).toEqual([{ path: '(value)', before: null, after: 0, kind: 'changed' }]);
  });

  it('quotes ids that look like indexes', () => {
    expect(diffJson([{ id: '7', v: 1 }], [{ id: '7', v: 2 }])).toEqual([{ path: '["7"].v', before: 1, after: 2, kind: 'changed' }]);
  });
});

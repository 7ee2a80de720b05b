/**
 * A field-level diff of two JSON values, for a flag's versions and audit entries: every leaf
 * that was added, removed or changed, with its path (`targeting[beta-users].conditions[0].value`).
 * Arrays of objects that each carry a distinct `id` (targeting rules) or `name` (variants) are
 * matched by it, so reordering or inserting one rule reads as that rule, not as every rule after
 * it changing; other arrays are compared position by position. Pure and dependency-free (unit
 * tested in test/web/diff.test.ts).
 */
export type ChangeKind = 'added' | 'removed' | 'changed';

export interface FieldChange {
  /** Where the value sits: `name`, `variants[control].weight`, `tags[1]`. */
  path: string;
  /** The old value; undefined when added. */
  before?: unknown;
  /** The new value; undefined when removed. */
  after?: unknown;
  kind: ChangeKind;
}

type Json = unknown;

const isObject = (value: Json): value is Record<string, Json> => typeof value === 'object' && value !== null && !Array.isArray(value);

/** Key (id or name) matching array elements across versions, when every element has a distinct one. */
function identityKey(items: Json[]): 'id' | 'name' | undefined {
  for (const key of ['id', 'name'] as const) {
    const ids = items.map((item) => (isObject(item) && typeof item[key] === 'string' ? item[key] : undefined));
    if (ids.every((id) => id !== undefined) && new Set(ids).size === ids.length) return key;
  }
  return undefined;
}

const child = (path: string, key: string) => (path ? `${path}.${key}` : key);
/** Bracketed segment; ids are shown as-is (readable), quoted only when they could be mistaken for an index. */
const element = (path: string, id: string | number) => `${path}[${typeof id === 'string' && /^\d+$/.test(id) ? JSON.stringify(id) : id}]`;

/** Every field that differs between `before` and `after` (undefined on either side: the whole value added or removed). */
export function diffJson(before: Json, after: Json, path = ''): FieldChange[] {
  if (before === undefined && after === undefined) return [];
  if (before === undefined) return leaves(after, path, 'added');
  if (after === undefined) return leaves(before, path, 'removed');
  if (isObject(before) && isObject(after)) {
    const keys = [...Object.keys(before), ...Object.keys(after).filter((k) => !(k in before))];
    return keys.flatMap((key) => diffJson(before[key], after[key], child(path, key)));
  }
  if (Array.isArray(before) && Array.isArray(after)) return diffArrays(before, after, path);
  return sameJson(before, after) ? [] : [{ path: path || '(value)', before, after, kind: 'changed' }];
}

function diffArrays(before: Json[], after: Json[], path: string): FieldChange[] {
  const key = sharedIdentityKey(before, after);
  if (key) {
    const byId = (items: Json[]) => new Map(items.map((item) => [(item as Record<string, string>)[key], item]));
    const old = byId(before);
    const now = byId(after);
    const ids = [...old.keys(), ...[...now.keys()].filter((id) => !old.has(id))];
    return ids.flatMap((id) => diffJson(old.get(id), now.get(id), element(path, id)));
  }
  const changes: FieldChange[] = [];
  for (let i = 0; i < Math.max(before.length, after.length); i++) changes.push(...diffJson(before[i], after[i], element(path, i)));
  return changes;
}

/** The identity key of both arrays (an empty side takes the other's). */
function sharedIdentityKey(before: Json[], after: Json[]): 'id' | 'name' | undefined {
  if (!before.length) return identityKey(after);
  if (!after.length) return identityKey(before);
  const key = identityKey(before);
  return key && identityKey(after) === key ? key : undefined;
}

/** A value added or removed whole: one entry per leaf, so nested content is listed field by field. */
function leaves(value: Json, path: string, kind: 'added' | 'removed'): FieldChange[] {
  const entry = (v: Json, p: string): FieldChange => (kind === 'added' ? { path: p || '(value)', after: v, kind } : { path: p || '(value)', before: v, kind });
  if (isObject(value)) {
    const keys = Object.keys(value);
    return keys.length ? keys.flatMap((key) => leaves(value[key], child(path, key), kind)) : [entry(value, path)];
  }
  if (Array.isArray(value)) {
    if (!value.length) return [entry(value, path)];
    const key = identityKey(value);
    return value.flatMap((item, i) => leaves(item, element(path, key ? (item as Record<string, string>)[key] : i), kind));
  }
  return [entry(value, path)];
}

/** Structural equality of JSON values (object key order ignored: stored JSON reorders keys). */
function sameJson(a: Json, b: Json): boolean {
  if (a === b) return true;
  if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && a.every((item, i) => sameJson(item, b[i]));
  if (isObject(a) && isObject(b)) {
    const keys = Object.keys(a);
    return keys.length === Object.keys(b).length && keys.every((k) => k in b && sameJson(a[k], b[k]));
  }
  return false;
}

/**
 * The evaluation context an explain request sends (an object: targetingKey plus attributes),
 * built from the console's two editors, with the problems a person can fix before sending.
 */
export interface AttributeRow {
  name: string;
  /** As typed: read as JSON when it parses (42, true, ["a","b"], "quoted text"), else as text. */
  value: string;
}

export type Context = Record<string, unknown>;

/** A problem with one input of the editor: `targetingKey`, `json`, `name-<row>` or `value-<row>`. */
export interface ContextProblem {
  field: string;
  message: string;
}

export type Built = { context: Context; problems?: undefined } | { context?: undefined; problems: ContextProblem[] };

/** 42 -> 42, true -> true, ["a"] -> ["a"], "7" (quoted) -> "7", anything else -> the text itself. */
export function attributeValue(text: string): unknown {
  const trimmed = text.trim();
  if (!trimmed) return '';
  try {
    return JSON.parse(trimmed) as unknown;
  } catch {
    return text;
  }
}

/** The text that reads back as `value` through attributeValue. */
export function attributeText(value: unknown): string {
  if (typeof value === 'string') {
    const reread = attributeValue(value);
    return reread === value ? value : JSON.stringify(value);
  }
  return JSON.stringify(value);
}

export function contextFromRows(targetingKey: string, rows: AttributeRow[]): Built {
  const problems: ContextProblem[] = [];
  const context: Context = {};
  if (targetingKey.trim()) context.targetingKey = targetingKey.trim();
  const seen = new Map<string, number>();
  rows.forEach((row, i) => {
    const name = row.name.trim();
    if (!name && !row.value.trim()) return; // an empty row is ignored
    if (!name) problems.push({ field: `name-${i}`, message: 'needs a name' });
    else if (name === 'targetingKey') problems.push({ field: `name-${i}`, message: 'use the Targeting key field for targetingKey' });
    else if (seen.has(name)) problems.push({ field: `name-${i}`, message: `"${name}" is already attribute ${seen.get(name)! + 1}` });
    else {
      seen.set(name, i);
      context[name] = attributeValue(row.value);
    }
  });
  return problems.length ? { problems } : { context };
}

export function contextFromJson(text: string): Built {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text || '{}');
  } catch (error) {
    return { problems: [{ field: 'json', message: `is not valid JSON (${error instanceof Error ? error.message : String(error)})` }] };
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    return { problems: [{ field: 'json', message: 'must be a JSON object, like {"targetingKey": "user-1", "plan": "pro"}' }] };
  }
  const context = parsed as Context;
  if ('targetingKey' in context && typeof context.targetingKey !== 'string') {
    return { problems: [{ field: 'json', message: 'targetingKey must be a string' }] };
  }
  return { context };
}

/** The rows editor's content for a context (the inverse of contextFromRows). */
export function rowsOf(context: Context): { targetingKey: string; rows: AttributeRow[] } {
  const { targetingKey, ...attributes } = context;
  return {
    targetingKey: typeof targetingKey === 'string' ? targetingKey : '',
    rows: Object.entries(attributes).map(([name, value]) => ({ name, value: attributeText(value) })),
  };
}

/** ISO 8601 dates and epoch milliseconds as comparable epoch milliseconds (before, after, gt..lte on dates). */

const ISO_DATE =
  /^(\d{4})-(\d{2})-(\d{2})(?:[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?([Zz]|[+-]\d{2}:?\d{2})?)?$/;

/** Epoch milliseconds of an ISO 8601 date or date-time string; NaN when it is not one. */
export function parseIsoDate(text: string): number {
  if (text.length > 40) return NaN;
  const match = ISO_DATE.exec(text);
  if (match === null) return NaN;
  const year = Number(match[1]);
  const month = Number(match[2]);
  const day = Number(match[3]);
  const hour = match[4] === undefined ? 0 : Number(match[4]);
  const minute = match[5] === undefined ? 0 : Number(match[5]);
  const second = match[6] === undefined ? 0 : Number(match[6]);
  const millisecond = match[7] === undefined ? 0 : Number(match[7].slice(0, 3).padEnd(3, '0'));
  if (month < 1 || month > 12 || day < 1 || hour > 23 || minute > 59 || second > 59) return NaN;
  const date = new Date(Date.UTC(year, month - 1, day, hour, minute, second, millisecond));
  // Date.UTC rolls 2024-02-30 over to March: a changed day means the date does not exist.
  if (date.getUTCDate() !== day) return NaN;
  if (year < 100) date.setUTCFullYear(year);
  return date.getTime() - offsetMinutes(match[8]) * 60_000;
}

function offsetMinutes(zone: string | undefined): number {
  if (zone === undefined || zone === 'Z' || zone === 'z') return 0;
  const digits = zone.replace(':', '');
  const minutes = Number(digits.slice(1, 3)) * 60 + Number(digits.slice(3, 5));
  return zone[0] === '-' ? -minutes : minutes;
}

/** Epoch milliseconds of an ISO 8601 string or an epoch-milliseconds number; NaN otherwise. */
export function toComparableDate(value: unknown): number {
  if (typeof value === 'number') return Number.isFinite(value) ? value : NaN;
  if (typeof value === 'string') return parseIsoDate(value);
  return NaN;
}

/**
 * When a change request applies: a datetime-local input read in the browser's time zone, which
 * the label names with its offset at the chosen time ("Europe/Berlin (UTC+01:00)"; daylight
 * saving moves it), and the API gets as an ISO instant in UTC.
 */
import { LabelledControl } from '../forms';

/** The browser's IANA time zone. */
const TIME_ZONE = Intl.DateTimeFormat().resolvedOptions().timeZone;

/** "UTC+01:00" for the browser's zone at `at`. */
function utcOffset(at: Date): string {
  const minutes = -at.getTimezoneOffset();
  const abs = Math.abs(minutes);
  return `UTC${minutes < 0 ? '−' : '+'}${String(Math.floor(abs / 60)).padStart(2, '0')}:${String(abs % 60).padStart(2, '0')}`;
}

/** An input's local "2026-03-01T09:30" as an ISO instant ("2026-03-01T08:30:00.000Z"), or undefined when empty or invalid. */
export function scheduleToIso(local: string): string | undefined {
  if (!local) return undefined;
  const at = new Date(local); // date and time without a zone: the browser's local time
  return Number.isNaN(at.getTime()) ? undefined : at.toISOString();
}

/** An ISO instant as the input's local value. */
export function isoToSchedule(iso: string | null | undefined): string {
  if (!iso) return '';
  const at = new Date(iso);
  const pad = (n: number) => String(n).padStart(2, '0');
  return `${at.getFullYear()}-${pad(at.getMonth() + 1)}-${pad(at.getDate())}T${pad(at.getHours())}:${pad(at.getMinutes())}`;
}

export function ScheduleField({ label, value, onChange, problem }: { label: string; value: string; onChange: (local: string) => void; problem?: string }) {
  const iso = scheduleToIso(value);
  const zone = `${TIME_ZONE} (${utcOffset(iso ? new Date(iso) : new Date())})`;
  return (
    <LabelledControl
      label={`${label}, ${zone}`}
      problem={problem}
      hint={iso ? `Applies at ${iso.replace('T', ' ').replace(/:\d\d\.\d{3}Z$/, '')} UTC.` : 'Leave empty to apply it by hand once approved.'}
    >
      {(props) => <input type="datetime-local" value={value} onChange={(e) => onChange(e.target.value)} {...props} />}
    </LabelledControl>
  );
}

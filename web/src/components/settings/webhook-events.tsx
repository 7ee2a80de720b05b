import type { ApiError } from '../../api/client';

export const WEBHOOK_EVENTS = ['flag.created', 'flag.updated', 'flag.deleted', 'flag.toggled'] as const;
export type WebhookEvent = (typeof WEBHOOK_EVENTS)[number];

/** The checked events of a form with <EventChoices/>. */
export function eventsOf(data: FormData): WebhookEvent[] {
  return WEBHOOK_EVENTS.filter((e) => data.get(`event:${e}`) === 'on');
}

/** One checkbox per flag event (all checked unless `checked` says otherwise). */
export function EventChoices({ checked, error }: { checked?: readonly string[]; error?: ApiError }) {
  const problem = error?.fieldError('events');
  return (
    <fieldset className="st-choices">
      <legend>Events</legend>
      {WEBHOOK_EVENTS.map((event) => (
        <label key={event}>
          <input type="checkbox" name={`event:${event}`} defaultChecked={checked ? checked.includes(event) : true} /> <code>{event}</code>
        </label>
      ))}
      {problem && <p className="field-error">{problem}</p>}
    </fieldset>
  );
}

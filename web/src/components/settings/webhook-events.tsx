import type { ApiError, paths } from '../../api/client';

type ApiWebhookEvent = NonNullable<NonNullable<paths['/api/webhooks']['post']['requestBody']>['content']['application/json']['events']>[number];

const FLAG_EVENTS = ['flag.created', 'flag.updated', 'flag.deleted', 'flag.toggled'] as const;
const CHANGE_REQUEST_EVENTS = [
  'change_request.created',
  'change_request.updated',
  'change_request.approved',
  'change_request.rejected',
  'change_request.cancelled',
  'change_request.applied',
  'change_request.failed',
] as const;
export const WEBHOOK_EVENTS = [...FLAG_EVENTS, ...CHANGE_REQUEST_EVENTS] as const satisfies readonly ApiWebhookEvent[];
export type WebhookEvent = (typeof WEBHOOK_EVENTS)[number];

/** The checked events of a form with <EventChoices/>. */
export function eventsOf(data: FormData): WebhookEvent[] {
  return WEBHOOK_EVENTS.filter((e) => data.get(`event:${e}`) === 'on');
}

/** One checkbox per event; unless `checked` says otherwise, the flag events (what the API subscribes a webhook to by default). */
export function EventChoices({ checked, error }: { checked?: readonly string[]; error?: ApiError }) {
  const problem = error?.fieldError('events');
  return (
    <fieldset className="st-choices">
      <legend>Events</legend>
      {WEBHOOK_EVENTS.map((event) => (
        <label key={event}>
          <input type="checkbox" name={`event:${event}`} defaultChecked={checked ? checked.includes(event) : (FLAG_EVENTS as readonly string[]).includes(event)} /> <code>{event}</code>
        </label>
      ))}
      {problem && <p className="field-error">{problem}</p>}
    </fieldset>
  );
}

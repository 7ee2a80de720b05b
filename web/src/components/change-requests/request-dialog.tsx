/**
 * The way out of a refused write (403 APPROVAL_REQUIRED: the environment's change policy wants
 * approvals): the same change, opened as a change request with a title, an optional description
 * and an optional schedule, in a modal dialog; once opened, the console goes to the request.
 */
import { useEffect, useId, useRef, useState } from 'react';
import { useLocation } from 'wouter';
import { api, call, type ApiError } from '../../api/client';
import { Field, FormError, LabelledControl, SubmitButton, useSubmit } from '../forms';
import { changeRequestHref, describeChange, type NewChange } from './model';
import { scheduleToIso, ScheduleField } from './schedule-field';

/** The failure means the write needs a change request instead. */
export const needsApproval = (error: ApiError | undefined) => error?.status === 403 && error.reason === 'APPROVAL_REQUIRED';

export function ChangeRequestDialog({ projectId, change, onClose }: { projectId: string; change?: NewChange; onClose(): void }) {
  const ref = useRef<HTMLDialogElement>(null);
  const titleId = useId();
  const [, navigate] = useLocation();
  const [schedule, setSchedule] = useState('');

  useEffect(() => {
    const dialog = ref.current;
    if (!dialog) return;
    if (change && !dialog.open) {
      setSchedule('');
      dialog.showModal();
    } else if (!change && dialog.open) dialog.close();
  }, [change]);

  const open = useSubmit(async (data) => {
    if (!change) return;
    const description = String(data.get('description') ?? '').trim();
    const scheduledAt = scheduleToIso(schedule);
    const created = await call(
      api.POST('/api/projects/{id}/change-requests', {
        params: { path: { id: projectId } },
        body: { title: String(data.get('title') ?? '').trim(), changes: [change], ...(description ? { description } : {}), ...(scheduledAt ? { scheduledAt } : {}) },
      }),
    );
    navigate(changeRequestHref(projectId, created.id));
  });

  return (
    // Escape closes a modal <dialog> natively; its close event tells the opener.
    <dialog ref={ref} className="cr-dialog" aria-labelledby={titleId} onClose={onClose}>
      {change && (
        <form onSubmit={open.onSubmit} noValidate>
          <h2 id={titleId}>Request approval</h2>
          <p>
            {change.environment} needs approval for changes: open a change request for <strong>{describeChange(change)}</strong>. It applies once approved.
          </p>
          <Field label="Title" name="title" required maxLength={200} defaultValue={describeChange(change)} error={open.error} />
          <LabelledControl label="Description (optional)" problem={open.error?.fieldError('description')}>
            {(props) => <textarea name="description" rows={3} maxLength={10_000} {...props} />}
          </LabelledControl>
          <ScheduleField label="Apply at (optional)" value={schedule} onChange={setSchedule} problem={open.error?.fieldError('scheduledAt')} />
          <FormError error={open.error} fields={['title', 'description', 'scheduledAt']} />
          <div className="actions">
            <SubmitButton busy={open.busy}>Open change request</SubmitButton>
            <button type="button" onClick={() => ref.current?.close()}>
              Cancel
            </button>
          </div>
        </form>
      )}
    </dialog>
  );
}

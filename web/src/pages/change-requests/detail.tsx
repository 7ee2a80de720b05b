import { Fragment, useId, useState, type ReactNode } from 'react';
import { Link, useParams } from 'wouter';
import { api, call } from '../../api/client';
import { useChangeRequest } from '../../api/resources';
import { ChangeView } from '../../components/change-requests/change-view';
import {
  approvalsLine,
  environmentsOf,
  isFinal,
  STATUS_WORDS,
  whyNotApply,
  whyNotCancel,
  whyNotReview,
  type ChangeRequest,
} from '../../components/change-requests/model';
import { isoToSchedule, scheduleToIso, ScheduleField } from '../../components/change-requests/schedule-field';
import { LabelledControl, useAction } from '../../components/forms';
import { When } from '../../components/history/value';
import { useProjectAccess } from '../../components/settings/access';
import { ConfirmButton } from '../../components/settings/confirm';
import { ActionOutcome } from '../../components/settings/settings-page';
import { LoadState } from '../../components/status';
import { useTitle } from '../../page-title';

/**
 * One change request: its changes (each with its diff, its impact on recent contexts and whether
 * its flag moved since), the approvals and their comments, and what the caller may do with it:
 * approve or reject with a comment, schedule, apply, cancel. The request's `actions` say what the
 * API allows this caller; a control it refuses stays visible, disabled, with the reason beside it.
 */
export default function ChangeRequestDetail() {
  const { projectId, requestId } = useParams<{ projectId: string; requestId: string }>();
  const request = useChangeRequest(projectId, requestId);
  useTitle(request.data ? `${request.data.title} · Change request` : 'Change request');
  return (
    <LoadState loading={request.loading} error={request.error}>
      {request.data && <RequestView projectId={projectId} request={request.data} reload={request.reload} />}
    </LoadState>
  );
}

function RequestView({ projectId, request, reload }: { projectId: string; request: ChangeRequest; reload: () => Promise<void> }) {
  const { role, userId } = useProjectAccess(projectId);
  const action = useAction();
  const [notice, setNotice] = useState('');
  const [comment, setComment] = useState('');
  const [schedule, setSchedule] = useState(() => isoToSchedule(request.scheduledAt));
  const path = { id: projectId, requestId: request.id };
  const busy = action.running !== undefined;
  const caller = { userId, role };

  async function act(id: string, done: string, send: () => Promise<unknown>) {
    setNotice('');
    const ok = await action.run(id, send);
    // A refusal (a conflict turns the request failed) changes the request too.
    await reload();
    if (ok) setNotice(done);
    return ok;
  }

  async function review(verb: 'approve' | 'reject') {
    const text = comment.trim();
    const ok = await act(verb, verb === 'approve' ? 'You approved this request.' : 'You rejected this request.', () =>
      verb === 'approve'
        ? call(api.POST('/api/projects/{id}/change-requests/{requestId}/approve', { params: { path }, body: text ? { comment: text } : {} }))
        : call(api.POST('/api/projects/{id}/change-requests/{requestId}/reject', { params: { path }, body: { comment: text } })),
    );
    if (ok) setComment('');
  }

  const scheduledAt = scheduleToIso(schedule) ?? null;

  return (
    <>
      <h1>{request.title}</h1>
      <p className="page-links">
        <Link href={`/projects/${encodeURIComponent(projectId)}/change-requests`}>All change requests</Link>
      </p>
      <dl className="cr-facts">
        <dt>Status</dt>
        <dd>
          <span className={`cr-status cr-status-${request.status}`}>{STATUS_WORDS[request.status]}</span>
          {request.failureReason && <> ({request.failureReason})</>}
        </dd>
        <dt>Opened by</dt>
        <dd>
          {request.createdByName} · <When at={request.createdAt} />
        </dd>
        <dt>Environments</dt>
        <dd>{environmentsOf(request).join(', ')}</dd>
        <dt>Scheduled</dt>
        <dd>{request.scheduledAt ? <When at={request.scheduledAt} /> : 'Not scheduled'}</dd>
        {request.appliedAt && (
          <>
            <dt>Applied</dt>
            <dd>
              <When at={request.appliedAt} />
            </dd>
          </>
        )}
      </dl>
      {request.description && <p className="cr-description">{request.description}</p>}
      <ActionOutcome notice={notice} error={action.error} />

      {request.conflicts.length > 0 && (
        <section aria-labelledby="conflicts" className="cr-conflicts">
          <h2 id="conflicts">Flags moved since</h2>
          <p>These flags changed after the request was made; applying it fails (and changes nothing) until it is remade against their current versions.</p>
          <ul>
            {request.conflicts.map((c) => (
              <li key={`${c.serviceId}:${c.environment}:${c.flagKey}`}>
                <code>{c.flagKey}</code> in {c.environment}: {c.baseVersion === null ? 'made when the flag did not exist' : `made against version ${c.baseVersion}`},{' '}
                {c.currentVersion === null ? 'gone since' : `now at version ${c.currentVersion}`}.
              </li>
            ))}
          </ul>
        </section>
      )}

      <section aria-labelledby="changes">
        <h2 id="changes">Changes</h2>
        {request.changes.map((change, i) => (
          <ChangeView key={i} request={request} change={change} />
        ))}
      </section>

      <section aria-labelledby="approvals">
        <h2 id="approvals">Approvals</h2>
        <p>{approvalsLine(request)}</p>
        {request.approvals.length > 0 && (
          <ul className="cr-reviews" aria-label="Approvals given">
            {request.approvals.map((a) => (
              <li key={a.userId}>
                <strong>{a.name}</strong> approved · <When at={a.at} />
                {a.comment && <blockquote>{a.comment}</blockquote>}
              </li>
            ))}
          </ul>
        )}
        {request.rejection && (
          <div className="cr-rejection">
            <p>
              <strong>{request.rejection.name}</strong> rejected it · <When at={request.rejection.at} />
            </p>
            <blockquote>{request.rejection.comment}</blockquote>
          </div>
        )}
        {!isFinal(request) && (
          <div className="inline-form">
            <LabelledControl label="Comment" hint="Optional to approve, required to reject; shown with your review." problem={action.error?.fieldError('comment')}>
              {(props) => (
                <textarea
                  rows={3}
                  maxLength={2000}
                  value={comment}
                  disabled={!request.actions.approve && !request.actions.reject}
                  onChange={(e) => setComment(e.target.value)}
                  {...props}
                />
              )}
            </LabelledControl>
            <GuardedActions
              guards={[
                {
                  allowed: request.actions.approve,
                  reason: whyNotReview(request, caller, 'approve'),
                  render: (props) => (
                    <button type="button" className="primary" {...props} disabled={props.disabled || busy} onClick={() => void review('approve')}>
                      {action.running === 'approve' ? 'Approving…' : 'Approve'}
                    </button>
                  ),
                },
                {
                  allowed: request.actions.reject,
                  reason: whyNotReview(request, caller, 'reject'),
                  render: (props) => (
                    <button type="button" {...props} disabled={props.disabled || busy || !comment.trim()} onClick={() => void review('reject')}>
                      {action.running === 'reject' ? 'Rejecting…' : 'Reject'}
                    </button>
                  ),
                },
              ]}
            />
          </div>
        )}
      </section>

      {!isFinal(request) && (
        <section aria-labelledby="apply">
          <h2 id="apply">Apply</h2>
          {request.actions.edit && (
            <div className="inline-form">
              <ScheduleField label="Apply at" value={schedule} onChange={setSchedule} problem={action.error?.fieldError('scheduledAt')} />
              {request.approvals.length > 0 && <p className="hint">Changing the schedule withdraws the approvals given so far.</p>}
              <div className="actions">
                <button
                  type="button"
                  disabled={busy || scheduledAt === request.scheduledAt}
                  onClick={() =>
                    void act('schedule', scheduledAt ? 'Schedule saved.' : 'Schedule cleared.', () =>
                      call(api.PATCH('/api/projects/{id}/change-requests/{requestId}', { params: { path }, body: { scheduledAt } })),
                    )
                  }
                >
                  {scheduledAt ? 'Save schedule' : 'Clear schedule'}
                </button>
              </div>
            </div>
          )}
          <GuardedActions
            guards={[
              {
                allowed: request.actions.apply,
                reason: whyNotApply(request),
                render: (props) => (
                  <button
                    type="button"
                    className="primary"
                    {...props}
                    disabled={props.disabled || busy}
                    onClick={() => void act('apply', 'Applied: the flags now serve these changes.', () => call(api.POST('/api/projects/{id}/change-requests/{requestId}/apply', { params: { path } })))}
                  >
                    {action.running === 'apply' ? 'Applying…' : request.status === 'scheduled' ? 'Apply now' : 'Apply'}
                  </button>
                ),
              },
              {
                allowed: request.actions.cancel,
                reason: whyNotCancel(request),
                render: (props) =>
                  props.disabled ? (
                    <button type="button" {...props}>
                      Cancel this request
                    </button>
                  ) : (
                    <ConfirmButton
                      label="Cancel this request"
                      confirmLabel="Cancel request"
                      question="Nothing of it will apply."
                      busy={action.running === 'cancel'}
                      disabled={busy}
                      onConfirm={() => void act('cancel', 'Request cancelled.', () => call(api.POST('/api/projects/{id}/change-requests/{requestId}/cancel', { params: { path } })))}
                    />
                  ),
              },
            ]}
          />
        </section>
      )}
    </>
  );
}

interface Guard {
  /** What the request's `actions` say for this caller. */
  allowed: boolean;
  reason: string;
  render: (props: { disabled: boolean; 'aria-describedby'?: string }) => ReactNode;
}

/**
 * A row of controls the API may refuse this caller: a refused one is disabled and described by its
 * reason, shown under the row (once, when several share it).
 */
function GuardedActions({ guards }: { guards: Guard[] }) {
  const id = useId();
  const reasons = [...new Set(guards.filter((g) => !g.allowed).map((g) => g.reason))];
  return (
    <>
      <div className="actions cr-actions">
        {guards.map((g, i) => (
          <Fragment key={i}>{g.render(g.allowed ? { disabled: false } : { disabled: true, 'aria-describedby': `${id}-${reasons.indexOf(g.reason)}` })}</Fragment>
        ))}
      </div>
      {reasons.map((reason, i) => (
        <p key={reason} id={`${id}-${i}`} className="hint">
          {reason}
        </p>
      ))}
    </>
  );
}

/**
 * Advance, force and abort a running or paused canary. Force and abort change the flag for real
 * users without a gate, so each asks for a confirmation first (abort with its reason, which the
 * audit keeps). Buttons disable and say what is happening at once; the API answers with the
 * workflow's own result once it acted (docs/canary.md: workflow updates), then the new record
 * replaces the old. The outcome stays shown
 * after the pipeline ended (the buttons go, the feedback does not).
 */
import { useEffect, useId, useRef, useState } from 'react';
import { api, call } from '../../api/client';
import { useAction } from '../forms';
import { gateState } from './health';
import { isActive, type CanaryGate, type CanaryRecord, type Environment } from './types';

type Pending = 'force' | 'abort' | undefined;
type Busy = 'advance' | 'force' | 'abort' | undefined;

const WAITING_TEXT = 'Not advanced: the gate is waiting for data, so the stage keeps soaking.';

const BUSY_TEXT: Record<NonNullable<Busy>, string> = {
  advance: 'Running the gate…',
  force: 'Forcing the next stage…',
  abort: 'Aborting: restoring the flag…',
};

/** `refusal`: why the signed-in user may not steer the pipeline; the buttons show disabled with it. */
export function CanaryControls({ record, refusal, onChange }: { record: CanaryRecord; refusal?: string; onChange: (record: CanaryRecord) => void }) {
  const [confirming, setConfirming] = useState<Pending>();
  const action = useAction();
  const busy = action.running as Busy;
  const [done, setDone] = useState<string>();
  const [reason, setReason] = useState('Aborted from the console');
  const reasonId = useId();
  const refusalId = useId();
  const confirmRef = useRef<HTMLDivElement>(null);
  const triggers = useRef<HTMLDivElement>(null);
  const scope = { serviceId: record.serviceId, environment: record.environment as Environment };
  const path = { key: record.flagKey };

  useEffect(() => {
    // The confirmation takes the focus so keyboard users land on it (the reason, or the confirm button).
    if (confirming) confirmRef.current?.querySelector<HTMLElement>('input, button')?.focus();
  }, [confirming]);

  async function act(kind: NonNullable<Busy>) {
    setDone(undefined);
    setConfirming(undefined);
    await action.run(kind, async () => {
      if (kind === 'abort') {
        onChange(await call(api.POST('/api/flags/{key}/canary/abort', { params: { path }, body: { ...scope, reason } })));
        setDone('Aborted: the flag is back to its content from before the canary.');
        return;
      }
      const answer = await api.POST('/api/flags/{key}/canary/advance', { params: { path }, body: { ...scope, force: kind === 'force' } });
      // A 409 carries the gate (docs/canary.md): too little data is the stage still soaking, not a failure.
      const refusedGate = answer.response.status === 409 ? (answer.error as { gate?: CanaryGate } | undefined)?.gate : undefined;
      if (refusedGate && gateState(refusedGate, record.config) === 'waiting') {
        setDone(WAITING_TEXT);
        return;
      }
      onChange(await call(Promise.resolve(answer)));
      setDone('The stage ended; the pipeline moved on.');
    });
  }

  return (
    <section aria-labelledby="canary-actions" className="rs-controls">
      <h2 id="canary-actions" className="visually-hidden">
        Canary actions
      </h2>
      {isActive(record.status) && refusal && (
        <>
          {/* One reason for the three buttons (RefusedButton would repeat it under each). */}
          <div className="rs-buttons">
            {['Advance stage', 'Force advance…', 'Abort canary…'].map((label) => (
              <button key={label} type="button" className={label === 'Abort canary…' ? 'danger' : undefined} disabled title={refusal} aria-describedby={refusalId}>
                {label}
              </button>
            ))}
          </div>
          <p id={refusalId} className="hint">
            {refusal}
          </p>
        </>
      )}
      {isActive(record.status) && !refusal && (
        <div className="rs-buttons" ref={triggers}>
          <button type="button" onClick={() => void act('advance')} disabled={!!busy} title="Run the gate now; the stage ends only if it passes">
            Advance stage
          </button>
          <button type="button" onClick={() => setConfirming('force')} disabled={!!busy} aria-expanded={confirming === 'force'}>
            Force advance…
          </button>
          <button type="button" className="danger" onClick={() => setConfirming('abort')} disabled={!!busy} aria-expanded={confirming === 'abort'}>
            Abort canary…
          </button>
        </div>
      )}
      {confirming && isActive(record.status) && (
        <div ref={confirmRef} role="group" aria-label={confirming === 'abort' ? 'Confirm abort' : 'Confirm force advance'} className="rs-confirm">
          {confirming === 'abort' ? (
            <>
              <p>Abort restores the flag to its content from before the canary, for every user, now.</p>
              <div className="field">
                <label htmlFor={reasonId}>Reason</label>
                <input id={reasonId} value={reason} maxLength={1000} onChange={(e) => setReason(e.target.value)} />
              </div>
            </>
          ) : (
            <p>Force ends the current stage without its soak and gate: the next stage's rollout starts now. It is audited as forced.</p>
          )}
          <div className="rs-buttons">
            <button type="button" className="danger" disabled={!!busy || (confirming === 'abort' && !reason.trim())} onClick={() => void act(confirming)}>
              {confirming === 'abort' ? 'Confirm abort' : 'Confirm force advance'}
            </button>
            <button
              type="button"
              onClick={() => {
                // Back to the button that opened the confirmation, for keyboard users.
                triggers.current?.querySelector<HTMLElement>(`[aria-expanded="true"]`)?.focus();
                setConfirming(undefined);
              }}
            >
              Cancel
            </button>
          </div>
        </div>
      )}
      <p role="status" className={action.error ? 'form-error rs-feedback' : 'rs-feedback'}>
        {busy ? BUSY_TEXT[busy] : (action.error?.message ?? done)}
      </p>
    </section>
  );
}

import { useEffect, useId, useRef, useState, type FormEvent } from 'react';
import { api, call } from '../../api/client';
import type { NewChange } from '../change-requests/model';
import { ChangeRequestDialog, needsApproval } from '../change-requests/request-dialog';
import { useAction } from '../forms';
import { NEEDS, useProjectAccess } from '../settings/access';
import { activation } from '../../telemetry';
import { EnvironmentBadge } from './environments';
import type { Environment, FlagRecord } from './model';

interface FlagSwitchProps {
  projectId: string;
  flagKey: string;
  serviceId: string;
  environment: Environment;
  enabled: boolean;
  /** The record's version, which a change request for a refused toggle is made against (the API takes the current one when absent). */
  version?: number;
  /** The accessible name; the flag's key tells rows of a list apart. */
  label: string;
  /** The flag as the toggle left it (its new version). */
  onChanged?: (flag: FlagRecord) => void;
}

/**
 * A flag's on/off switch: a button with role="switch" (Space and Enter work, focus shows). It
 * flips at once (optimistic) and posts the wanted state to the toggle endpoint; when the server
 * refuses, it flips back and says why beside it. A viewer's switch is disabled, the reason in its
 * tooltip and description, rather than failing with "Forbidden" once pressed. In production the press
 * first asks for confirmation, focused on an optional reason kept in the audit entry
 * (docs/api-reference.md#flags): Enter or one click confirms, so a kill stays three steps.
 */
export function FlagSwitch({ projectId, flagKey, serviceId, environment, enabled, version, label, onChanged }: FlagSwitchProps) {
  const [shown, setShown] = useState(enabled);
  const action = useAction();
  const busy = action.running !== undefined;
  // What the last press asked for, to word its failure.
  const [wantedLast, setWantedLast] = useState(enabled);
  // The refused toggle, offered as a change request (the environment's policy wants approvals).
  const [requesting, setRequesting] = useState<NewChange | undefined>();
  const refusal = useProjectAccess(projectId).can('flags:write') ? undefined : NEEDS['flags:change'];
  const refusalId = useId();

  const confirmation = useRef<HTMLDialogElement>(null);
  const reasonInput = useRef<HTMLInputElement>(null);
  const confirmationTitleId = useId();

  // A reload of the flag (another change) is the truth again.
  useEffect(() => setShown(enabled), [enabled]);

  function press() {
    if (busy) return;
    if (environment !== 'production') {
      void toggle();
      return;
    }
    if (reasonInput.current) reasonInput.current.value = '';
    confirmation.current?.showModal();
    reasonInput.current?.focus();
  }

  function confirm(event: FormEvent<HTMLFormElement>) {
    event.preventDefault();
    const reason = reasonInput.current?.value.trim() ?? '';
    confirmation.current?.close();
    void toggle(reason);
  }

  async function toggle(reason = '') {
    if (busy) return;
    const wanted = !shown;
    setShown(wanted);
    setWantedLast(wanted);
    const ok = await action.run('toggle', async () => {
      const flag = await call(
        api.POST('/api/flags/{key}/toggle', {
          params: { path: { key: flagKey }, query: { serviceId, environment } },
          body: { enabled: wanted, ...(reason ? { reason } : {}) },
        }),
      );
      setShown(flag.enabled);
      activation(projectId, 'flag_toggled');
      onChanged?.(flag);
    });
    if (!ok) setShown(!wanted);
  }

  return (
    <span className="fl-flag-switch">
      <button
        type="button"
        role="switch"
        aria-checked={shown}
        aria-label={label}
        aria-busy={busy || undefined}
        className="fl-switch"
        disabled={!!refusal}
        title={refusal}
        aria-describedby={refusal ? refusalId : undefined}
        onClick={press}
      >
        <span className="fl-switch-track" aria-hidden="true">
          <span className="fl-switch-thumb" />
        </span>
        <span className="fl-switch-text" aria-hidden="true">
          {shown ? 'On' : 'Off'}
        </span>
      </button>
      {refusal && (
        <span id={refusalId} className="visually-hidden">
          {refusal}
        </span>
      )}
      {action.error && (
        <span role="alert" className="field-error">
          Not {wantedLast ? 'enabled' : 'disabled'}: {action.error.message}
        </span>
      )}
      {needsApproval(action.error) && (
        <button
          type="button"
          onClick={() => setRequesting({ serviceId, environment, flagKey, action: 'toggle', body: { enabled: wantedLast }, ...(version === undefined ? {} : { baseVersion: version }) })}
        >
          Request approval to {wantedLast ? 'enable' : 'disable'}
        </button>
      )}
      <ChangeRequestDialog projectId={projectId} change={requesting} onClose={() => setRequesting(undefined)} />
      {environment === 'production' && (
        // Escape or Cancel closes it and changes nothing.
        <dialog ref={confirmation} className="fl-toggle-dialog" aria-labelledby={confirmationTitleId}>
          <form onSubmit={confirm}>
            <h2 id={confirmationTitleId}>
              Turn {flagKey} {shown ? 'off' : 'on'} in <EnvironmentBadge environment="production" />?
            </h2>
            <p>Production serves real users: the change applies at once.</p>
            <label>
              <span>Reason (optional, kept in the audit log)</span>
              <input ref={reasonInput} name="reason" maxLength={500} autoComplete="off" />
            </label>
            <div className="actions">
              <button type="submit" className="primary">
                Turn {shown ? 'off' : 'on'} in production
              </button>
              <button type="button" onClick={() => confirmation.current?.close()}>
                Cancel
              </button>
            </div>
          </form>
        </dialog>
      )}
    </span>
  );
}

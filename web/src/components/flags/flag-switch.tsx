import { useEffect, useId, useState } from 'react';
import { api, call } from '../../api/client';
import type { NewChange } from '../change-requests/model';
import { ChangeRequestDialog, needsApproval } from '../change-requests/request-dialog';
import { useAction } from '../forms';
import { NEEDS, useProjectAccess } from '../settings/access';
import { activation } from '../../telemetry';
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
 * tooltip and description, rather than failing with "Forbidden" once pressed.
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

  // A reload of the flag (another change) is the truth again.
  useEffect(() => setShown(enabled), [enabled]);

  async function toggle() {
    if (busy) return;
    const wanted = !shown;
    setShown(wanted);
    setWantedLast(wanted);
    const ok = await action.run('toggle', async () => {
      const flag = await call(
        api.POST('/api/flags/{key}/toggle', {
          params: { path: { key: flagKey }, query: { serviceId, environment } },
          body: { enabled: wanted },
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
        onClick={() => void toggle()}
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
    </span>
  );
}

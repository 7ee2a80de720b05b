import { useState } from 'react';
import { api, ApiError, call } from '../../api/client';
import { useFlagWatch } from '../../api/resources';
import type { Environment } from './model';

/** Watch a flag (changes by others then appear in the user's notifications): a pressed/unpressed button. */
export function WatchButton({ flagKey, serviceId, environment }: { flagKey: string; serviceId: string; environment: Environment }) {
  const status = useFlagWatch(flagKey, serviceId, environment);
  const [override, setOverride] = useState<boolean | undefined>();
  const [busy, setBusy] = useState(false);
  const [problem, setProblem] = useState<string | undefined>();
  const watching = override ?? status.data?.watching ?? false;

  async function flip() {
    if (busy) return;
    const wanted = !watching;
    setBusy(true);
    setOverride(wanted);
    setProblem(undefined);
    try {
      const answer = wanted
        ? await call(api.POST('/api/flags/{key}/watch', { params: { path: { key: flagKey } }, body: { serviceId, environment } }))
        : await call(api.DELETE('/api/flags/{key}/watch', { params: { path: { key: flagKey }, query: { serviceId, environment } } }));
      setOverride(answer.watching);
    } catch (error) {
      setOverride(!wanted);
      setProblem(error instanceof ApiError ? error.message : String(error));
    } finally {
      setBusy(false);
    }
  }

  return (
    <span className="fl-watch">
      <button type="button" aria-label="Watch this flag" aria-pressed={watching} disabled={status.loading} aria-busy={busy || undefined} onClick={() => void flip()}>
        {watching ? '✓ Watching' : 'Watch'}
      </button>
      {problem && (
        <span role="alert" className="field-error">
          {problem}
        </span>
      )}
    </span>
  );
}

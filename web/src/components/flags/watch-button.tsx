import { useState } from 'react';
import { api, call } from '../../api/client';
import { useFlagWatch } from '../../api/resources';
import { useAction } from '../forms';
import type { Environment } from './model';

/** Watch a flag (changes by others then appear in the user's notifications): a pressed/unpressed button. */
export function WatchButton({ flagKey, serviceId, environment }: { flagKey: string; serviceId: string; environment: Environment }) {
  const status = useFlagWatch(flagKey, serviceId, environment);
  const [override, setOverride] = useState<boolean | undefined>();
  const action = useAction();
  const busy = action.running !== undefined;
  const watching = override ?? status.data?.watching ?? false;

  async function flip() {
    if (busy) return;
    const wanted = !watching;
    setOverride(wanted);
    const ok = await action.run('watch', async () => {
      const answer = wanted
        ? await call(api.POST('/api/flags/{key}/watch', { params: { path: { key: flagKey } }, body: { serviceId, environment } }))
        : await call(api.DELETE('/api/flags/{key}/watch', { params: { path: { key: flagKey }, query: { serviceId, environment } } }));
      setOverride(answer.watching);
    });
    if (!ok) setOverride(!wanted);
  }

  return (
    <span className="fl-watch">
      <button type="button" aria-label="Watch this flag" aria-pressed={watching} disabled={status.loading} aria-busy={busy || undefined} onClick={() => void flip()}>
        {watching ? '✓ Watching' : 'Watch'}
      </button>
      {action.error && (
        <span role="alert" className="field-error">
          {action.error.message}
        </span>
      )}
    </span>
  );
}

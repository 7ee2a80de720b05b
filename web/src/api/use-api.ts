import { useCallback, useEffect, useState } from 'react';
import { ApiError } from './client';

/**
 * Loads a page's data with `load` (a call(api.GET(...))) when `key` changes; `reload` after a
 * mutation. The previous data stays shown while reloading (no layout shift).
 */
export function useApi<T>(load: () => Promise<T>, key: readonly unknown[]) {
  const [data, setData] = useState<T | undefined>();
  const [error, setError] = useState<ApiError | undefined>();
  const [loading, setLoading] = useState(true);
  // `key` names what `load` depends on (like a hook dependency list).
  const run = useCallback(load, key);

  const reload = useCallback(async () => {
    setLoading(true);
    try {
      setData(await run());
      setError(undefined);
    } catch (caught) {
      setError(caught instanceof ApiError ? caught : new ApiError(0, 'Error', String(caught)));
    } finally {
      setLoading(false);
    }
  }, [run]);

  useEffect(() => {
    void reload();
  }, [reload]);

  return { data, error, loading: loading && data === undefined, reload };
}

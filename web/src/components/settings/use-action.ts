import { useCallback, useState } from 'react';
import { ApiError } from '../../api/client';

/**
 * A button's API call (revoke, delete, send test): which one is running, so that button is
 * disabled at once, and the last failure as the server worded it (a 403 included).
 */
export function useAction() {
  const [running, setRunning] = useState<string | undefined>();
  const [error, setError] = useState<ApiError | undefined>();
  const run = useCallback(async (id: string, action: () => Promise<unknown>): Promise<boolean> => {
    setRunning(id);
    setError(undefined);
    try {
      await action();
      return true;
    } catch (caught) {
      setError(caught instanceof ApiError ? caught : new ApiError(0, 'Error', caught instanceof Error ? caught.message : String(caught)));
      return false;
    } finally {
      setRunning(undefined);
    }
  }, []);
  return { running, error, run, clearError: () => setError(undefined) };
}

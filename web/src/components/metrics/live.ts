import { useEffect } from 'react';

/**
 * Calls `refresh` every `everyMs` while `on` and the tab is visible (a hidden tab polls nothing),
 * and once when the tab comes back.
 */
export function useLiveRefresh(refresh: () => unknown, everyMs: number, on: boolean): void {
  useEffect(() => {
    if (!on) return;
    const tick = () => {
      if (document.visibilityState === 'visible') void refresh();
    };
    const timer = setInterval(tick, everyMs);
    document.addEventListener('visibilitychange', tick);
    return () => {
      clearInterval(timer);
      document.removeEventListener('visibilitychange', tick);
    };
  }, [refresh, everyMs, on]);
}

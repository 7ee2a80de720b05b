import { useEffect, useRef } from 'react';

/**
 * Calls `tick` every `intervalMs` while `enabled`, one call at a time (the next waits for the
 * previous to finish), and not while the tab is hidden: a page left open polls nobody's server.
 */
export function usePoll(tick: () => Promise<unknown>, intervalMs: number, enabled: boolean): void {
  const latest = useRef(tick);
  latest.current = tick;
  useEffect(() => {
    if (!enabled) return;
    let timer: ReturnType<typeof setTimeout> | undefined;
    let stopped = false;
    const schedule = () => {
      timer = setTimeout(() => {
        if (document.hidden) return schedule();
        void latest.current().finally(() => {
          if (!stopped) schedule();
        });
      }, intervalMs);
    };
    schedule();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, [intervalMs, enabled]);
}

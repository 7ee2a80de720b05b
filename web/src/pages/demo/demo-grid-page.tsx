/**
 * The public demo (docs/api-reference.md#demo-service): anyone, signed in or not, sees the 64x64
 * grid of the demo service's `px-N` flags live, and toggles a pixel through the unauthenticated
 * demo write (PATCH /api/flags/bulk?summary=true), which takes one write per IP address every 2 s.
 * The toggle shows at once (optimistic) and is put back when the server refuses it; a cooldown bar
 * shows when the next change is possible, and a click during it says so instead of sending.
 */
import { useEffect, useMemo, useRef, useState } from 'react';
import { api, ApiError, asApiError, call } from '../../api/client';
import { useDemo } from '../../api/resources';
import { LoadState } from '../../components/status';
import { GridStore } from '../../components/demo/grid-store';
import { PixelGrid } from '../../components/demo/pixel-grid';
import type { Environment } from '../../api/environments';
import { useDemoSync, type LiveState } from './demo-sync';

/**
 * One demo write per IP per 2 seconds (docs/api-reference.md#demo-service,
 * api/features/demo/throttle.ts).
 */
const WRITE_INTERVAL_MS = 2_000;
const PREFERRED_ENVIRONMENT: Environment = 'production';

export default function DemoGridPage() {
  const demo = useDemo();
  const service = demo.data?.services[0];
  const environments = service?.environments ?? [];
  const [chosen, setChosen] = useState<Environment | undefined>();
  const environment = chosen ?? (environments.includes(PREFERRED_ENVIRONMENT) ? PREFERRED_ENVIRONMENT : environments[0]);

  return (
    <section className="demo-page">
      <h1>Live demo grid</h1>
      <p>
        Each pixel is a public feature flag of the demo service, <code>px-0</code> to <code>px-4095</code>. Click one (or move with the arrow keys
        and press Enter) to toggle its flag for everyone watching: the change reaches every open grid over the flag stream. Anyone may play,
        one change every 2 seconds.
      </p>
      <LoadState loading={demo.loading} error={demo.error}>
        {!service || !environment ? (
          <p role="status">There is no demo service on this server.</p>
        ) : (
          <>
            <div className="demo-toolbar">
              <label>
                <span>Environment</span>
                <select value={environment} onChange={(e) => setChosen(e.target.value as Environment)}>
                  {environments.map((env) => (
                    <option key={env} value={env}>
                      {env}
                    </option>
                  ))}
                </select>
              </label>
            </div>
            <DemoGrid key={`${service.serviceId}/${environment}`} serviceId={service.serviceId} environment={environment} />
          </>
        )}
      </LoadState>
    </section>
  );
}

type Feedback = { tone: 'info' | 'error'; text: string };

function DemoGrid({ serviceId, environment }: { serviceId: string; environment: Environment }) {
  const store = useMemo(() => new GridStore(), []);
  const { live, loadError } = useDemoSync(store, serviceId, environment);
  const loaded = useLoaded(store);
  const [feedback, setFeedback] = useState<Feedback | undefined>();
  const cooldown = useCooldown();

  async function toggle(index: number) {
    const wait = cooldown.remaining();
    if (wait > 0) {
      setFeedback({ tone: 'info', text: `Wait ${(wait / 1000).toFixed(1)} s: the demo takes one change every 2 seconds per visitor.` });
      return;
    }
    const enabled = !store.isOn(index);
    store.setOptimistic(index, enabled);
    cooldown.start();
    setFeedback(undefined);
    try {
      await call(
        api.PATCH('/api/flags/bulk', {
          params: { query: { summary: 'true' } },
          body: { flags: [{ key: `px-${index}`, serviceId, environment, updates: { enabled } }] },
        }),
      );
      store.settle(index, true);
      setFeedback({ tone: 'info', text: `Pixel ${index} turned ${enabled ? 'on' : 'off'}.` });
    } catch (error) {
      store.settle(index, false);
      if (error instanceof ApiError && error.status === 429) {
        // Another tab or someone behind the same address wrote first: the server's 2 s start now.
        cooldown.start();
        setFeedback({ tone: 'error', text: `Too quick: someone at your address changed a pixel in the last 2 seconds. Pixel ${index} is unchanged; try again in a moment.` });
      } else {
        setFeedback({ tone: 'error', text: `Pixel ${index} could not be changed: ${asApiError(error).message}` });
      }
    }
  }

  return (
    <>
      <div className="demo-status">
        <LiveBadge live={live} />
        <div className="demo-cooldown">
          <span>{cooldown.active ? 'Wait: one change every 2 seconds' : 'Ready: click a pixel'}</span>
          <div className="demo-cooldown-track" aria-hidden="true">
            {cooldown.active && <div key={cooldown.round} className="demo-cooldown-bar" />}
          </div>
        </div>
      </div>
      <p role="status" className={`demo-feedback${feedback?.tone === 'error' ? ' demo-feedback-error' : ''}`}>
        {feedback?.text}
      </p>
      {loadError && (
        <p role="alert" className="form-error">
          The grid could not be loaded: {loadError.message}
        </p>
      )}
      <div className="demo-frame" aria-busy={!loaded}>
        <PixelGrid store={store} label={`Demo pixels (${environment}), 64 by 64`} onToggle={(index) => void toggle(index)} />
      </div>
      <p className="muted">Keyboard: the grid is one stop in the tab order. Arrow keys move, Home and End go to the row's ends, Page Up and Page Down move 8 rows, Enter or Space toggles.</p>
    </>
  );
}

function LiveBadge({ live }: { live: LiveState }) {
  const text = live === 'live' ? 'Live' : live === 'connecting' ? 'Connecting…' : 'Reconnecting…';
  return (
    <span role="status" className={`demo-live demo-live-${live}`}>
      {text}
    </span>
  );
}

/** Whether the first list read has filled the grid (cells show "off" until then). */
function useLoaded(store: GridStore): boolean {
  const [loaded, setLoaded] = useState(store.isLoaded);
  useEffect(() => store.subscribeLoaded(() => setLoaded(true)), [store]);
  return loaded;
}

/** The client's view of the 2 s write interval: started on each write (and on a 429). */
function useCooldown() {
  const until = useRef(0);
  const [round, setRound] = useState(0);
  const [active, setActive] = useState(false);
  useEffect(() => {
    if (!active) return;
    const timer = setTimeout(() => setActive(false), Math.max(0, until.current - performance.now()));
    return () => clearTimeout(timer);
  }, [active, round]);
  return {
    active,
    round,
    remaining: () => Math.max(0, until.current - performance.now()),
    start() {
      until.current = performance.now() + WRITE_INTERVAL_MS;
      setActive(true);
      setRound((r) => r + 1);
    },
  };
}

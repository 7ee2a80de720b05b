/**
 * The global flag search in the header (docs/api-reference.md#global-flag-search): "/" or
 * Ctrl+K (Cmd+K) opens it from any page, typing lists flags of every project the user can read,
 * arrows move through them and Enter opens the flag in production (where an on-call engineer
 * acts), or its first environment. Each environment's state chip links to the flag there.
 * A combobox with a listbox (WAI-ARIA combobox pattern).
 */
import { useCallback, useEffect, useId, useRef, useState, type KeyboardEvent } from 'react';
import { Link, useLocation } from 'wouter';
import type { paths } from '../../api/client';
import { useFlagSearch } from '../../api/resources';
import { flagHref } from '../../links';
import { useDebounced } from '../use-debounced';
import './flag-search.css';

type Result = paths['/api/search/flags']['get']['responses'][200]['content']['application/json']['results'][number];

const LIMIT = 20;
const TYPING_PAUSE_MS = 150;

/** The page Enter opens: production when the flag is there, else its first environment. */
function preferredHref(result: Result): string {
  const target = result.environments.find((e) => e.environment === 'production') ?? result.environments[0];
  return flagHref(result.projectId, result.key, result.serviceId, target.environment);
}

/** Typing in a field keeps its "/" and Ctrl+K: the shortcut is for the page, not for forms. */
function typingIn(target: EventTarget | null): boolean {
  if (!(target instanceof HTMLElement)) return false;
  return target.isContentEditable || ['INPUT', 'TEXTAREA', 'SELECT'].includes(target.tagName);
}

export function FlagSearch() {
  const [open, setOpen] = useState(false);
  const trigger = useRef<HTMLButtonElement>(null);

  useEffect(() => {
    function onKeyDown(event: globalThis.KeyboardEvent) {
      const slash = event.key === '/' && !event.ctrlKey && !event.metaKey && !event.altKey;
      const commandK = event.key.toLowerCase() === 'k' && (event.ctrlKey || event.metaKey) && !event.altKey;
      if (!(slash || commandK) || typingIn(event.target)) return;
      event.preventDefault();
      setOpen(true);
    }
    document.addEventListener('keydown', onKeyDown);
    return () => document.removeEventListener('keydown', onKeyDown);
  }, []);

  const close = useCallback((returnFocus: boolean) => {
    setOpen(false);
    if (returnFocus) trigger.current?.focus();
  }, []);

  return (
    <>
      <button type="button" ref={trigger} className="fs-trigger" aria-haspopup="dialog" aria-expanded={open} aria-keyshortcuts="/ Control+K Meta+K" onClick={() => setOpen(!open)}>
        Search flags <kbd>/</kbd>
      </button>
      {open && <SearchPopup onClose={close} />}
    </>
  );
}

function SearchPopup({ onClose }: { onClose: (returnFocus: boolean) => void }) {
  const [, navigate] = useLocation();
  const [text, setText] = useState('');
  const q = useDebounced(text.trim(), TYPING_PAUSE_MS);
  const search = useFlagSearch(q, LIMIT);
  const results = q && text.trim() ? (search.data?.results ?? []) : [];
  const [active, setActive] = useState(0);
  const popup = useRef<HTMLDivElement>(null);
  const input = useRef<HTMLInputElement>(null);
  const id = useId();
  const listboxId = `${id}-results`;
  const optionId = (index: number) => `${id}-option-${index}`;

  useEffect(() => input.current?.focus(), []);
  useEffect(() => setActive(0), [search.data]);

  // A click anywhere else closes it, leaving focus where the click put it.
  useEffect(() => {
    function onPointerDown(event: PointerEvent) {
      if (!popup.current?.contains(event.target as Node)) onClose(false);
    }
    document.addEventListener('pointerdown', onPointerDown);
    return () => document.removeEventListener('pointerdown', onPointerDown);
  }, [onClose]);

  function open(href: string) {
    onClose(false);
    navigate(href);
  }

  function onKeyDown(event: KeyboardEvent<HTMLInputElement>) {
    if (event.key === 'Escape') {
      event.preventDefault();
      onClose(true);
    } else if (event.key === 'ArrowDown' || event.key === 'ArrowUp') {
      event.preventDefault();
      if (!results.length) return;
      const step = event.key === 'ArrowDown' ? 1 : -1;
      setActive((current) => (current + step + results.length) % results.length);
    } else if (event.key === 'Enter' && results[active]) {
      event.preventDefault();
      open(preferredHref(results[active]));
    }
  }

  useEffect(() => {
    document.getElementById(optionId(active))?.scrollIntoView({ block: 'nearest' });
  });

  const status = !q ? 'Type part of a flag key or name.' : search.loading ? 'Searching…' : search.error ? search.error.message : results.length ? `${results.length} ${results.length === 1 ? 'flag' : 'flags'} found; Enter opens production.` : 'No flag matches.';

  return (
    <div className="fs-popup" role="dialog" aria-label="Search flags" ref={popup}>
      <input
        ref={input}
        type="search"
        role="combobox"
        aria-label="Search flags in all projects"
        aria-expanded={results.length > 0}
        aria-controls={listboxId}
        aria-autocomplete="list"
        aria-activedescendant={results[active] ? optionId(active) : undefined}
        placeholder="Flag key or name"
        maxLength={100}
        autoComplete="off"
        spellCheck={false}
        value={text}
        onChange={(e) => setText(e.target.value)}
        onKeyDown={onKeyDown}
      />
      <p role="status" className="fs-status muted">
        {status}
      </p>
      <ul id={listboxId} role="listbox" aria-label="Flags found" className="fs-results">
        {results.map((result, index) => (
          <li
            key={`${result.serviceId}/${result.key}`}
            id={optionId(index)}
            role="option"
            aria-selected={index === active}
            className="fs-option"
            onPointerMove={() => setActive(index)}
            onClick={(e) => {
              // The chips are links of their own; a click elsewhere on the row opens the preferred page.
              if (!(e.target as HTMLElement).closest('a')) open(preferredHref(result));
            }}
          >
            <span className="fs-where muted">
              {result.projectName} / {result.serviceName}
            </span>
            <span className="fs-key">
              <code>{result.key}</code>
              {result.name !== result.key && <span className="muted"> {result.name}</span>}
            </span>
            <span className="fs-chips">
              {result.environments.map((env) => (
                <Link
                  key={env.environment}
                  href={flagHref(result.projectId, result.key, result.serviceId, env.environment)}
                  tabIndex={-1}
                  className={`fs-chip ${env.enabled ? 'fs-on' : 'fs-off'}${env.environment === 'production' ? ' fs-production' : ''}`}
                  aria-label={`${result.key} in ${env.environment}: ${env.enabled ? 'On' : 'Off'}`}
                  onClick={() => onClose(false)}
                >
                  {env.environment} {env.enabled ? 'On' : 'Off'}
                </Link>
              ))}
            </span>
          </li>
        ))}
      </ul>
    </div>
  );
}

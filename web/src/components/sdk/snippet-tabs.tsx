import { useId, useState, type KeyboardEvent } from 'react';
import { CopyButton } from './copy-button';
import { flagdSnippet, LANGUAGES, ofrepSnippet, type Language, type Snippet, type SnippetValues } from './snippets';

/** One tab per language (WAI-ARIA tabs: arrow keys move between them), each with its OFREP and flagd snippets. */
export function SnippetTabs({ values }: { values: SnippetValues }) {
  const [language, setLanguage] = useState<Language>('node');
  const id = useId();
  const tabId = (l: Language) => `${id}-tab-${l}`;

  function onKeyDown(event: KeyboardEvent<HTMLButtonElement>) {
    const step = event.key === 'ArrowRight' ? 1 : event.key === 'ArrowLeft' ? -1 : 0;
    if (!step) return;
    const index = LANGUAGES.findIndex((l) => l.id === language);
    const next = LANGUAGES[(index + step + LANGUAGES.length) % LANGUAGES.length].id;
    setLanguage(next);
    document.getElementById(tabId(next))?.focus();
  }

  const flagd = flagdSnippet(language, values);
  return (
    <>
      <div role="tablist" aria-label="Language" className="st-tabs">
        {LANGUAGES.map((l) => (
          <button
            key={l.id}
            id={tabId(l.id)}
            type="button"
            role="tab"
            aria-selected={l.id === language}
            aria-controls={`${id}-panel`}
            tabIndex={l.id === language ? 0 : -1}
            className={l.id === language ? 'primary' : undefined}
            onClick={() => setLanguage(l.id)}
            onKeyDown={onKeyDown}
          >
            {l.label}
          </button>
        ))}
      </div>
      <div role="tabpanel" id={`${id}-panel`} aria-labelledby={tabId(language)}>
        <SnippetBlock title="OpenFeature with the OFREP provider (remote evaluation)" snippet={ofrepSnippet(language, values)} name={`ofrep-${language}`} />
        {flagd ? (
          <SnippetBlock title="OpenFeature with the flagd provider (in-process evaluation)" snippet={flagd} name={`flagd-${language}`} />
        ) : (
          <p className="hint">
            {values.flagd ? 'The flagd providers run on servers (gRPC): in the browser, use OFREP.' : "This deployment does not serve flagd's protocols (FLAGD_ENABLED=false)."}
          </p>
        )}
      </div>
    </>
  );
}

function SnippetBlock({ title, snippet, name }: { title: string; snippet: Snippet; name: string }) {
  return (
    <section aria-label={title}>
      <h3>{title}</h3>
      <p>
        Install: <code>{snippet.install}</code>
      </p>
      {/* Focusable: a scrolling region must be reachable by keyboard. */}
      <pre tabIndex={0} data-snippet={name} aria-label={`${title}: code`}>
        <code>{snippet.code}</code>
      </pre>
      <CopyButton value={snippet.code} label={`Copy the ${title} code`} />
    </section>
  );
}

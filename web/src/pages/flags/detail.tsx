import { useEffect, useState } from 'react';
import { Link, useLocation, useParams, useSearch } from 'wouter';
import { api, call } from '../../api/client';
import { useFlagEnvironments, useFlags, useService, useServices } from '../../api/resources';
import { CopyRules } from '../../components/flags/copy-rules';
import { EnvironmentBadge, matchingRules, rememberEnvironment, rememberedEnvironment, ruleCount, sameServing, servesBeyondDefault } from '../../components/flags/environments';
import { FlagEditor } from '../../components/flags/flag-editor';
import { FlagSwitch } from '../../components/flags/flag-switch';
import { InProcessBadge } from '../../components/flags/in-process-badge';
import { ENVIRONMENTS, flagHref, isEnvironment, showValue, type Environment, type FlagRecord, type Operator } from '../../components/flags/model';
import { WatchButton } from '../../components/flags/watch-button';
import { RefusedButton, SelectField, useAction } from '../../components/forms';
import { NEEDS, useProjectAccess } from '../../components/settings/access';
import { LoadState } from '../../components/status';
import { useTitle } from '../../page-title';
import { flagReleaseHref, flagTriggersHref } from '../../links';
import { activation, flagViewed } from '../../telemetry';

/**
 * One flag: a flag is a record per (service, environment, key), so the page names the service
 * in its address and shows the three environments as tabs, each its own record (created from
 * another environment's copy when missing). The header toggles and watches; the body edits.
 * Without an environment in the address it opens the one last chosen in the project.
 */
export default function FlagDetail() {
  const { projectId, flagKey } = useParams<{ projectId: string; flagKey: string }>();
  const query = new URLSearchParams(useSearch());
  const serviceId = query.get('serviceId') ?? '';
  const chosen = query.get('environment');
  const environment: Environment = isEnvironment(chosen) ? chosen : rememberedEnvironment(projectId);

  useEffect(() => flagViewed(projectId, flagKey), [projectId, flagKey]);
  useEffect(() => {
    if (isEnvironment(chosen)) rememberEnvironment(projectId, chosen);
  }, [projectId, chosen]);
  useTitle(`${flagKey} · Flag`);

  if (!serviceId) return <ChooseService projectId={projectId} flagKey={flagKey} environment={environment} />;
  return <FlagInService projectId={projectId} flagKey={flagKey} serviceId={serviceId} environment={environment} />;
}

function FlagInService({ projectId, flagKey, serviceId, environment }: { projectId: string; flagKey: string; serviceId: string; environment: Environment }) {
  const records = useFlagEnvironments(flagKey, serviceId);
  const createdEverywhere = new URLSearchParams(useSearch()).get('created') === 'all';
  // The record shown; replaced by what a toggle or save answers, so the next write sends the new version.
  const [flag, setFlag] = useState<FlagRecord | null | undefined>();
  const [generation, setGeneration] = useState(0);
  // What was saved, in which environment: the message belongs to that tab only.
  const [saved, setSaved] = useState<{ environment: Environment; message: string } | undefined>();
  // Set when the user asked for the latest version: the editor starts again from it once loaded.
  const [resetOnLoad, setResetOnLoad] = useState(false);
  // Each answer (and each environment picked) replaces the record shown.
  const [shownFrom, setShownFrom] = useState<{ records: typeof records.data; environment: Environment }>();
  if (!shownFrom || shownFrom.records !== records.data || shownFrom.environment !== environment) {
    if (shownFrom && shownFrom.environment !== environment) setSaved(undefined);
    setShownFrom({ records: records.data, environment });
    setFlag(records.data?.[environment]);
    if (resetOnLoad) {
      setResetOnLoad(false);
      setGeneration((g) => g + 1);
    }
  }
  const service = useService(serviceId);

  const href = (env: Environment, page = '') => flagHref(projectId, flagKey, serviceId, env, page);
  return (
    <>
      <div className="fl-page-head">
        <h1>
          {flag?.name ?? flagKey} <code className="fl-flag-key">{flagKey}</code>
        </h1>
        {flag && (
          <div className="fl-flag-head-actions">
            <EnvironmentBadge environment={environment} />
            <FlagSwitch
              projectId={projectId}
              flagKey={flagKey}
              serviceId={serviceId}
              environment={environment}
              enabled={flag.enabled}
              version={flag.version}
              label={`Enabled in ${environment}`}
              onChanged={(toggled) => {
                setFlag(toggled);
                void records.reload();
              }}
            />
            <WatchButton flagKey={flagKey} serviceId={serviceId} environment={environment} />
          </div>
        )}
      </div>
      <p className="muted">
        Service {service.data?.name ?? serviceId} · <Link href={`/projects/${encodeURIComponent(projectId)}/flags?serviceId=${encodeURIComponent(serviceId)}&environment=${environment}`}>All flags</Link>
      </p>
      {createdEverywhere && (
        <p role="note" className="fl-note">
          Created in development, staging and production: each environment is its own record with its own rules and on/off state (staging and production
          start off). Rules saved here apply to {environment} only; copy them to the others from this page.
        </p>
      )}
      <nav aria-label="Environments" className="fl-env-tabs">
        <ul>
          {ENVIRONMENTS.map((env) => {
            const record = records.data?.[env];
            const shown = records.data?.[environment];
            return (
              <li key={env}>
                <Link href={href(env)} aria-current={env === environment ? 'page' : undefined}>
                  <EnvironmentBadge environment={env} />
                  {env === environment && <span className="visually-hidden"> (editing)</span>}
                  <span className="muted fl-env-state fl-env-summary">
                    {records.data
                      ? record
                        ? `${record.enabled ? 'on' : 'off'} · ${ruleCount(record)}${env === environment || !shown ? '' : sameServing(record, shown) ? ' · same as ' + environment : ' · differs from ' + environment}`
                        : 'not created'
                      : ''}
                  </span>
                </Link>
              </li>
            );
          })}
        </ul>
      </nav>
      {records.data && flag && <DefaultOnlyWarnings records={records.data} shown={flag} onCopied={() => void records.reload()} />}
      <LoadState loading={records.loading} error={records.error}>
        {flag ? (
          <>
            <nav aria-label="More about this flag" className="fl-flag-links">
              <Link href={href(environment, '/history')}>History and audit</Link>
              <Link href={href(environment, '/explain')}>Explain a context</Link>
              <Link href={href(environment, '/metrics')}>Metrics</Link>
              <Link href={flagReleaseHref(projectId, flagKey, serviceId, environment)}>Release safety</Link>
              <Link href={flagTriggersHref(projectId, flagKey, serviceId)}>Triggers</Link>
            </nav>
            <p className="muted">
              Version {flag.version} · type {flag.type} · updated <time dateTime={flag.updatedAt}>{new Date(flag.updatedAt).toLocaleString()}</time>
            </p>
            <InProcessBadge flag={flag} />
            <p className="fl-editing">
              Editing the rules of <EnvironmentBadge environment={environment} />: other environments keep their own.
            </p>
            <div className="fl-actions">
              {ENVIRONMENTS.flatMap((env) => {
                const target = records.data?.[env];
                return env === environment || !target ? [] : [<CopyRules key={`${env}:${flag.version}>${target.version}`} source={flag} target={target} shownEnvironment={environment} onCopied={() => void records.reload()} />];
              })}
            </div>
            <p role="status" className="fl-saved">
              {saved?.environment === environment ? saved.message : undefined}
            </p>
            <FlagEditor
              key={`${flag.id}:${generation}`}
              flag={flag}
              onSaved={(record) => {
                setFlag(record);
                setGeneration((g) => g + 1);
                setSaved({ environment: record.environment, message: `Saved: version ${record.version}. Applies to ${record.environment} only.` });
                void records.reload();
              }}
              onReload={() => {
                setSaved(undefined);
                setResetOnLoad(true);
                void records.reload();
              }}
            />
          </>
        ) : (
          records.data && (
            <CreateInEnvironment
              projectId={projectId}
              environment={environment}
              sources={ENVIRONMENTS.flatMap((env) => (records.data![env] ? [records.data![env]!] : []))}
              onCreated={() => void records.reload()}
            />
          )
        )}
      </LoadState>
    </>
  );
}

/**
 * An environment that is on while nothing in it serves anything but the default value to everyone
 * (no rule that can match, no weighted variant), though another environment has rules: most often the
 * rules were saved in development only. Says where the rules are, with the copy right there.
 */
function DefaultOnlyWarnings({ records, shown, onCopied }: { records: Record<Environment, FlagRecord | null>; shown: FlagRecord; onCopied: () => void }) {
  // The shown record may be newer than the loaded ones (a toggle or save answered).
  const current = (env: Environment) => (env === shown.environment ? shown : records[env]);
  const withRules = ENVIRONMENTS.map(current).filter((record): record is FlagRecord => !!record && servesBeyondDefault(record));
  const idle = ENVIRONMENTS.map(current).filter((record): record is FlagRecord => !!record && record.enabled && !servesBeyondDefault(record));
  if (!withRules.length || !idle.length) return null;
  return (
    <>
      {idle.map((target) => {
        // Prefer the environment being looked at as the source, else the first with rules.
        const source = withRules.find((r) => r.environment === shown.environment) ?? withRules[0];
        return (
          <div key={target.environment} role="alert" className="fl-env-warning">
            <p>
              <EnvironmentBadge environment={target.environment} /> is on but serves the default value {showValue(target.defaultValue)} to everyone (
              {matchingRules(target).length ? 'its rules cannot serve anything else' : 'it has no rules'}). The rules are in{' '}
              {withRules.map((r) => `${r.environment} (${ruleCount(r)})`).join(', ')}.
            </p>
            <CopyRules
              key={`${source.environment}:${source.version}>${target.version}`}
              source={source}
              target={target}
              shownEnvironment={shown.environment}
              onCopied={onCopied}
            />
          </div>
        );
      })}
    </>
  );
}

/** The flag does not exist in this environment: create it there as a copy of another environment's, disabled. */
function CreateInEnvironment({
  projectId,
  environment,
  sources,
  onCreated,
}: {
  projectId: string;
  environment: Environment;
  sources: FlagRecord[];
  onCreated: () => void;
}) {
  const [from, setFrom] = useState(sources[0]?.environment);
  const action = useAction();
  const busy = action.running !== undefined;
  const canCreate = useProjectAccess(projectId).can('flags:write');
  if (!sources.length) return <p role="alert">This flag does not exist in any environment of this service.</p>;
  async function create() {
    const source = sources.find((s) => s.environment === from);
    if (!source || busy) return;
    await action.run('create', async () => {
      await call(
        api.POST('/api/flags', {
          body: {
            key: source.key,
            serviceId: source.serviceId,
            projectId,
            environment,
            name: source.name,
            description: source.description,
            type: source.type,
            defaultValue: source.defaultValue,
            tags: source.tags,
            variants: source.variants.map((v) => ({ ...v, value: v.value })),
            // Stored operators are the engine's (the record's schema types them as plain strings).
            targeting: source.targeting.map((r) => ({ ...r, value: r.value, conditions: r.conditions.map((c) => ({ ...c, operator: c.operator as Operator })) })),
            isPublic: source.isPublic,
            // A copy starts off: turning it on in another environment is its own decision.
            enabled: false,
          },
        }),
      );
      activation(projectId, 'flag_created');
      onCreated();
    });
  }
  return (
    <section aria-labelledby="missing" className="inline-form">
      <h2 id="missing">Not created in {environment}</h2>
      <p>Each environment has its own record of the flag. Create this one as a copy (disabled) of another environment's.</p>
      <SelectField label="Copy from" name="environment" value={from} onChange={(e) => setFrom(e.target.value as Environment)}>
        {sources.map((s) => (
          <option key={s.environment} value={s.environment}>
            {s.environment}
          </option>
        ))}
      </SelectField>
      <div role="alert">{action.error && <p className="form-error">{action.error.message}</p>}</div>
      {canCreate ? (
        <button type="button" className="primary" disabled={busy} onClick={() => void create()}>
          {busy ? 'Creating…' : `Create in ${environment}`}
        </button>
      ) : (
        <RefusedButton className="primary" reason={NEEDS['flags:create']}>
          Create in {environment}
        </RefusedButton>
      )}
    </section>
  );
}

/** The address names no service: the flag key may exist in several services of the project. */
function ChooseService({ projectId, flagKey, environment }: { projectId: string; flagKey: string; environment: Environment }) {
  const [, navigate] = useLocation();
  const found = useFlags({ projectId, environment, search: flagKey, limit: 100, fields: 'key,serviceId' });
  const matches = { ...found, data: found.data?.flags.filter((f) => f.key === flagKey) };
  const services = useServices(projectId);
  const only = matches.data?.length === 1 ? matches.data[0].serviceId : undefined;
  useEffect(() => {
    if (only) navigate(flagHref(projectId, flagKey, only, environment), { replace: true });
  }, [only, projectId, flagKey, environment, navigate]);
  return (
    <>
      <h1>
        <code>{flagKey}</code>
      </h1>
      <LoadState loading={matches.loading} error={matches.error}>
        {matches.data?.length === 0 ? (
          <p>No flag with this key in {environment}.</p>
        ) : (
          <>
            <p>This key exists in several services: choose one.</p>
            <ul>
              {matches.data?.map((f) => (
                <li key={f.serviceId}>
                  <Link href={flagHref(projectId, flagKey, f.serviceId!, environment)}>{services.data?.services.find((s) => s.id === f.serviceId)?.name ?? f.serviceId}</Link>
                </li>
              ))}
            </ul>
          </>
        )}
      </LoadState>
    </>
  );
}

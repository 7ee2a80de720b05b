/**
 * One change of a request: what it does, how many recent contexts it would serve another value,
 * and its field-level diff (the history pages' DiffView) against the flag as the author saw it:
 * the version the change was made against, or the current one when that version is no longer in
 * the recent history.
 */
import { useId } from 'react';
import { useFlagHistory } from '../../api/resources';
import { diffJson } from '../history/diff';
import { DiffView } from '../history/diff-view';
import { contentOf, type FlagSnapshot } from '../history/flag-content';
import { describeChange, type Change, type ChangeRequest } from './model';

/** Versions looked through for the one a change was made against. */
const HISTORY_REACH = 50;

type Content = Record<string, unknown>;

/** The fields a change's body sets, as they would be stored. */
function diffOf(change: Change, base: FlagSnapshot | undefined) {
  const body = (change.body ?? {}) as Content;
  const before = base ? (contentOf(base) as Content) : undefined;
  switch (change.action) {
    case 'create': {
      // Identity fields are the request's own columns (flag, service, environment).
      // eslint-disable-next-line @typescript-eslint/no-unused-vars
      const { key, serviceId, projectId, environment, ...content } = body;
      return diffJson(undefined, content);
    }
    case 'delete':
      return diffJson(before, undefined);
    case 'toggle': {
      const was = before?.enabled;
      return diffJson({ enabled: was }, { enabled: typeof body.enabled === 'boolean' ? body.enabled : !was });
    }
    case 'update': {
      // `version` is the optimistic-concurrency check, not a field of the flag.
      // eslint-disable-next-line @typescript-eslint/no-unused-vars
      const { version, ...after } = body;
      return diffJson(Object.fromEntries(Object.keys(after).map((field) => [field, before?.[field]])), after);
    }
  }
}

export function ChangeView({ request, change }: { request: ChangeRequest; change: Change }) {
  const id = useId();
  const title = describeChange(change);
  const history = useFlagHistory(change.flagKey, { serviceId: change.serviceId, environment: change.environment, limit: HISTORY_REACH }, { enabled: change.action !== 'create' });
  const versions = history.data?.versions ?? [];
  const base = versions.find((v) => v.version === change.baseVersion) ?? versions[0];
  const impact = request.impact.find((i) => i.serviceId === change.serviceId && i.flagKey === change.flagKey && i.environment === change.environment);

  return (
    <section aria-labelledby={`${id}-heading`} className="cr-change">
      <h3 id={`${id}-heading`}>{title}</h3>
      {impact && (
        <p>
          Impact:{' '}
          {impact.evaluated === 0
            ? 'no recent contexts of this flag to replay.'
            : `${impact.changed} of ${impact.evaluated} recent contexts would get another value.`}
        </p>
      )}
      {history.error ? (
        <p role="alert" className="form-error">
          The flag&apos;s versions could not be loaded: {history.error.message}
        </p>
      ) : history.loading ? (
        <p role="status" className="muted">
          Loading…
        </p>
      ) : (
        <DiffView
          changes={diffOf(change, base?.snapshot)}
          caption={change.action === 'create' ? `${title}: the flag as created` : base ? `${title}, compared with version ${base.version}` : title}
        />
      )}
    </section>
  );
}

/**
 * Editing one flag record (one service and environment): general fields, targeting rules and
 * variants as drafts. "Review changes" checks the drafts, replays the candidate over recent
 * real contexts (the simulate endpoint) and shows who would change; only then can the user
 * save, which PATCHes the changed fields alone with the version they started from. A viewer
 * gets it read-only (disabled, the reason beside it): their save would only fail with "Forbidden".
 */
import { useEffect, useId, useMemo, useRef, useState, type FormEvent } from 'react';
import { api, call, type paths } from '../../api/client';
import { useCohorts } from '../../api/resources';
import { activation } from '../../telemetry';
import type { NewChange } from '../change-requests/model';
import { ChangeRequestDialog, needsApproval } from '../change-requests/request-dialog';
import { LabelledControl, useAction } from '../forms';
import { NEEDS, useProjectAccess } from '../settings/access';
import { ApiProblems } from './api-problems';
import { ValueInput } from './inputs';
import {
  formatValue,
  parseTags,
  parseValue,
  sameJson,
  targetingFromDrafts,
  toDraftRule,
  toDraftVariant,
  variantsFromDrafts,
  type DraftRule,
  type DraftVariant,
  type FlagRecord,
  type Simulation,
} from './model';
import { RuleEditor } from './rule-editor';
import { SimulationResult } from './simulation-result';
import { VariantsEditor } from './variants-editor';

type Patch = NonNullable<paths['/api/flags/{key}']['patch']['requestBody']>['content']['application/json'];
type Candidate = NonNullable<paths['/api/flags/{key}/simulate']['post']['requestBody']>['content']['application/json']['candidateFlag'];

/** Fields evaluation reads: only a change to one of them can change who gets what. */
const EVALUATED = ['enabled', 'defaultValue', 'variants', 'targeting'] as const;

interface Review {
  patch: Patch;
  simulation?: Simulation;
}

interface FlagEditorProps {
  flag: FlagRecord;
  onSaved: (flag: FlagRecord) => void;
  /** Load the flag as it is now (after a 409: someone else changed it), discarding the drafts. */
  onReload: () => void;
}

export function FlagEditor({ flag, onSaved, onReload }: FlagEditorProps) {
  const { projectId, type } = flag;
  const [name, setName] = useState(flag.name);
  const [description, setDescription] = useState(flag.description);
  const [tagsText, setTagsText] = useState(flag.tags.join(', '));
  const [defaultText, setDefaultText] = useState(formatValue(type, flag.defaultValue));
  const [rules, setRules] = useState<DraftRule[]>(() => flag.targeting.map((r) => toDraftRule(r, type)));
  const [variants, setVariants] = useState<DraftVariant[]>(() => flag.variants.map((v) => toDraftVariant(v, type)));
  const [showProblems, setShowProblems] = useState(false);
  const [review, setReview] = useState<Review | undefined>();
  const action = useAction();
  const busy = action.running;
  const error = action.error;
  const [notice, setNotice] = useState<string | undefined>();
  // The refused save, offered as a change request (the environment's policy wants approvals).
  const [requesting, setRequesting] = useState<NewChange | undefined>();

  const cohorts = useCohorts(projectId);
  const readOnly = !useProjectAccess(projectId).can('flags:write');
  const readOnlyId = useId();

  const targeting = targetingFromDrafts(rules, type);
  const variantResult = variantsFromDrafts(variants, type);
  const defaultValue = parseValue(type, defaultText);
  const ruleNumbers = useMemo(() => new Map(rules.flatMap((r, i) => (r.id ? [[r.id, i + 1] as const] : []))), [rules]);
  const reviewHeading = useRef<HTMLHeadingElement>(null);
  // The editor is locked during the review: keyboard and screen-reader users are taken to it.
  useEffect(() => {
    if (review) reviewHeading.current?.focus();
  }, [review]);

  /** The changed fields, or undefined (with the problems shown) when a draft is not valid yet. */
  function changedFields(): Patch | undefined {
    if (!targeting.ok || !variantResult.ok || !defaultValue.ok || !name.trim()) {
      setShowProblems(true);
      return undefined;
    }
    const patch: Patch = {};
    if (name.trim() !== flag.name) patch.name = name.trim();
    if (description !== flag.description) patch.description = description;
    const tags = parseTags(tagsText);
    if (!sameJson(tags, flag.tags)) patch.tags = tags;
    if (!sameJson(defaultValue.value, flag.defaultValue)) patch.defaultValue = defaultValue.value;
    if (!sameJson(targeting.value, flag.targeting)) patch.targeting = targeting.value as Patch['targeting'];
    if (!sameJson(variantResult.value, flag.variants)) patch.variants = variantResult.value as Patch['variants'];
    return patch;
  }

  async function reviewChanges(event: FormEvent) {
    event.preventDefault();
    if (busy) return;
    await action.run('simulate', async () => {
      setNotice(undefined);
      const patch = changedFields();
      if (!patch) return;
      if (Object.keys(patch).length === 0) {
        setNotice('Nothing changed.');
        return;
      }
      const candidate: Candidate = {};
      for (const field of EVALUATED) if (field in patch) Object.assign(candidate, { [field]: patch[field] });
      if (Object.keys(candidate).length === 0) {
        setReview({ patch });
        return;
      }
      const simulation = await call(
        api.POST('/api/flags/{key}/simulate', {
          params: { path: { key: flag.key } },
          body: { serviceId: flag.serviceId, environment: flag.environment, candidateFlag: candidate },
        }),
      );
      setReview({ patch, simulation });
    });
  }

  async function save() {
    if (!review || busy) return;
    await action.run('save', async () => {
      const saved = await call(
        api.PATCH('/api/flags/{key}', {
          params: { path: { key: flag.key }, query: { serviceId: flag.serviceId, environment: flag.environment } },
          body: { ...review.patch, version: flag.version },
        }),
      );
      activation(projectId, review.patch.targeting ? 'targeting_saved' : 'flag_saved');
      setReview(undefined);
      onSaved(saved);
    });
  }

  const problems = showProblems ? new Map([...targeting.problems.byKey, ...variantResult.byKey]) : new Map<string, string>();
  const editing = review === undefined;

  return (
    <>
      <form onSubmit={(e) => void reviewChanges(e)} noValidate className="fl-flag-editor">
        {readOnly && (
          <p id={readOnlyId} className="hint">
            {NEEDS['flags:change']}
          </p>
        )}
        <fieldset disabled={!editing || readOnly} aria-describedby={readOnly ? readOnlyId : undefined} className="fl-plain">
          <section aria-labelledby="general">
            <h2 id="general">General</h2>
            <LabelledControl label="Name" problem={showProblems && !name.trim() ? 'enter a name' : error?.fieldError('name')}>
              {(props) => <input value={name} maxLength={200} onChange={(e) => setName(e.target.value)} {...props} />}
            </LabelledControl>
            <LabelledControl label="Description" problem={error?.fieldError('description')}>
              {(props) => <textarea rows={2} maxLength={4000} value={description} onChange={(e) => setDescription(e.target.value)} {...props} />}
            </LabelledControl>
            <LabelledControl label="Tags" hint="Comma-separated" problem={error?.fieldError('tags')}>
              {(props) => <input value={tagsText} maxLength={2000} onChange={(e) => setTagsText(e.target.value)} {...props} />}
            </LabelledControl>
            <LabelledControl
              label={`Default value (${type})`}
              hint="Served when the flag is off or nothing else applies."
              problem={(showProblems && !defaultValue.ok ? defaultValue.problem : undefined) ?? error?.fieldError('defaultValue')}
            >
              {(props) => <ValueInput type={type} value={defaultText} onChange={setDefaultText} {...props} />}
            </LabelledControl>
          </section>
          <section aria-labelledby="targeting">
            <h2 id="targeting">Targeting rules</h2>
            <p className="hint">Rules are tried in order; the first whose conditions all hold (and whose rollout includes the context) serves its value.</p>
            <RuleEditor rules={rules} type={type} cohorts={cohorts.data?.cohorts} onChange={setRules} problems={problems} />
            {cohorts.error && <p className="field-error">Cohorts could not be loaded: {cohorts.error.message}</p>}
          </section>
          <section aria-labelledby="variants">
            <h2 id="variants">Variants</h2>
            <p className="hint">When no rule serves, contexts are split between the variants by weight (by targeting key).</p>
            <VariantsEditor variants={variants} type={type} onChange={setVariants} problems={problems} total={variantResult.total} />
          </section>
        </fieldset>
        <div role="status" className="fl-editor-status">
          {showProblems && (!targeting.ok || !variantResult.ok || !defaultValue.ok) && (
            <ul className="field-error">
              {targeting.problems.messages.map((m) => (
                <li key={m}>{m}</li>
              ))}
              {!variantResult.ok && <li>{variantResult.problem}</li>}
              {!defaultValue.ok && <li>Default value: {defaultValue.problem}</li>}
            </ul>
          )}
          {notice}
        </div>
        <ApiProblems error={error} />
        {needsApproval(error) && review && (
          <p>
            <button
              type="button"
              className="primary"
              onClick={() =>
                setRequesting({ serviceId: flag.serviceId, environment: flag.environment, flagKey: flag.key, action: 'update', body: review.patch, baseVersion: flag.version })
              }
            >
              Request approval for these changes
            </button>
          </p>
        )}
        {error?.status === 409 && (
          <p>
            <button type="button" onClick={onReload}>
              Load the latest version (discards these edits)
            </button>
          </p>
        )}
        {readOnly ? null : editing ? (
          <button type="submit" className="primary" disabled={busy !== undefined}>
            {busy === 'simulate' ? 'Simulating…' : 'Simulate and review changes'}
          </button>
        ) : (
          <section aria-labelledby="review" className="fl-review">
            <h2 id="review" tabIndex={-1} ref={reviewHeading}>
              Review before saving
            </h2>
            <p>
              Changes: {Object.keys(review.patch).join(', ')} in <strong>{flag.environment}</strong>.
            </p>
            {review.simulation ? (
              <SimulationResult result={review.simulation} ruleNumbers={ruleNumbers} />
            ) : (
              <p className="fl-note">These changes do not change what the flag serves (no simulation needed).</p>
            )}
            <div className="fl-actions">
              <button type="button" className="primary" disabled={busy !== undefined} onClick={() => void save()}>
                {busy === 'save' ? 'Saving…' : 'Save changes'}
              </button>
              <button type="button" disabled={busy !== undefined} onClick={() => setReview(undefined)}>
                Cancel
              </button>
            </div>
          </section>
        )}
      </form>
      {/* Outside the editor's form: the dialog holds a form of its own. */}
      <ChangeRequestDialog projectId={projectId} change={requesting} onClose={() => setRequesting(undefined)} />
    </>
  );
}

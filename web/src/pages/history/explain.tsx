import { useId, useState } from 'react';
import { Link, useParams } from 'wouter';
import { api, call, type paths } from '../../api/client';
import { FormError, useSubmit } from '../../components/forms';
import { contextFromJson, contextFromRows, rowsOf, type AttributeRow, type ContextProblem } from '../../components/history/context';
import { FlagScopePicker, scopeQuery, useFlagScope } from '../../components/history/flag-scope';
import { formatValue, JsonValue } from '../../components/history/value';
import { useTitle } from '../../page-title';

type Explanation = paths['/api/flags/{key}/explain']['post']['responses'][200]['content']['application/json'];
type Mode = 'rows' | 'json';

const EMPTY_ROW: AttributeRow = { name: '', value: '' };

/**
 * Explain a flag for a context (docs/explain.md): the person enters a targeting key and
 * attributes (as rows, or as JSON), and sees the value, the reason, every rule evaluation reached
 * with each condition's expected and actual value and outcome, and the rollout bucket.
 */
export default function Explain() {
  const { projectId, flagKey } = useParams<{ projectId: string; flagKey: string }>();
  useTitle(`Explain ${flagKey}`);
  const { serviceId, environment } = useFlagScope();
  const id = useId();
  const [mode, setMode] = useState<Mode>('rows');
  const [targetingKey, setTargetingKey] = useState('');
  const [rows, setRows] = useState<AttributeRow[]>([{ ...EMPTY_ROW }]);
  const [json, setJson] = useState('{\n  "targetingKey": ""\n}');
  const [problems, setProblems] = useState<ContextProblem[]>([]);
  const [result, setResult] = useState<Explanation | undefined>();
  const problemOf = (field: string) => problems.find((p) => p.field === field)?.message;

  function switchMode(next: Mode) {
    if (next === mode) return;
    if (next === 'json') {
      const built = contextFromRows(targetingKey, rows);
      if (built.problems) return setProblems(built.problems);
      setJson(JSON.stringify(built.context, null, 2));
    } else {
      const built = contextFromJson(json);
      if (built.problems) return setProblems(built.problems);
      const edited = rowsOf(built.context);
      setTargetingKey(edited.targetingKey);
      setRows(edited.rows.length ? edited.rows : [{ ...EMPTY_ROW }]);
    }
    setProblems([]);
    setMode(next);
  }

  function setRow(index: number, change: Partial<AttributeRow>) {
    setRows((current) => current.map((row, i) => (i === index ? { ...row, ...change } : row)));
  }

  const { busy, error, onSubmit } = useSubmit(async () => {
    const built = mode === 'rows' ? contextFromRows(targetingKey, rows) : contextFromJson(json);
    setProblems(built.problems ?? []);
    if (built.problems) return;
    try {
      setResult(await call(api.POST('/api/flags/{key}/explain', { params: { path: { key: flagKey } }, body: { serviceId, environment, context: built.context } })));
    } catch (caught) {
      setResult(undefined);
      throw caught;
    }
  });

  const query = scopeQuery(serviceId, environment);
  return (
    <>
      <h1>
        Explain <code>{flagKey}</code>
      </h1>
      <p className="page-links">
        {serviceId && (
          <>
            <Link href={`/projects/${encodeURIComponent(projectId)}/flags/${encodeURIComponent(flagKey)}?${query}`}>Back to the flag</Link>
            <Link href={`/projects/${encodeURIComponent(projectId)}/flags/${encodeURIComponent(flagKey)}/history?${query}`}>History</Link>
          </>
        )}
      </p>
      <FlagScopePicker projectId={projectId} />
      {!serviceId ? (
        <p>Choose the service whose copy of this flag to explain.</p>
      ) : (
        <form onSubmit={onSubmit} noValidate className="inline-form explain-form" aria-labelledby={`${id}-form`}>
          <h2 id={`${id}-form`}>Context</h2>
          <fieldset className="mode-switch">
            <legend>Enter the context as</legend>
            <label>
              <input type="radio" name="mode" checked={mode === 'rows'} onChange={() => switchMode('rows')} /> Attributes
            </label>
            <label>
              <input type="radio" name="mode" checked={mode === 'json'} onChange={() => switchMode('json')} /> JSON
            </label>
          </fieldset>
          {mode === 'rows' ? (
            <>
              <div className="field">
                <label htmlFor={`${id}-key`}>Targeting key</label>
                <input
                  id={`${id}-key`}
                  value={targetingKey}
                  onChange={(e) => setTargetingKey(e.target.value)}
                  maxLength={256}
                  aria-describedby={`${id}-key-hint`}
                  autoComplete="off"
                />
                <p id={`${id}-key-hint`} className="hint">
                  The user or entity id: rollouts and variants bucket by it. Leave empty to see what a context without one gets.
                </p>
              </div>
              <fieldset className="attributes">
                <legend>Attributes</legend>
                <p id={`${id}-values-hint`} className="hint">
                  Values are read as JSON when they parse (<code>42</code>, <code>true</code>, <code>["a","b"]</code>, <code>"007"</code>), otherwise as text.
                </p>
                {rows.map((row, i) => (
                  <AttributeRowInputs
                    key={i}
                    index={i}
                    row={row}
                    nameProblem={problemOf(`name-${i}`)}
                    hintId={`${id}-values-hint`}
                    onChange={(change) => setRow(i, change)}
                    onRemove={() => setRows((current) => (current.length > 1 ? current.filter((_, j) => j !== i) : [{ ...EMPTY_ROW }]))}
                  />
                ))}
                <button type="button" onClick={() => setRows((current) => [...current, { ...EMPTY_ROW }])}>
                  Add attribute
                </button>
              </fieldset>
            </>
          ) : (
            <div className="field">
              <label htmlFor={`${id}-json`}>Context (JSON)</label>
              <textarea
                id={`${id}-json`}
                rows={8}
                value={json}
                onChange={(e) => setJson(e.target.value)}
                spellCheck={false}
                aria-invalid={problemOf('json') ? true : undefined}
                aria-describedby={problemOf('json') ? `${id}-json-error` : undefined}
              />
              {problemOf('json') && (
                <p id={`${id}-json-error`} className="field-error">
                  The context {problemOf('json')}
                </p>
              )}
            </div>
          )}
          <div role="alert" className={problems.length ? 'form-error' : undefined}>
            {problems.length > 0 && mode === 'rows' ? 'Check the marked attributes.' : null}
          </div>
          <FormError error={error} />
          <button type="submit" className="primary" disabled={busy}>
            {busy ? 'Explaining…' : 'Explain'}
          </button>
        </form>
      )}
      <p role="status" className="visually-hidden">
        {result && `Result: value ${formatValue(result.value)}, reason ${result.reason}.`}
      </p>
      {result && <ExplanationView result={result} />}
    </>
  );
}

function AttributeRowInputs({
  index,
  row,
  nameProblem,
  hintId,
  onChange,
  onRemove,
}: {
  index: number;
  row: AttributeRow;
  nameProblem?: string;
  hintId: string;
  onChange: (change: Partial<AttributeRow>) => void;
  onRemove: () => void;
}) {
  const id = useId();
  const n = index + 1;
  return (
    <div className="attribute-row">
      <div className="field">
        <label htmlFor={`${id}-name`}>Attribute {n} name</label>
        <input
          id={`${id}-name`}
          value={row.name}
          onChange={(e) => onChange({ name: e.target.value })}
          maxLength={256}
          autoComplete="off"
          aria-invalid={nameProblem ? true : undefined}
          aria-describedby={nameProblem ? `${id}-error` : undefined}
        />
        {nameProblem && (
          <p id={`${id}-error`} className="field-error">
            Attribute {n} {nameProblem}
          </p>
        )}
      </div>
      <div className="field">
        <label htmlFor={`${id}-value`}>Attribute {n} value</label>
        <input id={`${id}-value`} value={row.value} onChange={(e) => onChange({ value: e.target.value })} aria-describedby={hintId} autoComplete="off" />
      </div>
      <button type="button" onClick={onRemove} aria-label={`Remove attribute ${n}`}>
        Remove
      </button>
    </div>
  );
}

function reasonText(result: Explanation): string {
  switch (result.reason) {
    case 'TARGETING_MATCH':
      return `Targeting rule ${result.ruleId ?? ''} matched.`;
    case 'VARIANT':
      return `No rule matched; the targeting key's bucket picked variant ${result.variant ?? ''}.`;
    case 'DEFAULT':
      return result.disabled ? 'The flag is disabled: it serves its default value.' : 'No rule matched and the flag has no variants: it serves its default value.';
    case 'ERROR':
      return `Evaluation failed${result.errorCode ? ` (${result.errorCode})` : ''}${result.errorMessage ? `: ${result.errorMessage}` : '.'}`;
  }
}

const bucketText = (bucket: number | null | undefined) => (bucket === null || bucket === undefined ? 'none (no targeting key)' : bucket.toFixed(2));

function ExplanationView({ result }: { result: Explanation }) {
  const id = useId();
  return (
    <section aria-labelledby={`${id}-result`} className="explanation">
      <h2 id={`${id}-result`}>Result</h2>
      <dl className="facts">
        <dt>Value</dt>
        <dd>
          <JsonValue value={result.value} />
        </dd>
        <dt>Reason</dt>
        <dd>
          <strong className={result.reason === 'ERROR' ? 'form-error' : undefined}>{result.reason}</strong> — {reasonText(result)}
        </dd>
        {result.variant !== undefined && (
          <>
            <dt>Variant</dt>
            <dd>{result.variant}</dd>
          </>
        )}
        {result.bucket !== undefined && (
          <>
            <dt>Bucket</dt>
            <dd>{bucketText(result.bucket)} of 100</dd>
          </>
        )}
      </dl>
      <h3>Rules checked</h3>
      {!result.rules.length ? (
        <p>{result.disabled ? 'None: a disabled flag checks no rule.' : 'None: the flag has no targeting rules.'}</p>
      ) : (
        <ol className="rules-checked">
          {result.rules.map((rule) => (
            <li key={rule.id}>
              <h4>
                Rule <code>{rule.id}</code>: <span className={rule.matched ? 'outcome-pass' : 'outcome-fail'}>{rule.matched ? 'matched' : 'did not match'}</span>
              </h4>
              {rule.issue && <p className="form-error">This rule never matches: {rule.issue}</p>}
              {rule.conditions.length ? (
                <div className="table-scroll">
                  <table>
                    <caption className="visually-hidden">Conditions of rule {rule.id}</caption>
                    <thead>
                      <tr>
                        <th scope="col">Property</th>
                        <th scope="col">Operator</th>
                        <th scope="col">Expected</th>
                        <th scope="col">Actual</th>
                        <th scope="col">Outcome</th>
                      </tr>
                    </thead>
                    <tbody>
                      {rule.conditions.map((condition, i) => (
                        <tr key={i}>
                          <td>
                            <code>{condition.property}</code>
                          </td>
                          <td>{condition.operator}</td>
                          <td>
                            <JsonValue value={condition.expected} />
                          </td>
                          <td>{'actual' in condition ? <JsonValue value={condition.actual} /> : <span className="muted">not in the context</span>}</td>
                          <td className={condition.passed ? 'outcome-pass' : 'outcome-fail'}><span aria-hidden="true">{condition.passed ? '✓ ' : '✗ '}</span>
                            {condition.passed ? 'Passed' : 'Failed'}</td>
                        </tr>
                      ))}
                    </tbody>
                  </table>
                </div>
              ) : (
                <p className="muted">No conditions: every context qualifies.</p>
              )}
              {rule.rollout && (
                <p>
                  Rollout to {rule.rollout.percentage}%: bucket {bucketText(rule.rollout.bucket)},{' '}
                  <span className={rule.rollout.included ? 'outcome-pass' : 'outcome-fail'}>{rule.rollout.included ? 'inside the rollout' : 'outside the rollout'}</span>.
                </p>
              )}
            </li>
          ))}
        </ol>
      )}
    </section>
  );
}

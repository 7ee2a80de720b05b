/**
 * The targeting rules editor: rules in evaluation order (the first that matches serves), each
 * with its conditions (every operator of the engine, the operand input typed per operator), the
 * value it serves and its rollout percentage; rules can be added, moved and deleted.
 */
import { useId } from 'react';
import { LabelledControl } from '../forms';
import { ValueInput } from './inputs';
import { newCondition, newRule, operandKind, OPERATORS, type Cohort, type DraftCondition, type DraftRule, type FlagType, type ScalarType } from './model';

interface RuleEditorProps {
  rules: DraftRule[];
  type: FlagType;
  cohorts: Cohort[] | undefined;
  onChange: (rules: DraftRule[]) => void;
  /** Per draft key: the problem to show beside that input (from the local checks). */
  problems: Map<string, string>;
}

export function RuleEditor({ rules, type, cohorts, onChange, problems }: RuleEditorProps) {
  const update = (index: number, rule: DraftRule) => onChange(rules.map((r, i) => (i === index ? rule : r)));
  const move = (index: number, by: -1 | 1) => {
    const next = [...rules];
    [next[index], next[index + by]] = [next[index + by], next[index]];
    onChange(next);
  };
  return (
    <div className="fl-rules">
      {rules.length === 0 && <p className="muted">No rules: everyone gets the variants or the default value.</p>}
      <ol className="fl-rule-list">
        {rules.map((rule, index) => (
          <li key={rule.key} className="fl-rule">
            <RuleCard
              rule={rule}
              index={index}
              count={rules.length}
              type={type}
              cohorts={cohorts}
              problems={problems}
              onChange={(r) => update(index, r)}
              onMove={(by) => move(index, by)}
              onDelete={() => onChange(rules.filter((_, i) => i !== index))}
            />
          </li>
        ))}
      </ol>
      <button type="button" onClick={() => onChange([...rules, newRule(type)])}>
        Add rule
      </button>
    </div>
  );
}

interface RuleCardProps {
  rule: DraftRule;
  index: number;
  count: number;
  type: FlagType;
  cohorts: Cohort[] | undefined;
  problems: Map<string, string>;
  onChange: (rule: DraftRule) => void;
  onMove: (by: -1 | 1) => void;
  onDelete: () => void;
}

function RuleCard({ rule, index, count, type, cohorts, problems, onChange, onMove, onDelete }: RuleCardProps) {
  const headingId = useId();
  const n = index + 1;
  const rollout = rule.rollout ?? 100;
  const setCondition = (j: number, condition: DraftCondition) => onChange({ ...rule, conditions: rule.conditions.map((c, i) => (i === j ? condition : c)) });
  return (
    <section aria-labelledby={headingId} className="fl-rule-card">
      <div className="fl-rule-head">
        <h3 id={headingId}>
          Rule {n}
          {rule.id && <span className="muted fl-rule-id"> ({rule.id})</span>}
        </h3>
        <div className="fl-rule-actions">
          <button type="button" aria-label={`Move rule ${n} up`} disabled={index === 0} onClick={() => onMove(-1)}>
            ↑
          </button>
          <button type="button" aria-label={`Move rule ${n} down`} disabled={index === count - 1} onClick={() => onMove(1)}>
            ↓
          </button>
          <button type="button" className="fl-danger" onClick={onDelete}>
            Delete rule {n}
          </button>
        </div>
      </div>
      <fieldset className="fl-conditions">
        <legend>When all of these hold{rule.conditions.length === 0 ? ' (no conditions: everyone)' : ''}</legend>
        {rule.conditions.map((condition, j) => (
          <ConditionRow
            key={condition.key}
            condition={condition}
            label={`Rule ${n}, condition ${j + 1}`}
            cohorts={cohorts}
            problems={problems}
            onChange={(c) => setCondition(j, c)}
            onDelete={() => onChange({ ...rule, conditions: rule.conditions.filter((_, i) => i !== j) })}
          />
        ))}
        <button type="button" onClick={() => onChange({ ...rule, conditions: [...rule.conditions, newCondition()] })}>
          Add condition to rule {n}
        </button>
      </fieldset>
      <div className="fl-rule-serve">
        <LabelledControl label={`Rule ${n} serves`} problem={problems.get(rule.key)}>
          {(props) => <ValueInput type={type} value={rule.valueText} onChange={(valueText) => onChange({ ...rule, valueText })} {...props} />}
        </LabelledControl>
        <LabelledControl
          label={`Rule ${n} rollout percentage`}
          hint={rule.rollout === undefined ? 'Everyone who matches (no percentage set)' : `${rollout}% of the contexts that match, by targeting key`}
        >
          {(props) => (
            <div className="fl-rollout">
              <input
                type="range"
                min={0}
                max={100}
                step={1}
                value={rollout}
                aria-valuetext={`${rollout}%`}
                onChange={(e) => onChange({ ...rule, rollout: Number(e.target.value) })}
                {...props}
              />
              <output htmlFor={props.id} aria-live="off" className="fl-rollout-value">
                {rollout}%
              </output>
            </div>
          )}
        </LabelledControl>
      </div>
    </section>
  );
}

interface ConditionRowProps {
  condition: DraftCondition;
  label: string;
  cohorts: Cohort[] | undefined;
  problems: Map<string, string>;
  onChange: (condition: DraftCondition) => void;
  onDelete: () => void;
}

const OPERAND_HINTS: Partial<Record<ReturnType<typeof operandKind>, string>> = {
  list: 'Comma-separated',
  pattern: 'A JavaScript regular expression, searched in the attribute',
  ordered: 'A number, or an ISO 8601 date',
  semver: 'e.g. 1.2.3 or v2.0.0-beta.1',
  date: 'e.g. 2026-05-01 or 2026-05-01T12:00:00Z',
};

function ConditionRow({ condition, label, cohorts, problems, onChange, onDelete }: ConditionRowProps) {
  const kind = operandKind(condition.operator);
  const set = (changes: Partial<DraftCondition>) => onChange({ ...condition, ...changes });
  return (
    <div className="fl-condition" role="group" aria-label={label}>
      {kind === 'cohort' ? (
        <p className="fl-condition-attr muted">The context</p>
      ) : (
        <LabelledControl label={`${label} attribute`} problem={problems.get(`${condition.key}:property`)} className="field fl-condition-attr">
          {(props) => (
            <input value={condition.property} maxLength={256} placeholder="e.g. country or user.plan" spellCheck={false} onChange={(e) => set({ property: e.target.value })} {...props} />
          )}
        </LabelledControl>
      )}
      <LabelledControl label={`${label} operator`} className="field fl-condition-op">
        {(props) => (
          <select
            value={condition.operator}
            onChange={(e) => {
              const operator = e.target.value;
              const nextKind = operandKind(operator);
              // The operand's form changes with the kind of operator: start it again.
              set({ operator, ...(nextKind !== kind ? { text: nextKind === 'exists' ? 'true' : '' } : {}) });
            }}
            {...props}
          >
            {OPERATORS.map((o) => (
              <option key={o.name} value={o.name}>
                {o.label}
              </option>
            ))}
          </select>
        )}
      </LabelledControl>
      <LabelledControl label={`${label} value`} problem={problems.get(condition.key)} hint={OPERAND_HINTS[kind]} className="field fl-condition-value">
        {(props) => <OperandInput condition={condition} cohorts={cohorts} set={set} controlProps={props} />}
      </LabelledControl>
      {(kind === 'scalar' || kind === 'list') && (
        <LabelledControl label={`${label} value type`} className="field fl-condition-type">
          {(props) => (
            <select
              value={condition.scalarType}
              onChange={(e) => {
                const scalarType = e.target.value as ScalarType;
                // A single true/false is chosen from a list: other text would not be one of its options.
                const keep = scalarType !== 'boolean' || kind === 'list' || condition.text === 'true' || condition.text === 'false';
                set({ scalarType, ...(keep ? {} : { text: '' }) });
              }}
              {...props}
            >
              <option value="string">text</option>
              <option value="number">number</option>
              <option value="boolean">true/false</option>
            </select>
          )}
        </LabelledControl>
      )}
      <button type="button" className="fl-condition-delete" aria-label={`Remove ${label.toLowerCase()}`} onClick={onDelete}>
        Remove
      </button>
    </div>
  );
}

function OperandInput({
  condition,
  cohorts,
  set,
  controlProps,
}: {
  condition: DraftCondition;
  cohorts: Cohort[] | undefined;
  set: (changes: Partial<DraftCondition>) => void;
  controlProps: { id: string; 'aria-invalid'?: true; 'aria-describedby'?: string };
}) {
  const kind = operandKind(condition.operator);
  if (kind === 'exists') {
    return (
      <select value={condition.text === 'false' ? 'false' : 'true'} onChange={(e) => set({ text: e.target.value })} {...controlProps}>
        <option value="true">present</option>
        <option value="false">absent</option>
      </select>
    );
  }
  if (kind === 'cohort') {
    return (
      <select value={condition.text} onChange={(e) => set({ text: e.target.value })} {...controlProps}>
        <option value="">{cohorts === undefined ? 'Loading cohorts…' : cohorts.length ? 'Choose a cohort' : 'This project has no cohorts'}</option>
        {cohorts?.map((c) => (
          <option key={c.id} value={c.id}>
            {c.name}
          </option>
        ))}
        {/* A stored rule may name a cohort deleted since: keep it visible. */}
        {condition.text && cohorts && !cohorts.some((c) => c.id === condition.text) && <option value={condition.text}>Unknown cohort {condition.text}</option>}
      </select>
    );
  }
  if (kind === 'scalar' && condition.scalarType === 'boolean') {
    return (
      <select value={condition.text} onChange={(e) => set({ text: e.target.value })} {...controlProps}>
        <option value="">Choose</option>
        <option value="true">true</option>
        <option value="false">false</option>
      </select>
    );
  }
  return (
    <input
      type={kind === 'scalar' && condition.scalarType === 'number' ? 'number' : 'text'}
      step="any"
      value={condition.text}
      spellCheck={false}
      className={kind === 'pattern' ? 'fl-mono' : undefined}
      onChange={(e) => set({ text: e.target.value })}
      {...controlProps}
    />
  );
}

/**
 * A flag's variants: name, value (of the flag's type) and weight. Weights must sum to 100; the
 * running total is shown as the user types, and saving is refused until it is right.
 */
import { LabelledControl } from '../forms';
import { ValueInput } from './inputs';
import { draftKey, formatValue, defaultFor, type DraftVariant, type FlagType } from './model';

interface VariantsEditorProps {
  variants: DraftVariant[];
  type: FlagType;
  onChange: (variants: DraftVariant[]) => void;
  problems: Map<string, string>;
  total: number;
}

export function VariantsEditor({ variants, type, onChange, problems, total }: VariantsEditorProps) {
  const set = (index: number, changes: Partial<DraftVariant>) => onChange(variants.map((v, i) => (i === index ? { ...v, ...changes } : v)));
  const balanced = variants.length === 0 || Math.abs(total - 100) <= 1e-6;
  return (
    <div className="fl-variants">
      {variants.length === 0 ? (
        <p className="muted">No variants: contexts no rule matches get the default value.</p>
      ) : (
        <ol className="fl-variant-list">
          {variants.map((variant, i) => (
            <li key={variant.key} className="fl-variant" aria-label={`Variant ${i + 1}`}>
              <LabelledControl label={`Variant ${i + 1} name`} problem={problems.get(`${variant.key}:name`)}>
                {(props) => <input value={variant.name} maxLength={100} onChange={(e) => set(i, { name: e.target.value })} {...props} />}
              </LabelledControl>
              <LabelledControl label={`Variant ${i + 1} value`} problem={problems.get(`${variant.key}:value`)}>
                {(props) => <ValueInput type={type} value={variant.valueText} onChange={(valueText) => set(i, { valueText })} {...props} />}
              </LabelledControl>
              <LabelledControl label={`Variant ${i + 1} weight (%)`} problem={problems.get(`${variant.key}:weight`)}>
                {(props) => (
                  <input type="number" min={0} max={100} step="any" inputMode="decimal" value={variant.weightText} onChange={(e) => set(i, { weightText: e.target.value })} {...props} />
                )}
              </LabelledControl>
              <button type="button" onClick={() => onChange(variants.filter((_, j) => j !== i))}>
                Remove variant {i + 1}
              </button>
            </li>
          ))}
        </ol>
      )}
      {/* Always rendered (empty when fine), so the message appearing does not move the page. */}
      <p role="status" className={balanced ? 'muted fl-weight-total' : 'field-error fl-weight-total'}>
        {variants.length > 0 && (balanced ? `Weights sum to 100.` : `Weights sum to ${total}; they must sum to 100.`)}
      </p>
      <button
        type="button"
        onClick={() =>
          onChange([
            ...variants,
            { key: draftKey(), name: `variant-${variants.length + 1}`, valueText: formatValue(type, defaultFor(type)), weightText: variants.length ? '0' : '100' },
          ])
        }
      >
        Add variant
      </button>
    </div>
  );
}

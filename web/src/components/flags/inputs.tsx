/**
 * Inputs of the flags area beyond the shared Field: a labelled wrapper for any control (select,
 * textarea, a typed value) that shows its problem beside it, and the flag-value input typed by
 * the flag's type (a true/false choice, a number, text, or JSON).
 */
import { useId, type ReactElement, type ReactNode } from 'react';
import type { FlagType } from './model';

/** A label, a control and its problem; `control` receives the id and aria attributes to set. */
export function LabelledControl({
  label,
  problem,
  hint,
  children,
  className = 'field',
}: {
  label: ReactNode;
  problem?: string;
  hint?: ReactNode;
  className?: string;
  children: (props: { id: string; 'aria-invalid'?: true; 'aria-describedby'?: string }) => ReactElement;
}) {
  const id = useId();
  const described = [hint ? `${id}-hint` : '', problem ? `${id}-error` : ''].filter(Boolean).join(' ') || undefined;
  return (
    <div className={className}>
      <label htmlFor={id}>{label}</label>
      {children({ id, ...(problem ? { 'aria-invalid': true as const } : {}), ...(described ? { 'aria-describedby': described } : {}) })}
      {hint && (
        <p id={`${id}-hint`} className="hint">
          {hint}
        </p>
      )}
      {problem && (
        <p id={`${id}-error`} className="field-error">
          {problem}
        </p>
      )}
    </div>
  );
}

interface ValueInputProps {
  type: FlagType;
  value: string;
  onChange: (text: string) => void;
  id?: string;
  name?: string;
  'aria-invalid'?: true;
  'aria-describedby'?: string;
  'aria-label'?: string;
}

/** A flag value typed by the flag's type; the text is read with parseValue. */
export function ValueInput({ type, value, onChange, ...rest }: ValueInputProps) {
  switch (type) {
    case 'boolean':
      return (
        <select value={value} onChange={(e) => onChange(e.target.value)} {...rest}>
          <option value="true">true</option>
          <option value="false">false</option>
        </select>
      );
    case 'number':
      return <input type="number" step="any" inputMode="decimal" value={value} onChange={(e) => onChange(e.target.value)} {...rest} />;
    case 'string':
      return <input value={value} onChange={(e) => onChange(e.target.value)} {...rest} />;
    case 'object':
      return <textarea rows={4} spellCheck={false} className="fl-mono" value={value} onChange={(e) => onChange(e.target.value)} {...rest} />;
  }
}

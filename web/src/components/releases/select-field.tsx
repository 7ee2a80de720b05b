import { useId, type ReactNode, type SelectHTMLAttributes } from 'react';
import type { ApiError } from '../../api/client';

interface Props extends SelectHTMLAttributes<HTMLSelectElement> {
  label: string;
  name: string;
  error?: ApiError;
  hint?: ReactNode;
  children: ReactNode;
}

/** A labelled select that shows its API error beside it (the select twin of forms.tsx's Field). */
export function SelectField({ label, name, error, hint, children, ...select }: Props) {
  const id = useId();
  const problem = error?.fieldError(name);
  const described = [hint ? `${id}-hint` : '', problem ? `${id}-error` : ''].filter(Boolean).join(' ') || undefined;
  return (
    <div className="field">
      <label htmlFor={id}>{label}</label>
      <select id={id} name={name} aria-invalid={problem ? true : undefined} aria-describedby={described} {...select}>
        {children}
      </select>
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

/**
 * Form pieces every page uses: a labelled field that shows its API error beside it, the form's
 * own error (role="alert", read out when it appears) and a submit button that says it is busy.
 * useSubmit runs the API call and keeps its ApiError for both.
 */
import { useCallback, useId, useState, type FormEvent, type InputHTMLAttributes, type ReactNode } from 'react';
import { ApiError } from '../api/client';

export function useSubmit<T>(action: (data: FormData, form: HTMLFormElement) => Promise<T>) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<ApiError | undefined>();
  const onSubmit = useCallback(
    async (event: FormEvent<HTMLFormElement>) => {
      event.preventDefault();
      // Read before the first await: React clears currentTarget once the handler returns.
      const form = event.currentTarget;
      if (busy) return;
      setBusy(true);
      setError(undefined);
      try {
        await action(new FormData(form), form);
      } catch (caught) {
        setError(caught instanceof ApiError ? caught : new ApiError(0, 'Error', caught instanceof Error ? caught.message : String(caught)));
      } finally {
        setBusy(false);
      }
    },
    [action, busy],
  );
  return { busy, error, onSubmit };
}

interface FieldProps extends InputHTMLAttributes<HTMLInputElement> {
  label: string;
  name: string;
  /** The failed submission: its problem with this field (details path `body.<name>`) shows here. */
  error?: ApiError;
  hint?: ReactNode;
}

export function Field({ label, name, error, hint, ...input }: FieldProps) {
  const id = useId();
  const problem = error?.fieldError(name);
  const described = [hint ? `${id}-hint` : '', problem ? `${id}-error` : ''].filter(Boolean).join(' ') || undefined;
  return (
    <div className="field">
      <label htmlFor={id}>{label}</label>
      <input id={id} name={name} aria-invalid={problem ? true : undefined} aria-describedby={described} {...input} />
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

/**
 * The error of the last submission, as the server worded it; when every problem it lists is
 * shown beside one of `fields`, only a pointer to them (not the same words twice).
 */
export function FormError({ error, fields = [] }: { error?: ApiError; fields?: string[] }) {
  const allBesideFields = !!error?.details.length && error.details.every((d) => fields.some((f) => error.fieldError(f) === d.message));
  return (
    <div role="alert" className={error ? 'form-error' : undefined}>
      {error && (allBesideFields ? 'Check the marked fields.' : error.message)}
    </div>
  );
}

export function SubmitButton({ busy, children }: { busy: boolean; children: ReactNode }) {
  return (
    <button type="submit" className="primary" aria-disabled={busy || undefined} disabled={busy}>
      {busy ? 'Working…' : children}
    </button>
  );
}

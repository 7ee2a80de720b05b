/**
 * The one way forms and buttons call the API, and the pieces that show how it went:
 * - useAction runs one call at a time per page part, naming which (so that button shows it is
 *   busy) and keeping the failure as an ApiError;
 * - useSubmit is useAction for a <form>: it hands the call the form's FormData;
 * - LabelledControl labels any control and shows its problem beside it; Field (an input) and
 *   SelectField take that problem from the ApiError; FormError shows the form's, SubmitButton
 *   says when it is busy; RefusedButton is a button the user's role does not allow, with the reason.
 */
import { useCallback, useId, useState, type FormEvent, type InputHTMLAttributes, type ReactElement, type ReactNode, type SelectHTMLAttributes } from 'react';
import { asApiError, type ApiError } from '../api/client';

export function useAction() {
  const [running, setRunning] = useState<string | undefined>();
  const [error, setError] = useState<ApiError | undefined>();
  /** Runs `action` as `id`; true when it succeeded. */
  const run = useCallback(async (id: string, action: () => Promise<unknown>): Promise<boolean> => {
    setRunning(id);
    setError(undefined);
    try {
      await action();
      return true;
    } catch (caught) {
      setError(asApiError(caught));
      return false;
    } finally {
      setRunning(undefined);
    }
  }, []);
  const clearError = useCallback(() => setError(undefined), []);
  return { running, error, run, clearError };
}

export function useSubmit<T>(action: (data: FormData, form: HTMLFormElement) => Promise<T>) {
  const { running, error, run } = useAction();
  const busy = running !== undefined;
  const onSubmit = useCallback(
    async (event: FormEvent<HTMLFormElement>) => {
      event.preventDefault();
      // Read before the first await: React clears currentTarget once the handler returns.
      const form = event.currentTarget;
      if (busy) return;
      await run('submit', () => action(new FormData(form), form));
    },
    [action, busy, run],
  );
  return { busy, error, onSubmit };
}

/** A label, a control and its problem; `children` renders the control with the id and aria attributes given. */
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

interface FieldProps {
  label: string;
  name: string;
  /** The failed submission: its problem with this field (details path `body.<name>`) shows beside it. */
  error?: ApiError;
  hint?: ReactNode;
}

export function Field({ label, name, error, hint, ...input }: FieldProps & InputHTMLAttributes<HTMLInputElement>) {
  return (
    <LabelledControl label={label} hint={hint} problem={error?.fieldError(name)}>
      {(labelled) => <input name={name} {...labelled} {...input} />}
    </LabelledControl>
  );
}

export function SelectField({ label, name, error, hint, children, ...select }: FieldProps & SelectHTMLAttributes<HTMLSelectElement>) {
  return (
    <LabelledControl label={label} hint={hint} problem={error?.fieldError(name)}>
      {(labelled) => (
        <select name={name} {...labelled} {...select}>
          {children}
        </select>
      )}
    </LabelledControl>
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

/**
 * A button the user's role does not allow (components/settings/access.ts): shown disabled rather
 * than failing with "Forbidden" after the click, with the reason beside it and as its description.
 */
export function RefusedButton({ reason, className, children }: { reason: string; className?: string; children: ReactNode }) {
  const id = useId();
  return (
    <span className="refused">
      <button type="button" className={className} disabled title={reason} aria-describedby={id}>
        {children}
      </button>
      <span id={id} className="hint">
        {reason}
      </span>
    </span>
  );
}

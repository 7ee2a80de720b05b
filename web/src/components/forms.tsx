/**
 * The one way forms and buttons call the API, and the pieces that show how it went:
 * - useAction runs one call at a time per page part, naming which (so that button shows it is
 *   busy) and keeping the failure as an ApiError;
 * - useSubmit is useAction for a <form>: it hands the call the form's FormData;
 * - Field is a labelled input that shows its own problem from that ApiError, FormError the
 *   form's, SubmitButton says when it is busy.
 */
import { useCallback, useId, useState, type FormEvent, type InputHTMLAttributes, type ReactNode } from 'react';
import { ApiError } from '../api/client';

export function asApiError(caught: unknown): ApiError {
  return caught instanceof ApiError ? caught : new ApiError(0, 'Error', caught instanceof Error ? caught.message : String(caught));
}

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
  return { running, error, run };
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

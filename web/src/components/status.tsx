import type { ReactNode } from 'react';
import type { ApiError } from '../api/client';

/** A region that announces loading and load failures of a page's data. */
export function LoadState({ loading, error, children }: { loading: boolean; error?: ApiError; children: ReactNode }) {
  if (error) return <p role="alert" className="form-error">{error.message}</p>;
  if (loading) return <p role="status" className="muted">Loading…</p>;
  return <>{children}</>;
}

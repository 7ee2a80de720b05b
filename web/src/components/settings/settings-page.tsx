/**
 * The frame every settings page shares: its title, the section tabs (the project's or the
 * account's), an introduction, the outcome of the page's last action, and the page itself, or
 * why the signed-in user cannot use it.
 */
import type { ReactNode } from 'react';
import type { ApiError } from '../../api/client';
import { AccountTabs, SettingsTabs } from './section-nav';

interface Props {
  title: string;
  /** The project whose settings these are; without one, the user's own (account) settings. */
  projectId?: string;
  intro?: ReactNode;
  /** Why the page is not shown to this user (a NEEDS sentence), when it is not. */
  refusal?: ReactNode;
  children?: ReactNode;
}

export function SettingsPage({ title, projectId, intro, refusal, children }: Props) {
  return (
    <>
      <h1>{title}</h1>
      {projectId === undefined ? <AccountTabs /> : <SettingsTabs projectId={projectId} />}
      {intro}
      {refusal ? <p>{refusal}</p> : children}
    </>
  );
}

/**
 * What the page's buttons and forms last did: a notice read out politely (the region is always
 * there so the first one is announced) and a failure as the server worded it.
 */
export function ActionOutcome({ notice, error }: { notice: string; error?: ApiError }) {
  return (
    <>
      <p role="status" className="st-notice">
        {notice}
      </p>
      {error && (
        <p role="alert" className="form-error">
          {error.message}
        </p>
      )}
    </>
  );
}

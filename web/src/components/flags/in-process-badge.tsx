import type { FlagRecord } from './model';

/**
 * Whether flagd's in-process providers evaluate the flag exactly as the service does
 * (docs/flagd.md#compatibility), and why not: each condition or value they cannot evaluate.
 */
export function InProcessBadge({ flag }: { flag: Pick<FlagRecord, 'inProcessCompatible' | 'inProcessIssues'> }) {
  if (flag.inProcessCompatible) {
    return (
      <p className="fl-in-process">
        <span className="fl-badge fl-badge-ok">In-process: compatible</span>
      </p>
    );
  }
  return (
    <div className="fl-in-process">
      <p>
        <span className="fl-badge fl-badge-not">In-process: not compatible</span>{' '}
        <span className="muted">flagd's in-process providers answer the application's default value (reason ERROR) for this flag; remote evaluation is not affected.</span>
      </p>
      <ul aria-label="Why in-process providers cannot evaluate this flag">
        {flag.inProcessIssues.map((issue, index) => (
          <li key={index}>
            {issue.ruleId === null ? 'Flag' : `Rule ${issue.ruleId}`}
            {issue.operator === null ? '' : ` (${issue.operator})`}: {issue.message}
          </li>
        ))}
      </ul>
    </div>
  );
}

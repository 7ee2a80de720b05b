import { showValue, type Simulation } from './model';

/** Names the simulation gives outcomes that are not stored rules (api/features/simulate/service.ts). */
function outcomeLabel(ruleId: string, ruleNumbers: Map<string, number>): string {
  if (ruleId === '$default') return 'Default value';
  if (ruleId === '$disabled') return 'Flag disabled';
  if (ruleId === '$error') return 'Evaluation error';
  if (ruleId.startsWith('$variant:')) return `Variant ${ruleId.slice('$variant:'.length)}`;
  if (ruleId.startsWith('$new:')) return `New rule ${Number(ruleId.slice('$new:'.length)) + 1}`;
  const n = ruleNumbers.get(ruleId);
  return n ? `Rule ${n} (${ruleId})` : `Rule ${ruleId}`;
}

/**
 * Who a candidate change would affect, replayed over recent real contexts: counts, value
 * transitions, contexts per rule before and after, and a sample of changed contexts.
 */
export function SimulationResult({ result, ruleNumbers }: { result: Simulation; ruleNumbers: Map<string, number> }) {
  if (result.evaluated === 0) {
    return (
      <p className="fl-note">
        No recent contexts for this service and environment: nothing has evaluated its flags lately (or the context store is empty), so the
        simulation cannot tell who would change. You can still save.
      </p>
    );
  }
  const share = (n: number) => `${((100 * n) / result.evaluated).toFixed(1)}%`;
  return (
    <div className="fl-simulation">
      <p className="fl-simulation-summary">
        <strong>{result.changed}</strong> of {result.evaluated} recent contexts would get a different value ({share(result.changed)});{' '}
        {result.unchanged} unchanged.
      </p>
      {result.transitions.length > 0 && (
        <table>
          <caption>Value changes</caption>
          <thead>
            <tr>
              <th scope="col">From</th>
              <th scope="col">To</th>
              <th scope="col">Contexts</th>
            </tr>
          </thead>
          <tbody>
            {result.transitions.map((t, i) => (
              <tr key={i}>
                <td>
                  <code>{showValue(t.from)}</code>
                </td>
                <td>
                  <code>{showValue(t.to)}</code>
                </td>
                <td>{t.count}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <table>
        <caption>Contexts served by each rule or outcome</caption>
        <thead>
          <tr>
            <th scope="col">Outcome</th>
            <th scope="col">Now</th>
            <th scope="col">After the change</th>
          </tr>
        </thead>
        <tbody>
          {result.byRule.map((row) => (
            <tr key={`${row.outcome}:${row.ruleId}`}>
              <td>{outcomeLabel(row.ruleId, ruleNumbers)}</td>
              <td>{row.before}</td>
              <td>{row.after}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {result.examples.length > 0 && (
        <table>
          <caption>Sample of contexts whose value changes (most recently seen first)</caption>
          <thead>
            <tr>
              <th scope="col">Targeting key</th>
              <th scope="col">Now</th>
              <th scope="col">After the change</th>
            </tr>
          </thead>
          <tbody>
            {result.examples.map((e) => (
              <tr key={e.targetingKey}>
                <td>
                  <code>{e.targetingKey}</code>
                </td>
                <td>
                  <code>{showValue(e.before)}</code> <span className="muted">{outcomeLabel(e.beforeRuleId, ruleNumbers)}</span>
                </td>
                <td>
                  <code>{showValue(e.after)}</code> <span className="muted">{outcomeLabel(e.afterRuleId, ruleNumbers)}</span>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </div>
  );
}

import { DataTable } from '../data-table';
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
        <DataTable
          frame={null}
          captionShown
          caption="Value changes"
          rows={result.transitions}
          rowKey={(_, index) => index}
          empty={null}
          columns={[
            { header: 'From', cell: (t) => <code>{showValue(t.from)}</code> },
            { header: 'To', cell: (t) => <code>{showValue(t.to)}</code> },
            { header: 'Contexts', cell: (t) => t.count },
          ]}
        />
      )}
      <DataTable
        frame={null}
        captionShown
        caption="Contexts served by each rule or outcome"
        rows={result.byRule}
        rowKey={(row) => `${row.outcome}:${row.ruleId}`}
        empty={null}
        columns={[
          { header: 'Outcome', cell: (row) => outcomeLabel(row.ruleId, ruleNumbers) },
          { header: 'Now', cell: (row) => row.before },
          { header: 'After the change', cell: (row) => row.after },
        ]}
      />
      {result.examples.length > 0 && (
        <DataTable
          frame={null}
          captionShown
          caption="Sample of contexts whose value changes (most recently seen first)"
          rows={result.examples}
          rowKey={(e) => e.targetingKey}
          empty={null}
          columns={[
            { header: 'Targeting key', cell: (e) => <code>{e.targetingKey}</code> },
            {
              header: 'Now',
              cell: (e) => (
                <>
                  <code>{showValue(e.before)}</code> <span className="muted">{outcomeLabel(e.beforeRuleId, ruleNumbers)}</span>
                </>
              ),
            },
            {
              header: 'After the change',
              cell: (e) => (
                <>
                  <code>{showValue(e.after)}</code> <span className="muted">{outcomeLabel(e.afterRuleId, ruleNumbers)}</span>
                </>
              ),
            },
          ]}
        />
      )}
    </div>
  );
}

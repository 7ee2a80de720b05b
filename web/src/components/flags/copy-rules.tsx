/**
 * "Copy rules to <environment>…": the serving content of one environment's record (targeting rules,
 * variants, default value) written into another environment's record through the normal flag write
 * path, reviewed first like the editor's changes (what is replaced, and who would change there by the
 * simulate endpoint). A change policy still applies: a 403 APPROVAL_REQUIRED offers the change as a
 * change request (docs/change-requests.md#the-gate).
 */
import { useEffect, useRef, useState } from 'react';
import { api, call, type paths } from '../../api/client';
import { activation } from '../../telemetry';
import type { NewChange } from '../change-requests/model';
import { ChangeRequestDialog, needsApproval } from '../change-requests/request-dialog';
import { useAction } from '../forms';
import { useProjectAccess } from '../settings/access';
import { ApiProblems } from './api-problems';
import { EnvironmentBadge, ruleCount, servingContent } from './environments';
import { showValue, type FlagRecord, type Simulation } from './model';
import { SimulationResult } from './simulation-result';

type Patch = NonNullable<paths['/api/flags/{key}']['patch']['requestBody']>['content']['application/json'];
type Candidate = NonNullable<paths['/api/flags/{key}/simulate']['post']['requestBody']>['content']['application/json']['candidateFlag'];

interface CopyRulesProps {
  source: FlagRecord;
  target: FlagRecord;
  /** The environment of the page: copying from it needs no naming. */
  shownEnvironment: string;
  /** The target's record as the copy left it. */
  onCopied: (flag: FlagRecord) => void;
}

export function CopyRules({ source, target, shownEnvironment, onCopied }: CopyRulesProps) {
  const [simulation, setSimulation] = useState<Simulation | undefined>();
  const [reviewing, setReviewing] = useState(false);
  const [requesting, setRequesting] = useState<NewChange | undefined>();
  const action = useAction();
  const busy = action.running !== undefined;
  const canWrite = useProjectAccess(source.projectId).can('flags:write');
  const heading = useRef<HTMLHeadingElement>(null);
  useEffect(() => {
    if (reviewing) heading.current?.focus();
  }, [reviewing]);

  // Without rule ids: the target's copy gets ids of its own. Stored operators are the engine's (typed as plain strings).
  const patch = servingContent(source) as Patch;

  async function review() {
    setReviewing(true);
    setSimulation(undefined);
    await action.run('simulate', async () => {
      const candidateFlag = patch as Candidate;
      setSimulation(await call(api.POST('/api/flags/{key}/simulate', { params: { path: { key: target.key } }, body: { serviceId: target.serviceId, environment: target.environment, candidateFlag } })));
    });
  }

  async function save() {
    if (busy) return;
    await action.run('save', async () => {
      const saved = await call(
        api.PATCH('/api/flags/{key}', {
          params: { path: { key: target.key }, query: { serviceId: target.serviceId, environment: target.environment } },
          body: { ...patch, version: target.version },
        }),
      );
      activation(source.projectId, 'targeting_saved');
      setReviewing(false);
      onCopied(saved);
    });
  }

  if (!canWrite) return null;
  const label = source.environment === shownEnvironment ? `Copy rules to ${target.environment}…` : `Copy ${source.environment}'s rules to ${target.environment}…`;
  return (
    <>
      {!reviewing ? (
        <button type="button" onClick={() => void review()}>
          {label}
        </button>
      ) : (
        <section aria-label={`Copy rules from ${source.environment} to ${target.environment}`} className="fl-review">
          <h3 tabIndex={-1} ref={heading}>
            Review: copy {source.environment}&apos;s rules to <EnvironmentBadge environment={target.environment} />
          </h3>
          <p>
            {target.environment} gets {ruleCount(source)}, {source.variants.length} variants and the default value {showValue(source.defaultValue)} from{' '}
            {source.environment}, replacing its {ruleCount(target)}, {target.variants.length} variants and default value {showValue(target.defaultValue)}.{' '}
            {target.enabled ? `${target.environment} is on: the copy serves at once.` : `${target.environment} is off: the copy serves once it is switched on.`}
          </p>
          {action.running === 'simulate' && <p role="status">Simulating…</p>}
          {simulation && <SimulationResult result={simulation} ruleNumbers={new Map()} />}
          <ApiProblems error={action.error} />
          {needsApproval(action.error) && (
            <p>
              <button
                type="button"
                className="primary"
                onClick={() =>
                  setRequesting({ serviceId: target.serviceId, environment: target.environment, flagKey: target.key, action: 'update', body: patch, baseVersion: target.version })
                }
              >
                Request approval for the copy
              </button>
            </p>
          )}
          <div className="fl-actions">
            <button type="button" className="primary" disabled={busy} onClick={() => void save()}>
              {action.running === 'save' ? 'Copying…' : `Save rules in ${target.environment}`}
            </button>
            <button type="button" disabled={action.running === 'save'} onClick={() => setReviewing(false)}>
              Cancel
            </button>
          </div>
        </section>
      )}
      <ChangeRequestDialog projectId={source.projectId} change={requesting} onClose={() => setRequesting(undefined)} />
    </>
  );
}

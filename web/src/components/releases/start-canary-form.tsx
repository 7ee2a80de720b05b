/**
 * Start a canary on one flag's rule (POST /api/flags/{key}/canary, docs/canary.md): the service,
 * environment, flag and rule to ramp (an existing rule, or a new rule `canary` serving a value),
 * the stages (initial, step, target, soak) and the gates (error-rate and latency limits, minimum
 * exposures, alpha, what a breach does). The API validates; its problems show beside the fields.
 */
import { useState } from 'react';
import { useLocation } from 'wouter';
import { api, ApiError, call } from '../../api/client';
import { useFlags, useServices } from '../../api/resources';
import { activation } from '../../telemetry';
import { Field, FormError, RefusedButton, SelectField, SubmitButton, useSubmit } from '../forms';
import { useProjectAccess } from '../settings/access';
import { canaryRefusal } from './access';
import { PRODUCTION_FIRST } from '../../api/environments';
import { flagReleaseHref, type Environment } from './types';

/** The one value of the select that means "insert a new rule" (a real rule id cannot be empty). */
const NEW_RULE = '';

const NUMBER_FIELDS = ['initialRolloutPercent', 'rampStepPercent', 'targetRolloutPercent', 'soakPeriodMinutes', 'errorRateGateDelta', 'latencyGateDeltaMs', 'minSamplesPerCohort', 'alpha'] as const;
const FIELDS = [...NUMBER_FIELDS, 'maxWaitMinutes', 'serviceId', 'environment', 'ruleId', 'value', 'autoRollbackOnBreach'];

interface Props {
  projectId: string;
  initial: { flag?: string; serviceId?: string; environment?: string };
}

export function StartCanaryForm({ projectId, initial }: Props) {
  const [, navigate] = useLocation();
  const [chosenService, setServiceId] = useState(initial.serviceId ?? '');
  const [environment, setEnvironment] = useState<Environment>(PRODUCTION_FIRST.find((e) => e === initial.environment) ?? 'production');
  const [flagKey, setFlagKey] = useState(initial.flag ?? '');
  const [ruleId, setRuleId] = useState<string | undefined>();

  const services = useServices(projectId);
  const serviceId = chosenService || services.data?.services[0]?.id || '';
  const flags = useFlags({ projectId, serviceId, environment, limit: 100 }, { enabled: !!serviceId });
  const flagList = serviceId ? flags.data?.flags : [];
  const flag = flagList?.find((f) => f.key === flagKey) ?? flagList?.[0];
  const rules = flag?.targeting ?? [];
  // The rule shown: the one picked if the flag has it, else the flag's first rule, else a new one.
  const rule = ruleId !== undefined && (ruleId === NEW_RULE || rules.some((r) => r.id === ruleId)) ? ruleId : (rules[0]?.id ?? NEW_RULE);

  const { busy, error, onSubmit } = useSubmit(async (data) => {
    if (!flag?.key) throw new ApiError(400, 'Bad Request', 'Pick a flag to ramp.');
    const body: Record<string, unknown> = { serviceId, environment, autoRollbackOnBreach: data.get('autoRollbackOnBreach') === 'on' };
    // Numbers go as typed; an empty or malformed one goes as null, which the API names beside its field.
    for (const name of NUMBER_FIELDS) body[name] = numberOf(data.get(name));
    if (String(data.get('maxWaitMinutes') ?? '').trim()) body.maxWaitMinutes = numberOf(data.get('maxWaitMinutes'));
    if (rule !== NEW_RULE) body.ruleId = rule;
    else if (flag.type !== 'boolean' || String(data.get('value') ?? '').trim()) {
      try {
        body.value = JSON.parse(String(data.get('value') ?? ''));
      } catch {
        throw new ApiError(400, 'Bad Request', 'Check the marked fields.', [{ path: 'body.value', message: 'must be JSON: "green", 42, true or an object' }]);
      }
    }
    const record = await call(api.POST('/api/flags/{key}/canary', { params: { path: { key: flag.key } }, body: body as never }));
    activation(projectId, 'canary_started');
    navigate(flagReleaseHref(projectId, record.flagKey, record.serviceId, record.environment));
  });

  const noServices = services.data && !services.data.services.length;
  const refusal = canaryRefusal(useProjectAccess(projectId));
  if (refusal) {
    // A form that can only fail is no help: the button stays, disabled, with the reason.
    return (
      <section aria-labelledby="start-canary" className="rs-start">
        <h2 id="start-canary">Start a canary</h2>
        <RefusedButton reason={refusal}>Start canary</RefusedButton>
      </section>
    );
  }
  return (
    <form onSubmit={onSubmit} noValidate className="inline-form rs-start" aria-labelledby="start-canary">
      <h2 id="start-canary">Start a canary</h2>
      {noServices ? (
        <p>This project has no services yet: create one on the project overview, then a flag with a rule.</p>
      ) : (
        <>
          <fieldset>
            <legend>What to ramp</legend>
            <div className="rs-grid">
              <SelectField label="Service" name="serviceId" value={serviceId} onChange={(e) => setServiceId(e.target.value)} error={error}>
                {services.data?.services.map((s) => (
                  <option key={s.id} value={s.id}>
                    {s.name}
                  </option>
                ))}
              </SelectField>
              <SelectField label="Environment" name="environment" value={environment} onChange={(e) => setEnvironment(e.target.value as Environment)} error={error}>
                {PRODUCTION_FIRST.map((e) => (
                  <option key={e} value={e}>
                    {e}
                  </option>
                ))}
              </SelectField>
              <SelectField
                label="Flag"
                name="flag"
                value={flag?.key ?? ''}
                onChange={(e) => {
                  setFlagKey(e.target.value);
                  setRuleId(undefined);
                }}
                hint={flagList && !flagList.length ? `No flags in ${environment} for this service.` : flags.error?.message}
              >
                {flagList?.map((f) => (
                  <option key={f.key} value={f.key}>
                    {f.key} ({f.type})
                  </option>
                ))}
              </SelectField>
              <SelectField label="Rule" name="ruleId" value={rule} onChange={(e) => setRuleId(e.target.value)} error={error} hint="The pipeline ramps this rule's rollout percentage.">
                {rules.map((r, i) => (
                  <option key={r.id} value={r.id}>
                    {r.id} (rule {i + 1}
                    {r.rolloutPercentage !== undefined ? `, now ${r.rolloutPercentage}%` : ''})
                  </option>
                ))}
                <option value={NEW_RULE}>New rule “canary” for everyone</option>
              </SelectField>
              {rule === NEW_RULE && (
                <Field
                  label="Value of the new rule (JSON)"
                  name="value"
                  error={error}
                  placeholder={flag?.type === 'boolean' ? 'true' : flag?.type === 'string' ? '"green"' : ''}
                  hint={flag?.type === 'boolean' ? 'Empty: true.' : `Required for a ${flag?.type ?? ''} flag.`}
                />
              )}
            </div>
          </fieldset>
          <fieldset>
            <legend>Stages</legend>
            <div className="rs-grid">
              <Field label="Initial rollout %" name="initialRolloutPercent" type="number" inputMode="decimal" step="any" defaultValue={10} error={error} />
              <Field label="Step %" name="rampStepPercent" type="number" inputMode="decimal" step="any" defaultValue={20} error={error} />
              <Field label="Target rollout %" name="targetRolloutPercent" type="number" inputMode="decimal" step="any" defaultValue={50} error={error} />
              <Field label="Soak per stage (minutes)" name="soakPeriodMinutes" type="number" inputMode="decimal" step="any" defaultValue={5} error={error} hint="0.05 (3 s) to 10,080" />
            </div>
          </fieldset>
          <fieldset>
            <legend>Gates</legend>
            <div className="rs-grid">
              <Field label="Error-rate limit (0-1)" name="errorRateGateDelta" type="number" inputMode="decimal" step="any" defaultValue={0.01} error={error} hint="Tolerated rise: 0.01 is one percentage point" />
              <Field label="Latency limit (ms)" name="latencyGateDeltaMs" type="number" inputMode="decimal" step="any" defaultValue={100} error={error} hint="Tolerated rise of the mean" />
              <Field label="Minimum exposures per cohort" name="minSamplesPerCohort" type="number" inputMode="numeric" step={1} defaultValue={100} error={error} />
              <Field label="Alpha" name="alpha" type="number" inputMode="decimal" step="any" defaultValue={0.05} error={error} hint="Significance level, up to 0.5" />
              <Field label="Wait for data (minutes)" name="maxWaitMinutes" type="number" inputMode="decimal" step="any" error={error} hint="Empty: 10 soaks, at least 1 minute; then the pipeline pauses" />
            </div>
            <div className="field rs-check">
              <input type="checkbox" id="autoRollbackOnBreach" name="autoRollbackOnBreach" defaultChecked />
              <label htmlFor="autoRollbackOnBreach">Roll back automatically when a gate fails (otherwise pause)</label>
            </div>
          </fieldset>
          <FormError error={error} fields={FIELDS} />
          <SubmitButton busy={busy}>Start canary</SubmitButton>
        </>
      )}
    </form>
  );
}

function numberOf(value: FormDataEntryValue | null): number | null {
  const text = String(value ?? '').trim();
  const n = Number(text);
  return text && Number.isFinite(n) ? n : null;
}

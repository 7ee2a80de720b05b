import { useState } from 'react';
import { Link, useLocation, useParams, useSearch } from 'wouter';
import { api, call } from '../../api/client';
import { useServices } from '../../api/resources';
import { environmentOption } from '../../components/flags/environments';
import { ValueInput } from '../../components/flags/inputs';
import { ENVIRONMENTS, FLAG_TYPES, defaultFor, flagHref, formatValue, parseTags, parseValue, type Environment, type FlagType } from '../../components/flags/model';
import { Field, FormError, LabelledControl, SubmitButton, useSubmit } from '../../components/forms';
import { NEEDS, useProjectAccess } from '../../components/settings/access';
import { LoadState } from '../../components/status';
import { activation } from '../../telemetry';

const FIELDS = ['key', 'name', 'description', 'type', 'defaultValue', 'tags', 'serviceId', 'environment'];

/**
 * Create a flag: without an environment it is created in all three (the API's default), each
 * its own record, and the flag page opens on development saying so; the default value input follows
 * the chosen type.
 */
export default function NewFlag() {
  const { projectId } = useParams<{ projectId: string }>();
  const preset = new URLSearchParams(useSearch()).get('serviceId') ?? '';
  const [, navigate] = useLocation();
  const services = useServices(projectId);
  const canCreate = useProjectAccess(projectId).can('flags:write');
  const [type, setType] = useState<FlagType>('boolean');
  const [defaultText, setDefaultText] = useState(formatValue('boolean', false));
  const [localProblem, setLocalProblem] = useState<string | undefined>();

  const { busy, error, onSubmit } = useSubmit(async (data) => {
    const parsed = parseValue(type, defaultText);
    if (!parsed.ok) {
      setLocalProblem(parsed.problem);
      return;
    }
    setLocalProblem(undefined);
    const environment = String(data.get('environment') ?? '');
    const serviceId = String(data.get('serviceId') ?? '');
    const key = String(data.get('key') ?? '').trim();
    const flag = await call(
      api.POST('/api/flags', {
        body: {
          key,
          serviceId,
          projectId,
          name: String(data.get('name') ?? '').trim() || key,
          description: String(data.get('description') ?? ''),
          type,
          defaultValue: parsed.value,
          tags: parseTags(String(data.get('tags') ?? '')),
          ...(environment ? { environment: environment as Environment } : {}),
        },
      }),
    );
    activation(projectId, 'flag_created');
    // Created everywhere: the flag page says so, and that rules saved there apply to that environment only.
    navigate(flagHref(projectId, flag.key, flag.serviceId, flag.environment, '', environment ? {} : { created: 'all' }));
  });

  const serviceList = services.data?.services ?? [];
  return (
    <>
      <h1>Create a flag</h1>
      <p>
        <Link href={`/projects/${encodeURIComponent(projectId)}/flags`}>Back to flags</Link>
      </p>
      <LoadState loading={services.loading} error={services.error}>
        {!canCreate ? (
          <p>{NEEDS['flags:create']}</p>
        ) : serviceList.length === 0 ? (
          <p>
            Flags belong to a service: <Link href={`/projects/${encodeURIComponent(projectId)}`}>create a service</Link> first.
          </p>
        ) : (
          <form onSubmit={onSubmit} noValidate className="inline-form">
            <LabelledControl label="Service" problem={error?.fieldError('serviceId')}>
              {(props) => (
                <select name="serviceId" defaultValue={serviceList.some((s) => s.id === preset) ? preset : serviceList[0].id} {...props}>
                  {serviceList.map((s) => (
                    <option key={s.id} value={s.id}>
                      {s.name}
                    </option>
                  ))}
                </select>
              )}
            </LabelledControl>
            <LabelledControl label="Environment" problem={error?.fieldError('environment')} hint="Each environment holds its own copy of the flag.">
              {(props) => (
                <select name="environment" defaultValue="" {...props}>
                  <option value="">All environments</option>
                  {ENVIRONMENTS.map((env) => (
                    <option key={env} value={env}>
                      Only {environmentOption(env)}
                    </option>
                  ))}
                </select>
              )}
            </LabelledControl>
            <Field
              label="Key"
              name="key"
              required
              maxLength={128}
              autoComplete="off"
              spellCheck={false}
              error={error}
              hint="What code evaluates: letters, digits, '.', '_' and '-'. It cannot be changed later."
            />
            <Field label="Name" name="name" maxLength={200} error={error} hint="Shown in the console; the key when left empty." />
            <LabelledControl label="Description" problem={error?.fieldError('description')}>
              {(props) => <textarea name="description" rows={3} maxLength={4000} {...props} />}
            </LabelledControl>
            <LabelledControl label="Type" problem={error?.fieldError('type')}>
              {(props) => (
                <select
                  name="type"
                  value={type}
                  onChange={(e) => {
                    const next = e.target.value as FlagType;
                    setType(next);
                    setDefaultText(formatValue(next, defaultFor(next)));
                    setLocalProblem(undefined);
                  }}
                  {...props}
                >
                  {FLAG_TYPES.map((t) => (
                    <option key={t}>{t}</option>
                  ))}
                </select>
              )}
            </LabelledControl>
            <LabelledControl label="Default value" problem={localProblem ?? error?.fieldError('defaultValue')} hint="Served when the flag is off or no rule applies.">
              {(props) => <ValueInput type={type} value={defaultText} onChange={setDefaultText} {...props} />}
            </LabelledControl>
            <Field label="Tags" name="tags" maxLength={2000} error={error} hint="Comma-separated, e.g. checkout, beta" />
            <FormError error={error} fields={FIELDS} />
            <SubmitButton busy={busy}>Create flag</SubmitButton>
          </form>
        )}
      </LoadState>
    </>
  );
}

import { useId } from 'react';
import { useLocation, useSearch } from 'wouter';
import { ENVIRONMENTS, isEnvironment, type Environment } from '../../api/environments';
import { useServices } from '../../api/resources';


/** Which copy of a flag a page is about: `?serviceId=…&environment=…` (development when absent, like the API). */
export function useFlagScope(): { serviceId: string; environment: Environment; search: URLSearchParams } {
  const search = new URLSearchParams(useSearch());
  const env = search.get('environment');
  return {
    serviceId: search.get('serviceId') ?? '',
    environment: isEnvironment(env) ? env : 'development',
    search,
  };
}

/** `?serviceId=…&environment=…` for links between a flag's pages. */
export function scopeQuery(serviceId: string, environment: Environment): string {
  return new URLSearchParams({ serviceId, environment }).toString();
}

/**
 * The service and environment a flag page shows, as two selects that rewrite the address (so the
 * choice survives a reload and can be shared). Without a service in the address, the first one is
 * not guessed: the page asks.
 */
export function FlagScopePicker({ projectId }: { projectId: string }) {
  const id = useId();
  const { serviceId, environment, search } = useFlagScope();
  const [location, navigate] = useLocation();
  const services = useServices(projectId);

  function choose(name: 'serviceId' | 'environment', value: string) {
    const next = new URLSearchParams(search);
    next.set(name, value);
    next.delete('offset');
    navigate(`${location}?${next.toString()}`, { replace: true });
  }

  return (
    <div className="scope-picker">
      <div className="field">
        <label htmlFor={`${id}-service`}>Service</label>
        <select id={`${id}-service`} value={serviceId} onChange={(e) => choose('serviceId', e.target.value)} aria-busy={services.loading || undefined}>
          {!serviceId && <option value="">Choose a service…</option>}
          {serviceId && !services.data?.services.some((s) => s.id === serviceId) && <option value={serviceId}>{serviceId}</option>}
          {services.data?.services.map((service) => (
            <option key={service.id} value={service.id}>
              {service.name}
            </option>
          ))}
        </select>
        {services.error && <p className="field-error">Services could not be loaded: {services.error.message}</p>}
      </div>
      <div className="field">
        <label htmlFor={`${id}-environment`}>Environment</label>
        <select id={`${id}-environment`} value={environment} onChange={(e) => choose('environment', e.target.value)}>
          {ENVIRONMENTS.map((env) => (
            <option key={env} value={env}>
              {env}
            </option>
          ))}
        </select>
      </div>
    </div>
  );
}

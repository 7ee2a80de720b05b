/**
 * The project's release safety: start a canary, the canaries running and recent (each links to
 * its live timeline), and the way to the guardrail checks. A link from a flag's release page
 * pre-fills the form (?flag=&serviceId=&environment=).
 */
import { Link, useParams, useSearch } from 'wouter';
import { useServices } from '../../api/resources';
import { CanaryList } from '../../components/releases/canary-list';
import { StartCanaryForm } from '../../components/releases/start-canary-form';

export default function Releases() {
  const { projectId } = useParams<{ projectId: string }>();
  const search = new URLSearchParams(useSearch());
  const services = useServices(projectId);
  const serviceNames = new Map(services.data?.services.map((s) => [s.id, s.name]));
  return (
    <>
      <h1>Releases</h1>
      <p>
        Canaries ramp a rule through gated stages; guardrails judge every production change.{' '}
        <Link href={`/projects/${encodeURIComponent(projectId)}/releases/guardrails`}>Guardrail checks and rollbacks</Link>
      </p>
      <CanaryList projectId={projectId} serviceNames={serviceNames} />
      <StartCanaryForm
        key={search.get('flag') ?? ''}
        projectId={projectId}
        initial={{ flag: search.get('flag') ?? undefined, serviceId: search.get('serviceId') ?? undefined, environment: search.get('environment') ?? undefined }}
      />
    </>
  );
}

import { Link, useParams } from 'wouter';
import { api, call } from '../api/client';
import { useServices } from '../api/resources';
import { Field, FormError, RefusedButton, SubmitButton, useSubmit } from '../components/forms';
import { DataTable } from '../components/data-table';
import { NEEDS, useProjectAccess } from '../components/settings/access';
import { LoadState } from '../components/status';

/** A project's overview: its services (each SDK or app that evaluates flags) and creating one. */
export default function ProjectHome() {
  const { projectId } = useParams<{ projectId: string }>();
  const access = useProjectAccess(projectId);
  const project = access.project;
  const services = useServices(projectId);
  const { busy, error, onSubmit } = useSubmit(async (data, form) => {
    await call(api.POST('/api/services', { body: { projectId, name: String(data.get('name')) } }));
    form.reset();
    await services.reload();
  });

  return (
    <>
      <h1>{project?.name ?? 'Project'}</h1>
      {project?.description && <p>{project.description}</p>}
      <section aria-labelledby="services">
        <h2 id="services">Services</h2>
        <LoadState loading={services.loading} error={services.error}>
          <DataTable
            frame={null}
            caption="Services of this project"
            rows={services.data?.services ?? []}
            rowKey={(service) => service.id}
            empty="No services yet: create one for each app or SDK that evaluates this project's flags."
            columns={[
              { header: 'Name', cell: (service) => service.name },
              { header: 'Slug', cell: (service) => <code>{service.slug}</code> },
              { header: 'Created', cell: (service) => new Date(service.createdAt).toLocaleDateString() },
              {
                header: 'SDK',
                cell: (service) => (
                  <Link href={`/projects/${encodeURIComponent(projectId)}/services/${encodeURIComponent(service.id)}/connect`} aria-label={`Connect an SDK to ${service.name}`}>
                    Connect an SDK
                  </Link>
                ),
              },
            ]}
          />
        </LoadState>
      </section>
      <section aria-labelledby="create-service">
        <h2 id="create-service">Create a service</h2>
        {access.can('services:write') ? (
          <form onSubmit={onSubmit} noValidate className="inline-form">
            <Field label="Service name" name="name" required maxLength={200} error={error} />
            <FormError error={error} fields={['name']} />
            <SubmitButton busy={busy}>Create service</SubmitButton>
          </form>
        ) : (
          <RefusedButton className="primary" reason={NEEDS['services:write']}>
            Create service
          </RefusedButton>
        )}
      </section>
    </>
  );
}

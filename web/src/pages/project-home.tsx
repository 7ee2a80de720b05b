import { useParams } from 'wouter';
import { api, call } from '../api/client';
import { useServices } from '../api/resources';
import { Field, FormError, SubmitButton, useSubmit } from '../components/forms';
import { LoadState } from '../components/status';
import { useSession } from '../session';

/** A project's overview: its services (each SDK or app that evaluates flags) and creating one. */
export default function ProjectHome() {
  const { projectId } = useParams<{ projectId: string }>();
  const session = useSession();
  const project = session.projects.find((p) => p.id === projectId);
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
          {services.data?.services.length ? (
            <table>
              <caption className="visually-hidden">Services of this project</caption>
              <thead>
                <tr>
                  <th scope="col">Name</th>
                  <th scope="col">Slug</th>
                  <th scope="col">Created</th>
                </tr>
              </thead>
              <tbody>
                {services.data.services.map((service) => (
                  <tr key={service.id}>
                    <td>{service.name}</td>
                    <td>
                      <code>{service.slug}</code>
                    </td>
                    <td>{new Date(service.createdAt).toLocaleDateString()}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          ) : (
            <p>No services yet: create one for each app or SDK that evaluates this project's flags.</p>
          )}
        </LoadState>
      </section>
      <section aria-labelledby="create-service">
        <h2 id="create-service">Create a service</h2>
        <form onSubmit={onSubmit} noValidate className="inline-form">
          <Field label="Service name" name="name" required maxLength={200} error={error} />
          <FormError error={error} fields={['name']} />
          <SubmitButton busy={busy}>Create service</SubmitButton>
        </form>
      </section>
    </>
  );
}

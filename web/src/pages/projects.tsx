import { Link, useLocation } from 'wouter';
import { api, call } from '../api/client';
import { Field, FormError, SubmitButton, useSubmit } from '../components/forms';
import { useSession } from '../session';

/** The projects of the organization chosen in the header, and creating one there. */
export default function Projects() {
  const session = useSession();
  const [, navigate] = useLocation();
  const org = session.orgs.find((o) => o.id === session.orgId);
  const projects = session.projects.filter((p) => p.orgId === session.orgId);
  const canCreate = org?.role === 'owner' || org?.role === 'admin';
  const { busy, error, onSubmit } = useSubmit(async (form) => {
    const description = String(form.get('description') ?? '').trim();
    const project = await call(api.POST('/api/projects', { body: { name: String(form.get('name')), orgId: session.orgId, ...(description ? { description } : {}) } }));
    await session.reload();
    navigate(`/projects/${encodeURIComponent(project.id)}`);
  });

  return (
    <>
      <h1>Projects{org ? ` in ${org.name}` : ''}</h1>
      {projects.length ? (
        <ul className="cards">
          {projects.map((project) => (
            <li key={project.id} className="card">
              <Link href={`/projects/${encodeURIComponent(project.id)}`}>{project.name}</Link>
              <p className="muted">
                {project.slug}
                {project.role ? ` · ${project.role}` : ''}
              </p>
              {project.description && <p>{project.description}</p>}
            </li>
          ))}
        </ul>
      ) : (
        <p>No projects here yet.</p>
      )}
      {canCreate && (
        <section aria-labelledby="create-project">
          <h2 id="create-project">Create a project</h2>
          <form onSubmit={onSubmit} noValidate className="inline-form">
            <Field label="Project name" name="name" required maxLength={200} error={error} />
            <Field label="Description" name="description" error={error} />
            <FormError error={error} fields={['name', 'description']} />
            <SubmitButton busy={busy}>Create project</SubmitButton>
          </form>
        </section>
      )}
    </>
  );
}

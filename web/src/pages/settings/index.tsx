import { Link, useParams } from 'wouter';
import { PROJECT_SECTION_DESCRIPTIONS, projectSections } from '../../components/settings/section-nav';
import { SettingsPage } from '../../components/settings/settings-page';
import { useProjectAccess } from '../../components/settings/access';

/** The project's settings: one card per section. */
export default function Settings() {
  const { projectId } = useParams<{ projectId: string }>();
  const { project, role } = useProjectAccess(projectId);
  return (
    <SettingsPage title={`Settings${project ? ` of ${project.name}` : ''}`} projectId={projectId} intro={role && <p className="muted">Your role in this project: {role}.</p>}>
      <ul className="cards">
        {projectSections(projectId).map((section) => (
          <li key={section.path} className="card">
            <Link href={section.href}>{section.label}</Link>
            <p>{PROJECT_SECTION_DESCRIPTIONS[section.path]}</p>
          </li>
        ))}
      </ul>
      <p>
        Your own credentials are under <Link href="/account/tokens">Account</Link>: personal tokens and MCP connections.
      </p>
    </SettingsPage>
  );
}

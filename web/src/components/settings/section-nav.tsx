/** The tabs between settings sections: the project's, and the user's own (account). */
import { Link, useLocation } from 'wouter';

const PROJECT_SECTIONS = [
  { path: 'members', label: 'Members' },
  { path: 'tokens', label: 'API tokens' },
  { path: 'webhooks', label: 'Webhooks' },
  { path: 'alert-channels', label: 'Alert channels' },
  { path: 'triggers', label: 'Triggers' },
  { path: 'change-policy', label: 'Change policy' },
] as const;

export const PROJECT_SECTION_DESCRIPTIONS: Record<(typeof PROJECT_SECTIONS)[number]['path'], string> = {
  members: 'Who works in this project and with which role; invitations by e-mail.',
  tokens: 'Project API tokens for servers, CI and the management API.',
  webhooks: 'HTTP callbacks on flag changes, with their delivery log.',
  'alert-channels': "Where the organization's alerts go: chat, paging, e-mail or a webhook.",
  triggers: 'URLs that enable, disable or toggle one flag (for incident tooling).',
  'change-policy': 'Which environments need approved change requests, and whose approvals count.',
};

const ACCOUNT_SECTIONS = [
  { path: '/account/tokens', label: 'Personal tokens' },
  { path: '/account/connections', label: 'MCP connections' },
] as const;

export function projectSections(projectId: string) {
  return PROJECT_SECTIONS.map((s) => ({ ...s, href: `/projects/${encodeURIComponent(projectId)}/settings/${s.path}` }));
}

function Tabs({ label, items }: { label: string; items: { href: string; label: string }[] }) {
  const [location] = useLocation();
  return (
    <nav aria-label={label} className="st-tabs">
      <ul>
        {items.map((item) => (
          <li key={item.href}>
            <Link href={item.href} aria-current={location === item.href || location.startsWith(`${item.href}/`) ? 'page' : undefined}>
              {item.label}
            </Link>
          </li>
        ))}
      </ul>
    </nav>
  );
}

export function SettingsTabs({ projectId }: { projectId: string }) {
  return <Tabs label="Project settings" items={projectSections(projectId)} />;
}

export function AccountTabs() {
  return <Tabs label="Account" items={ACCOUNT_SECTIONS.map((s) => ({ href: s.path, label: s.label }))} />;
}

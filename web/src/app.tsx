/**
 * The shell: header (organization and project switchers, the flag search, the user, sign out), the navigation
 * built from the routes table, and the current screen. Screen does what every page needs: the
 * access rule, the document title, moving focus to the new page, screen_viewed, and a boundary
 * that keeps a page that fails to load (page-boundary.tsx) from blanking the console.
 */
import { Suspense, useEffect, useState, type ReactNode } from 'react';
import { Link, Redirect, Route, Switch, useLocation, useParams, useRoute, useSearch } from 'wouter';
import { api, asApiError, call } from './api/client';
import { nextTarget } from './navigation';
import { FlagSearch } from './components/search/flag-search';
import { PageBoundary } from './page-boundary';
import { documentTitle, TitleContext } from './page-title';
import { hrefOf, routes, type ConsoleRoute } from './routes';
import { SessionProvider, useSession } from './session';
import { screenViewed } from './telemetry';

export function App() {
  return (
    <SessionProvider>
      <a className="skip-link" href="#main">
        Skip to content
      </a>
      <Header />
      <VerifyReminder />
      <div className="layout">
        <Nav />
        <main id="main" tabIndex={-1}>
          <Suspense fallback={<p role="status" className="muted">Loading…</p>}>
            <Switch>
              {routes.map((route) => (
                <Route key={route.path} path={route.path}>
                  <Screen route={route} />
                </Route>
              ))}
              <Route path="/">
                <Home />
              </Route>
              <Route>
                <NotFound />
              </Route>
            </Switch>
          </Suspense>
        </main>
      </div>
    </SessionProvider>
  );
}

/** The project in the address (`/projects/:projectId/...`), which the switcher and project links follow. */
function useCurrentProjectId(): string | undefined {
  const [exact, params] = useRoute<{ projectId: string }>('/projects/:projectId');
  const [nested, nestedParams] = useRoute<{ projectId: string }>('/projects/:projectId/*');
  return exact ? params.projectId : nested ? nestedParams.projectId : undefined;
}

function Screen({ route }: { route: ConsoleRoute }) {
  const session = useSession();
  const [location] = useLocation();
  const search = useSearch();
  const { projectId } = useParams<{ projectId?: string }>();
  const Page = route.page;
  const allowed = session.status === 'loading' ? undefined : route.access === 'public' || (route.access === 'user') === (session.status === 'signed-in');
  // What the page says of itself (useTitle), else the route's title.
  const [pageTitle, setPageTitle] = useState<string | undefined>();
  const title = pageTitle ?? route.title;

  useEffect(() => {
    if (allowed) document.title = documentTitle(title);
  }, [allowed, title]);

  useEffect(() => {
    if (!allowed) return;
    screenViewed(route.screen, projectId);
    // After a navigation in the app, keyboard and screen-reader users start at the new page, not
    // at the link they left; a page just loaded keeps the browser's start (the skip link first).
    if (navigatedInApp()) document.getElementById('main')?.focus({ preventScroll: true });
  }, [allowed, route, projectId]);

  if (allowed === undefined) return <p role="status" className="muted">Loading…</p>;
  if (!allowed) {
    if (route.access === 'user') return <Redirect to={`/signin?next=${encodeURIComponent(location + (search ? `?${search}` : ''))}`} replace />;
    return <Redirect to={nextTarget(search)} replace />;
  }
  return (
    <TitleContext.Provider value={setPageTitle}>
      <PageBoundary page={Page} at={location}>
        <Page />
      </PageBoundary>
    </TitleContext.Provider>
  );
}

const loadedAt = location.pathname + location.search;
let navigated = false;
function navigatedInApp(): boolean {
  navigated ||= location.pathname + location.search !== loadedAt;
  return navigated;
}

function Home() {
  const session = useSession();
  if (session.status === 'loading') return <p role="status" className="muted">Loading…</p>;
  return <Redirect to={session.status === 'signed-in' ? '/projects' : '/signin'} replace />;
}

function NotFound() {
  return (
    <>
      <h1>Page not found</h1>
      <p>
        There is no page here. <Link href="/">Go to the start</Link>.
      </p>
    </>
  );
}

function Header() {
  const session = useSession();
  const [location, navigate] = useLocation();
  const projectId = useCurrentProjectId();

  async function signOut() {
    await call(api.POST('/api/auth/logout')).catch(() => undefined);
    await session.reload();
    navigate('/signin');
  }

  return (
    <header className="topbar">
      <Link href="/" className="brand">
        Flagship
      </Link>
      {session.status === 'signed-in' && (
        <>
          <Switchers projectId={projectId} />
          <FlagSearch />
          <div className="user">
            <span className="muted" title={session.user?.email}>
              {session.user?.name}
            </span>
            <button type="button" onClick={() => void signOut()}>
              Sign out
            </button>
          </div>
        </>
      )}
      {session.status === 'signed-out' && (
        // Visitors without an account can still see what the service does: the live demo grid.
        <div className="user">
          <Link href="/demo" aria-current={location === '/demo' ? 'page' : undefined}>
            Public demo
          </Link>
          <Link href="/signin" aria-current={location === '/signin' ? 'page' : undefined}>
            Sign in
          </Link>
        </div>
      )}
    </header>
  );
}

/** Until the address is verified (invitations and some actions need it): a way to get a new mail. */
function VerifyReminder() {
  const session = useSession();
  const [sent, setSent] = useState<string | undefined>();
  if (session.status !== 'signed-in' || session.user?.emailVerified) return null;
  async function resend() {
    try {
      await call(api.POST('/api/auth/resend-verification'));
      setSent(`A new verification mail is on its way to ${session.user?.email}.`);
    } catch (error) {
      setSent(asApiError(error).message);
    }
  }
  return (
    <div className="banner" role="region" aria-label="E-mail verification">
      <span>Your e-mail address is not verified yet: open the link in the mail we sent.</span>{' '}
      <button type="button" onClick={() => void resend()}>
        Send the mail again
      </button>{' '}
      <span role="status">{sent}</span>
    </div>
  );
}

/** The same screen of another project (`/projects/A/flags` -> `/projects/B/flags`); its overview otherwise. */
function switchedProjectPath(location: string, projectId: string): string {
  const rest = /^\/projects\/[^/]+(\/[^?]*)?/.exec(location)?.[1] ?? '';
  // Deeper than a project page (one flag, one canary) names things of the old project: stop at its list.
  const screen = rest.split('/').slice(0, 2).join('/');
  return `/projects/${encodeURIComponent(projectId)}${screen}`;
}

function Switchers({ projectId }: { projectId?: string }) {
  const session = useSession();
  const [location, navigate] = useLocation();
  const current = session.projects.find((p) => p.id === projectId);
  // The organization follows the project being looked at; otherwise the one last chosen.
  const orgId = current?.orgId ?? session.orgId;
  const inOrg = session.projects.filter((p) => p.orgId === orgId);
  return (
    <div className="switchers">
      <label>
        <span>Organization</span>
        <select
          value={orgId ?? ''}
          onChange={(e) => {
            session.selectOrg(e.target.value);
            navigate('/projects');
          }}
        >
          {session.orgs.map((org) => (
            <option key={org.id} value={org.id}>
              {org.name}
            </option>
          ))}
        </select>
      </label>
      <label>
        <span>Project</span>
        <select value={current?.id ?? ''} onChange={(e) => navigate(e.target.value ? switchedProjectPath(location, e.target.value) : '/projects')}>
          <option value="">{inOrg.length ? 'All projects' : 'No projects yet'}</option>
          {inOrg.map((project) => (
            <option key={project.id} value={project.id}>
              {project.name}
            </option>
          ))}
        </select>
      </label>
    </div>
  );
}

function Nav() {
  const session = useSession();
  const projectId = useCurrentProjectId();
  const [location] = useLocation();
  if (session.status !== 'signed-in') return null;
  const links = routes
    .filter((r) => r.nav && (r.nav.scope === 'global' || projectId))
    .sort((a, b) => (a.nav!.scope === b.nav!.scope ? a.nav!.order - b.nav!.order : a.nav!.scope === 'global' ? -1 : 1));
  const item = (route: ConsoleRoute): ReactNode => {
    const href = hrefOf(route, projectId)!;
    return (
      <li key={route.path}>
        <Link href={href} aria-current={location === href ? 'page' : undefined}>
          {route.nav!.label}
        </Link>
      </li>
    );
  };
  return (
    <nav aria-label="Console">
      <ul>{links.filter((r) => r.nav!.scope === 'global').map(item)}</ul>
      {projectId && (
        <>
          <h2 className="nav-heading">Project</h2>
          <ul>{links.filter((r) => r.nav!.scope === 'project').map(item)}</ul>
        </>
      )}
    </nav>
  );
}

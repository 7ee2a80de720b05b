/**
 * Who is signed in, their organizations and projects, and the current organization: what the
 * header's switchers and every signed-in page read. Pages that create a project or accept an
 * invitation call `reload()` so the switchers see it.
 */
import { createContext, useCallback, useContext, useEffect, useMemo, useState, type ReactNode } from 'react';
import { api, call, onUnauthorized, type paths } from './api/client';
import { setTelemetryUser } from './telemetry';

type Json<P extends keyof paths, M extends 'get'> = paths[P][M] extends { responses: { 200: { content: { 'application/json': infer T } } } } ? T : never;
type MemberOrg = Json<'/api/orgs', 'get'>['orgs'][number];
/**
 * An organization in the switcher: one the user belongs to (with their role), or one they only
 * reach through a project shared with them (an invitation to a project is not to its
 * organization, whose name they cannot read): no role.
 */
export interface Org {
  id: string;
  name: string;
  role?: MemberOrg['role'];
}
export type Project = Json<'/api/projects', 'get'>['projects'][number];

export interface Session {
  status: 'loading' | 'signed-out' | 'signed-in';
  user?: { id: string; email: string; name: string; emailVerified: boolean };
  orgs: Org[];
  projects: Project[];
  /** The organization the switcher shows (kept across visits); projects are listed within it. */
  orgId?: string;
  selectOrg(orgId: string): void;
  /** Asks the server again (after sign-in, sign-out, a new project, an accepted invitation). */
  reload(): Promise<void>;
}

const SessionContext = createContext<Session | undefined>(undefined);
const ORG_KEY = 'flagship.console.org';

function rememberedOrg(): string | undefined {
  try {
    return localStorage.getItem(ORG_KEY) ?? undefined;
  } catch {
    return undefined;
  }
}

export function SessionProvider({ children }: { children: ReactNode }) {
  const [state, setState] = useState<Pick<Session, 'status' | 'user' | 'orgs' | 'projects'>>({ status: 'loading', orgs: [], projects: [] });
  const [chosenOrg, setChosenOrg] = useState<string | undefined>(rememberedOrg);

  const reload = useCallback(async () => {
    // /api/users/me documents no body (its shape depends on the credential): a session's is the user.
    const me = (await call(api.GET('/api/users/me')).catch(() => undefined)) as Session['user'] | { credential: unknown } | undefined;
    const user = me && 'id' in me ? me : undefined;
    setTelemetryUser(user?.id);
    if (!user) {
      setState({ status: 'signed-out', orgs: [], projects: [] });
      return;
    }
    const [{ orgs }, { projects }] = await Promise.all([call(api.GET('/api/orgs')), call(api.GET('/api/projects'))]);
    const shared = [...new Set(projects.map((p) => p.orgId))].filter((id) => !orgs.some((o) => o.id === id));
    const sharedOrgs = shared.map((id, i) => ({ id, name: shared.length > 1 ? `Shared with you (${i + 1})` : 'Shared with you' }));
    setState({ status: 'signed-in', user, orgs: [...orgs.map(({ id, name, role }) => ({ id, name, role })), ...sharedOrgs], projects });
  }, []);

  useEffect(() => {
    void reload();
    // A 401 anywhere means the session ended: the route guard then sends the user to sign in.
    onUnauthorized(() => setState({ status: 'signed-out', orgs: [], projects: [] }));
  }, [reload]);

  const value = useMemo<Session>(() => {
    // Without a (still valid) choice: the first organization that has projects.
    const orgId = state.orgs.some((o) => o.id === chosenOrg) ? chosenOrg : (state.orgs.find((o) => state.projects.some((p) => p.orgId === o.id)) ?? state.orgs[0])?.id;
    return {
      ...state,
      orgId,
      selectOrg(id: string) {
        setChosenOrg(id);
        try {
          localStorage.setItem(ORG_KEY, id);
        } catch {
          // Storage refused: the choice lasts for this page only.
        }
      },
      reload,
    };
  }, [state, chosenOrg, reload]);

  return <SessionContext.Provider value={value}>{children}</SessionContext.Provider>;
}

export function useSession(): Session {
  const session = useContext(SessionContext);
  if (!session) throw new Error('useSession outside SessionProvider');
  return session;
}

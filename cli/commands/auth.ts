import { Option, type Command } from 'commander';
import { ApiClient } from '../api';
import { DEFAULT_SERVER, deleteCredentials, normalizeServer, readStoredCredentials, storeCredentials } from '../credentials';
import { waitForBrowserLogin } from '../login';
import type { Output } from '../output';
import { positiveInt, type Session } from './flags';

/** GET /api/users/me as a personal token sees it: the user's fields and the credential. */
interface Me {
  id: string;
  email: string;
  name: string;
  credential: { type: string; id?: string; tier?: string };
}

export function authCommands(program: Command, session: Session, output: (cmd: Command) => Output): void {
  program
    .command('login')
    .description('log in through the browser: a write personal token for 90 days, stored for this user only')
    .option('--no-browser', 'only print the URL to open')
    .addOption(new Option('--timeout <seconds>', 'how long to wait for the approval').default(300).argParser(positiveInt))
    .action(async (opts: { browser: boolean; timeout: number }, cmd: Command) => {
      const out = output(cmd);
      const globals = cmd.optsWithGlobals<{ server?: string }>();
      const server = normalizeServer(globals.server ?? process.env.FLAGSHIP_SERVER ?? readStoredCredentials()?.server ?? DEFAULT_SERVER);
      const token = await waitForBrowserLogin({ server, openBrowser: opts.browser, timeoutMs: opts.timeout * 1000, say: out.say });
      const me = await new ApiClient(server, token).get<Me>('/api/users/me');
      const file = storeCredentials({ server, token });
      out.result({ server, user: { id: me.id, email: me.email, name: me.name }, credential: me.credential, credentialsFile: file }, () =>
        out.line(`Logged in to ${server} as ${me.email} (write personal token, 90 days). Saved to ${file}`),
      );
    });

  program
    .command('logout')
    .description('forget the stored token (revoke it under your personal tokens to end it on the server)')
    .action((_opts: unknown, cmd: Command) => {
      const out = output(cmd);
      const removed = deleteCredentials();
      out.result({ removed }, () => out.line(removed ? 'Logged out.' : 'Not logged in.'));
    });

  program
    .command('whoami')
    .description('the user and credential the CLI acts as')
    .action(async (_opts: unknown, cmd: Command) => {
      const { api, out } = session(cmd);
      const me = await api.get<Me>('/api/users/me');
      out.result({ server: api.server, user: { id: me.id, email: me.email, name: me.name }, credential: me.credential }, () => out.line(`${me.email} on ${api.server} (${me.credential.type}${me.credential.tier ? `, ${me.credential.tier}` : ''})`));
    });
}

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { CliError } from './errors';

export interface Credentials {
  server: string;
  token: string;
}

export const DEFAULT_SERVER = 'http://127.0.0.1:3000';

/** `$XDG_CONFIG_HOME/flagship`, else `~/.config/flagship`. */
export function configDir(env: NodeJS.ProcessEnv = process.env): string {
  const base = env.XDG_CONFIG_HOME && path.isAbsolute(env.XDG_CONFIG_HOME) ? env.XDG_CONFIG_HOME : path.join(os.homedir(), '.config');
  return path.join(base, 'flagship');
}

export const credentialsPath = (env: NodeJS.ProcessEnv = process.env) => path.join(configDir(env), 'credentials.json');

/** What `flagship login` stored, or null. */
export function readStoredCredentials(env: NodeJS.ProcessEnv = process.env): Credentials | null {
  let text: string;
  try {
    text = fs.readFileSync(credentialsPath(env), 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw error;
  }
  const parsed = JSON.parse(text) as Partial<Credentials>;
  return typeof parsed.server === 'string' && typeof parsed.token === 'string' ? { server: parsed.server, token: parsed.token } : null;
}

/**
 * The credentials a command uses: FLAGSHIP_TOKEN and FLAGSHIP_SERVER override the stored ones,
 * `--server` overrides both servers. Null without a token.
 */
export function resolveCredentials(opts: { server?: string }, env: NodeJS.ProcessEnv = process.env): Credentials | null {
  const stored = readStoredCredentials(env);
  const token = env.FLAGSHIP_TOKEN || stored?.token;
  if (!token) return null;
  return { token, server: normalizeServer(opts.server ?? env.FLAGSHIP_SERVER ?? stored?.server ?? DEFAULT_SERVER) };
}

/**
 * Writes the credentials readable by the user only: the directory 0700, the file 0600, through a
 * temporary file renamed over the old one (never a moment with the token world-readable).
 */
export function storeCredentials(credentials: Credentials, env: NodeJS.ProcessEnv = process.env): string {
  const dir = configDir(env);
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  fs.chmodSync(dir, 0o700);
  const file = credentialsPath(env);
  const temporary = `${file}.${process.pid}.tmp`;
  fs.writeFileSync(temporary, `${JSON.stringify(credentials, null, 2)}\n`, { mode: 0o600, flag: 'wx' });
  fs.renameSync(temporary, file);
  return file;
}

/** Deletes the stored credentials; false when there were none. */
export function deleteCredentials(env: NodeJS.ProcessEnv = process.env): boolean {
  try {
    fs.unlinkSync(credentialsPath(env));
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw error;
  }
}

/** The server's origin and base path without a trailing slash. */
export function normalizeServer(server: string): string {
  let url: URL;
  try {
    url = new URL(server);
  } catch {
    throw new CliError(`the server must be an http(s) URL, not ${server}`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new CliError(`the server must be an http(s) URL, not ${server}`);
  return url.toString().replace(/\/+$/, '');
}

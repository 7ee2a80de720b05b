import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { CliError } from './errors';

/** What the server hands over (docs/api-reference.md#personal-access-tokens). */
const PERSONAL_TOKEN = /^fgp_[0-9a-f]{64}$/;
const MAX_CALLBACK_BODY = 16 * 1024;
const CALLBACK_PATH = '/callback';

export interface LoginOptions {
  server: string;
  /** Opens the approval URL in a browser; false only prints it. */
  openBrowser: boolean;
  timeoutMs: number;
  /** Progress for people (stderr). */
  say(line: string): void;
}

/**
 * The CLI side of the login flow (docs/api-reference.md#cli-login): a listener on 127.0.0.1 and a
 * random port, the approval URL naming it as callback with a random state, then the browser's form
 * POST of `token` and `state`. Answers with the token; an answer with another state is ignored.
 */
export async function waitForBrowserLogin(opts: LoginOptions): Promise<string> {
  const state = randomBytes(32).toString('base64url');
  let settle!: { resolve(token: string): void; reject(error: Error): void };
  const outcome = new Promise<string>((resolve, reject) => (settle = { resolve, reject }));
  const listener = http.createServer((req, res) => {
    handleCallback(req, res, state).then(
      (result) => {
        if (result.kind === 'token') settle.resolve(result.token);
        else if (result.kind === 'denied') settle.reject(new CliError('The login was denied in the browser'));
      },
      () => page(res, 400, 'The CLI could not read this answer.'),
    );
  });
  await new Promise<void>((resolve, reject) => {
    listener.once('error', reject);
    listener.listen(0, '127.0.0.1', resolve);
  });
  const { port } = listener.address() as AddressInfo;
  const approvalUrl = new URL('/auth/cli', opts.server + '/');
  approvalUrl.searchParams.set('callback', `http://127.0.0.1:${port}${CALLBACK_PATH}`);
  approvalUrl.searchParams.set('state', state);
  opts.say(`Approve the login in your browser: ${approvalUrl}`);
  if (opts.openBrowser) openInBrowser(approvalUrl.toString(), opts.say);
  opts.say('Waiting for the approval…');
  const timer = setTimeout(() => settle.reject(new CliError(`No approval within ${Math.round(opts.timeoutMs / 1000)} s; run \`flagship login\` again`)), opts.timeoutMs);
  try {
    return await outcome;
  } finally {
    clearTimeout(timer);
    listener.closeAllConnections();
    await new Promise((resolve) => listener.close(resolve));
  }
}

type CallbackResult = { kind: 'token'; token: string } | { kind: 'denied' } | { kind: 'ignored' };

async function handleCallback(req: http.IncomingMessage, res: http.ServerResponse, state: string): Promise<CallbackResult> {
  if (new URL(req.url ?? '/', 'http://127.0.0.1').pathname !== CALLBACK_PATH) {
    page(res, 404, 'Not found.');
    return { kind: 'ignored' };
  }
  if (req.method !== 'POST' || !String(req.headers['content-type'] ?? '').startsWith('application/x-www-form-urlencoded')) {
    page(res, 405, 'The CLI expects the form POST of the approval page.');
    return { kind: 'ignored' };
  }
  const form = new URLSearchParams(await readLimited(req, MAX_CALLBACK_BODY));
  if (form.get('state') !== state) {
    page(res, 400, 'This answer is not for the login this CLI started (state mismatch). Run `flagship login` again.');
    return { kind: 'ignored' };
  }
  if (form.get('error') === 'access_denied') {
    page(res, 200, 'Login denied. You can close this tab.');
    return { kind: 'denied' };
  }
  const token = form.get('token') ?? '';
  if (!PERSONAL_TOKEN.test(token)) {
    page(res, 400, 'The answer carries no valid token.');
    return { kind: 'ignored' };
  }
  page(res, 200, 'The flagship CLI is logged in. You can close this tab.');
  return { kind: 'token', token };
}

function readLimited(req: http.IncomingMessage, limit: number): Promise<string> {
  return new Promise((resolve, reject) => {
    let size = 0;
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        reject(new Error('callback body too large'));
        req.destroy();
      } else chunks.push(chunk);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

function page(res: http.ServerResponse, status: number, text: string) {
  if (res.headersSent) return;
  res.writeHead(status, {
    'content-type': 'text/html; charset=utf-8',
    'content-security-policy': "default-src 'none'; frame-ancestors 'none'",
    'cache-control': 'no-store',
    connection: 'close',
  });
  res.end(`<!doctype html><meta charset="utf-8"><title>flagship CLI</title><p>${text.replace(/[&<>]/g, (c) => `&#${c.charCodeAt(0)};`)}</p>`);
}

/** The platform's "open this URL" command, detached; a failure only says so (the URL is printed). */
function openInBrowser(url: string, say: (line: string) => void) {
  const [command, args] =
    process.platform === 'darwin' ? ['open', [url]] : process.platform === 'win32' ? ['rundll32', ['url.dll,FileProtocolHandler', url]] : ['xdg-open', [url]];
  try {
    const child = spawn(command, args, { detached: true, stdio: 'ignore' });
    child.on('error', () => say('Could not open a browser; open the URL above yourself.'));
    child.unref();
  } catch {
    say('Could not open a browser; open the URL above yourself.');
  }
}

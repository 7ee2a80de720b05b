import fs from 'node:fs';
import path from 'node:path';
import express, { type NextFunction, type Request, type RequestHandler, type Response } from 'express';
import type { Logger } from '../../infra/logger';

/**
 * Paths the console never answers, even for a browser asking for HTML: the API and every other
 * server route family keep their own answers (a JSON 404 envelope for an unknown /api path), and
 * the server's own HTML pages (/auth/cli, the OAuth consent at /api/oauth/authorize) stay theirs.
 */
const SERVER_PREFIXES = ['/api/', '/ingest/', '/mcp', '/auth/', '/oauth', '/.well-known/', '/assets/', '/e'];

export interface ConsoleSiteOptions {
  /** The built console (`vite build web` writes dist/web): index.html and assets/. */
  dir: string;
  /** Origins besides 'self' the console's scripts may connect to (CSP connect-src). */
  connectSrc: string[];
  logger: Logger;
}

/**
 * The web console on the control plane: hashed files under /assets/ cached for a year
 * as immutable, and index.html, never cached without revalidation, for every other GET a
 * browser navigates to (`/`, `/projects/...`, the mailed `/verify-email` and
 * `/invitations/accept` links), under a strict Content-Security-Policy. Runs after the API's
 * routes, so it only ever sees paths no route took. Undefined when the console is not built
 * (`npm run dev` from source): the API then works without it.
 *
 * Abuse: anyone may fetch it (it is public files), GET and HEAD only, no body read, counted in
 * the listener's per-IP rate limit like every request; serve-static refuses paths that leave
 * assets/ and dotfiles, and index.html is one buffer read at startup (no per-request disk I/O).
 */
export function consoleSite(opts: ConsoleSiteOptions): RequestHandler | undefined {
  const indexPath = path.join(opts.dir, 'index.html');
  if (!fs.existsSync(indexPath)) {
    opts.logger.warn({ dir: opts.dir }, 'the web console is not built (npm run build): / serves no console');
    return undefined;
  }
  // Read once: a new build comes with a restart, and its hashed asset names change with it.
  const index = fs.readFileSync(indexPath);
  const headers = consoleHeaders(opts.connectSrc);

  const assets = express.static(path.join(opts.dir, 'assets'), {
    immutable: true,
    maxAge: '365d',
    index: false,
    redirect: false,
    dotfiles: 'ignore',
    // A missing asset falls through to the JSON 404, never to index.html.
    fallthrough: true,
    setHeaders: (res) => res.setHeader('X-Content-Type-Options', 'nosniff'),
  });
  const router = express.Router();
  router.use('/assets', assets);
  router.use((req: Request, res: Response, next: NextFunction) => {
    if (!isPageRequest(req)) return next();
    res.status(200).set(headers).send(index);
  });
  return router;
}

/** A browser navigation to a console path: GET or HEAD, wants HTML, not a server route or a file. */
function isPageRequest(req: Request): boolean {
  if (req.method !== 'GET' && req.method !== 'HEAD') return false;
  if (SERVER_PREFIXES.some((prefix) => req.path === prefix.replace(/\/$/, '') || req.path.startsWith(prefix.endsWith('/') ? prefix : `${prefix}/`))) return false;
  // /favicon.ico, /robots.txt ...: a missing file is a 404, not the console.
  if (/\.[A-Za-z0-9]+$/.test(req.path)) return false;
  return req.accepts(['html', 'json']) === 'html';
}

/**
 * index.html's headers. The policy allows only the console's own files: no inline script or
 * style, no eval, no framing; connections to this origin (the API and /ingest/admin-events)
 * and the configured data-plane origins.
 */
export function consoleHeaders(connectSrc: string[]): Record<string, string> {
  const csp = [
    "default-src 'self'",
    "script-src 'self'",
    "style-src 'self'",
    "img-src 'self'",
    "font-src 'self'",
    `connect-src ${["'self'", ...new Set(connectSrc)].join(' ')}`,
    "object-src 'none'",
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
  ].join('; ');
  return {
    'Content-Type': 'text/html; charset=utf-8',
    'Cache-Control': 'no-cache',
    'Content-Security-Policy': csp,
    'X-Content-Type-Options': 'nosniff',
    'X-Frame-Options': 'DENY',
    'Referrer-Policy': 'same-origin',
    'Cross-Origin-Opener-Policy': 'same-origin',
  };
}

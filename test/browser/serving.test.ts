import fs from 'node:fs';
import { gzipSync } from 'node:zlib';
import { projectPath } from '../../api/infra/paths';
import { startTestApp, type TestApp } from '../support/harness';
import { requireBuiltConsole } from './support';

const HTML = { accept: 'text/html,application/xhtml+xml,*/*;q=0.8' };

let app: TestApp;
beforeAll(async () => {
  requireBuiltConsole();
  app = await startTestApp({ CONSOLE_CONNECT_SRC: 'https://data.example.com/any/path, https://ingest.example.com:8443' });
});
afterAll(async () => {
  await app?.stop();
});

function directives(csp: string | null): Map<string, string[]> {
  return new Map((csp ?? '').split(';').map((d) => d.trim().split(/\s+/)).filter((d) => d[0]).map(([name, ...values]) => [name, values]));
}

describe('the console served by the control plane', () => {
  it('answers / with index.html: no-cache, a strict Content-Security-Policy, no inline script', async () => {
    const res = await app.request('GET', '/', { headers: HTML });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/html/);
    expect(res.headers.get('cache-control')).toBe('no-cache');
    expect(res.headers.get('x-frame-options')).toBe('DENY');
    expect(res.headers.get('x-content-type-options')).toBe('nosniff');
    const csp = directives(res.headers.get('content-security-policy'));
    expect(csp.get('default-src')).toEqual(["'self'"]);
    expect(csp.get('script-src')).toEqual(["'self'"]);
    expect(csp.get('style-src')).toEqual(["'self'"]);
    expect(csp.get('object-src')).toEqual(["'none'"]);
    expect(csp.get('frame-ancestors')).toEqual(["'none'"]);
    expect(csp.get('base-uri')).toEqual(["'none'"]);
    // The configured origins (CONSOLE_CONNECT_SRC) as origins only, besides the console's own.
    expect(csp.get('connect-src')).toEqual(["'self'", 'https://data.example.com', 'https://ingest.example.com:8443']);
    expect(res.headers.get('content-security-policy')).not.toMatch(/unsafe-(inline|eval)|\*/);
    const scripts = [...res.text.matchAll(/<script\b([^>]*)>/g)].map((m) => m[1]);
    expect(scripts.length).toBeGreaterThan(0);
    for (const attributes of scripts) expect(attributes).toMatch(/\bsrc="\/assets\//);
  });

  it('serves the hashed assets as immutable for a year; a missing asset is a JSON 404', async () => {
    const index = await app.request('GET', '/', { headers: HTML });
    const assets = [...index.text.matchAll(/(?:src|href)="(\/assets\/[^"]+)"/g)].map((m) => m[1]);
    expect(assets.some((a) => a.endsWith('.js'))).toBe(true);
    expect(assets.some((a) => a.endsWith('.css'))).toBe(true);
    for (const asset of assets) {
      const res = await app.request('GET', asset);
      expect(res.status).toBe(200);
      expect(res.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
      expect(res.headers.get('content-type')).toMatch(asset.endsWith('.js') ? /javascript/ : /text\/css/);
    }
    const missing = await app.request('GET', '/assets/index-missing.js', { headers: HTML });
    expect(missing.status).toBe(404);
    expect(missing.body).toMatchObject({ error: expect.any(String), message: expect.any(String) });
    // Nothing outside the built assets is reachable through them.
    for (const path of ['/assets/..%2f..%2f..%2fpackage.json', '/assets/%2e%2e/%2e%2e/%2e%2e/package.json', '/assets/']) {
      const res = await app.request('GET', path);
      expect([path, [400, 403, 404].includes(res.status)]).toEqual([path, true]);
      expect(res.text).not.toContain('"devDependencies"');
    }
  });

  it('keeps the first load under 300 KB of gzipped JavaScript: the entry, what it preloads, the largest page', async () => {
    const index = await app.request('GET', '/', { headers: HTML });
    const initial = [...index.text.matchAll(/(?:src|href)="(\/assets\/[^"]+\.js)"/g)].map((m) => m[1].slice('/assets/'.length));
    const gzipped = (file: string) => gzipSync(fs.readFileSync(projectPath('dist', 'web', 'assets', file))).length;
    const pages = fs.readdirSync(projectPath('dist', 'web', 'assets')).filter((f) => f.endsWith('.js') && !initial.includes(f));
    const total = initial.reduce((sum, f) => sum + gzipped(f), 0) + Math.max(0, ...pages.map(gzipped));
    expect(total).toBeLessThan(300 * 1024);
  });

  it.each(['/projects', '/projects/prj_123/flags', '/verify-email?token=abc', '/invitations/accept?token=abc', '/signin?next=%2Fprojects'])(
    'answers the client route %s with the console',
    async (path) => {
      const res = await app.request('GET', path, { headers: HTML });
      expect(res.status).toBe(200);
      expect(res.text).toContain('<div id="root">');
    },
  );

  it('never shadows the server: unknown API paths keep the JSON 404 envelope, server pages stay theirs', async () => {
    for (const path of ['/api/nope', '/api', '/ingest/nope', '/mcp/nope', '/.well-known/nope', '/auth/nope', '/oauth/nope', '/favicon.ico']) {
      const res = await app.request('GET', path, { headers: HTML });
      expect([path, res.status]).toEqual([path, 404]);
      expect(res.body).toMatchObject({ error: expect.any(String), message: expect.any(String) });
    }
    // The MCP endpoint asks a browser for its credential, as before.
    const mcp = await app.request('GET', '/mcp', { headers: HTML });
    expect(mcp.status).toBe(401);
    expect(mcp.text).not.toContain('<div id="root">');
    // The CLI login page (api/http/html-page.ts) answers with its own page and policy.
    const cli = await app.request('GET', '/auth/cli?callback=http%3A%2F%2F127.0.0.1%3A9999%2Fcb&state=abcdefghijklmnop', { headers: HTML });
    expect(cli.text).not.toContain('<div id="root">');
    expect(cli.headers.get('content-security-policy')).toMatch(/default-src 'none'/);
    // Real API answers are untouched.
    expect((await app.request('GET', '/api/openapi.json', { headers: HTML })).headers.get('content-type')).toMatch(/json/);
  });

  it('answers only browser navigations: not other methods, not JSON clients', async () => {
    const post = await app.request('POST', '/projects', { headers: HTML, body: {} });
    expect(post.status).toBe(404);
    const json = await app.request('GET', '/projects', { headers: { accept: 'application/json' } });
    expect(json.status).toBe(404);
    expect(json.body).toMatchObject({ error: expect.any(String) });
    const head = await fetch(app.urls.control + '/projects', { method: 'HEAD', headers: HTML });
    expect(head.status).toBe(200);
  });

  it('is only on the control plane', async () => {
    for (const listener of ['data', 'ingest'] as const) {
      expect((await app.request('GET', '/', { headers: HTML, listener })).status).toBe(404);
    }
  });
});

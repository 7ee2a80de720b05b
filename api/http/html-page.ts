import { randomBytes } from 'node:crypto';
import type { Response } from 'express';

const HTML_ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };
export const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (c) => HTML_ESCAPES[c]);

const STYLE =
  'body{font-family:system-ui,sans-serif;max-width:34rem;margin:3rem auto;padding:0 1rem;line-height:1.5;color:#222}' +
  'button{font-size:1rem;padding:.4rem 1rem;margin-right:.5rem}code{background:#eee;padding:0 .2rem}' +
  'fieldset{border:1px solid #ccc;padding:.5rem 1rem}label{display:block;margin:.3rem 0}.error{color:#b00020}';

export interface PageOptions {
  status: number;
  title: string;
  /** Trusted markup: every interpolated value already escaped. */
  body: string;
  /** Origins the page's forms may post to, besides none ('self' for the approval form). */
  formAction?: string[];
  /** A script run under this page's nonce (an auto-submit, the consent form). */
  script?: string;
  /** Origins the page's script may fetch from ('self' for the consent API); none when absent. */
  connectSrc?: string[];
}

/**
 * Sends a small self-contained HTML page (CLI login, OAuth consent; there is no web console
 * yet): no framing, no outside resources, scripts only with
 * this response's nonce, forms only to the given targets, never cached (it may hold a token).
 */
export function sendPage(res: Response, page: PageOptions): void {
  const nonce = randomBytes(16).toString('base64');
  const csp = [
    "default-src 'none'",
    `style-src 'nonce-${nonce}'`,
    `script-src 'nonce-${nonce}'`,
    `connect-src ${page.connectSrc?.length ? page.connectSrc.join(' ') : "'none'"}`,
    `form-action ${page.formAction?.length ? page.formAction.join(' ') : "'none'"}`,
    "frame-ancestors 'none'",
    "base-uri 'none'",
  ].join('; ');
  res
    .status(page.status)
    .set({
      'Content-Type': 'text/html; charset=utf-8',
      'Content-Security-Policy': csp,
      'X-Frame-Options': 'DENY',
      'X-Content-Type-Options': 'nosniff',
      'Referrer-Policy': 'no-referrer',
      'Cache-Control': 'no-store',
    })
    .send(
      `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">` +
        `<title>${escapeHtml(page.title)}</title><style nonce="${nonce}">${STYLE}</style></head>` +
        `<body><h1>${escapeHtml(page.title)}</h1>${page.body}` +
        (page.script ? `<script nonce="${nonce}">${page.script}</script>` : '') +
        `</body></html>`,
    );
}

/** A hidden form field. */
export const hidden = (name: string, value: string) => `<input type="hidden" name="${escapeHtml(name)}" value="${escapeHtml(value)}">`;

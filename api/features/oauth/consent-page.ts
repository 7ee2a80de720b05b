import { randomBytes } from 'node:crypto';

/**
 * The minimal consent page served by GET /api/oauth/authorize (there is no web console yet).
 * It reads the authorization request from its own query string, asks GET /api/oauth/consent
 * what to show, and posts the choice to POST /api/oauth/consent with the session's CSRF token,
 * then follows the returned redirect. Everything dynamic is inserted as text, never as HTML;
 * the CSP (routes.ts) allows only this page's nonce'd script and style.
 */
export function consentPage(opts: { csrfToken: string; userEmail: string }): { html: string; nonce: string } {
  const nonce = randomBytes(16).toString('base64');
  const html = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Connect an assistant</title>
<style nonce="${nonce}">
body{font-family:system-ui,sans-serif;max-width:36rem;margin:2rem auto;padding:0 1rem;color:#222}
fieldset{border:1px solid #ccc;padding:.5rem 1rem}label{display:block;margin:.3rem 0}
button{margin:1rem .5rem 0 0;padding:.5rem 1rem}.error{color:#b00020}
</style></head>
<body>
<h1>Connect an assistant</h1>
<p>Signed in as <strong>${escapeHtml(opts.userEmail)}</strong>.</p>
<p id="intro">Loading…</p>
<form id="consent" hidden>
<input type="hidden" name="csrf" value="${escapeHtml(opts.csrfToken)}">
<p>It asks for: <strong id="scopes"></strong> access. It will act as you, never beyond your role, and only on the projects you choose.</p>
<fieldset><legend>Projects</legend><div id="projects"></div></fieldset>
<button type="submit" name="approve" value="true">Allow</button>
<button type="submit" name="approve" value="false">Deny</button>
</form>
<p id="error" class="error" role="alert"></p>
<script nonce="${nonce}">
(function () {
  var form = document.getElementById('consent');
  var error = document.getElementById('error');
  var request = Object.fromEntries(new URLSearchParams(location.search));
  function fail(message) { error.textContent = message; }
  fetch('/api/oauth/consent' + location.search, { credentials: 'same-origin' })
    .then(function (res) { return res.json().then(function (body) { if (!res.ok) throw new Error(body.message || body.error); return body; }); })
    .then(function (consent) {
      document.getElementById('intro').textContent = '"' + consent.client.name + '" (redirects to ' + consent.client.redirectUri + ') wants to use your feature flags through MCP.';
      document.getElementById('scopes').textContent = consent.scopes.join(' and ');
      var list = document.getElementById('projects');
      consent.projects.forEach(function (project) {
        var label = document.createElement('label');
        var box = document.createElement('input');
        box.type = 'checkbox'; box.name = 'projectIds'; box.value = project.id;
        label.appendChild(box);
        label.appendChild(document.createTextNode(' ' + project.name + ' (' + project.role + ')'));
        list.appendChild(label);
      });
      form.hidden = false;
    })
    .catch(function (e) { fail(e.message); });
  form.addEventListener('submit', function (event) {
    event.preventDefault();
    var approve = event.submitter && event.submitter.value === 'true';
    var projectIds = Array.prototype.map.call(form.querySelectorAll('input[name=projectIds]:checked'), function (b) { return b.value; });
    fetch('/api/oauth/consent', {
      method: 'POST', credentials: 'same-origin',
      headers: { 'Content-Type': 'application/json', 'X-CSRF-Token': form.elements.csrf.value },
      body: JSON.stringify(Object.assign({}, request, { projectIds: projectIds, approve: approve }))
    })
      .then(function (res) { return res.json().then(function (body) { if (!res.ok) throw new Error(body.message || body.error); return body; }); })
      .then(function (body) { location.assign(body.redirectUrl); })
      .catch(function (e) { fail(e.message); });
  });
})();
</script>
</body></html>`;
  return { html, nonce };
}

/** Shown by GET /api/oauth/authorize without a session: sign in, then reload. */
export function signInPage(baseUrl: string): { html: string; nonce: string } {
  const nonce = randomBytes(16).toString('base64');
  const html = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Sign in first</title>
<style nonce="${nonce}">body{font-family:system-ui,sans-serif;max-width:36rem;margin:2rem auto;padding:0 1rem}</style></head>
<body><h1>Sign in first</h1>
<p>An assistant asks to connect to your feature flags. Sign in to ${escapeHtml(baseUrl)} in this browser, then reload this page to choose what it may reach.</p>
</body></html>`;
  return { html, nonce };
}

function escapeHtml(value: string): string {
  return value.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);
}

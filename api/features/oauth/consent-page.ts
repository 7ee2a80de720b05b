import { escapeHtml, hidden, type PageOptions } from '../../http/html-page';

/**
 * The minimal consent page served by GET /api/oauth/authorize (there is no web console yet).
 * It reads the authorization request from its own query string, asks GET /api/oauth/consent
 * what to show, and posts the choice to POST /api/oauth/consent with the session's CSRF token,
 * then follows the returned redirect. Everything dynamic is inserted as text, never as HTML;
 * the page's script runs under its nonce and may only fetch from this origin.
 */
export function consentPage(opts: { csrfToken: string; userEmail: string }): PageOptions {
  return {
    status: 200,
    title: 'Connect an assistant',
    body: `<p>Signed in as <strong>${escapeHtml(opts.userEmail)}</strong>.</p>
<p id="intro">Loading…</p>
<form id="consent" hidden>
${hidden('csrf', opts.csrfToken)}
<p>It asks for: <strong id="scopes"></strong> access. It will act as you, never beyond your role, and only on the projects you choose.</p>
<fieldset><legend>Projects</legend><div id="projects"></div></fieldset>
<button type="submit" name="approve" value="true">Allow</button>
<button type="submit" name="approve" value="false">Deny</button>
</form>
<p id="error" class="error" role="alert"></p>`,
    connectSrc: ["'self'"],
    script: `
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
`,
  };
}

/** Shown by GET /api/oauth/authorize without a session: sign in, then reload. */
export function signInPage(baseUrl: string): PageOptions {
  return {
    status: 200,
    title: 'Sign in first',
    body: `<p>An assistant asks to connect to your feature flags. Sign in to ${escapeHtml(baseUrl)} in this browser, then reload this page to choose what it may reach.</p>`,
  };
}

import fs from 'node:fs';
import { renderWebApiSchema, WEB_API_SCHEMA_PATH } from '../../scripts/gen-web-api';
import { startTestApp, type TestApp } from '../support/harness';

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp();
});
afterAll(async () => {
  await app?.stop();
});

describe("the console's typed API", () => {
  // UPDATE_WEB_API_SCHEMA=1 writes the file instead (what `npm run gen:web-api` does against a running server).
  it('is generated from the current OpenAPI document (web/src/api/schema.d.ts is not stale)', async () => {
    const res = await app.request('GET', '/api/openapi.json');
    expect(res.status).toBe(200);
    const expected = await renderWebApiSchema(res.body);
    if (process.env.UPDATE_WEB_API_SCHEMA) fs.writeFileSync(WEB_API_SCHEMA_PATH, expected);
    const committed = fs.existsSync(WEB_API_SCHEMA_PATH) ? fs.readFileSync(WEB_API_SCHEMA_PATH, 'utf8') : '';
    // Not toEqual on the whole text: a stale file would print thousands of lines.
    if (committed !== expected) {
      throw new Error('web/src/api/schema.d.ts is stale: run `npm run gen:web-api` with the server running, or UPDATE_WEB_API_SCHEMA=1 npx jest test/browser/api-schema.test.ts');
    }
  });
});

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { TestApp } from '../support/harness';

/** The SDK's client connected to the app's /mcp with a connector token; added to `open` for closing after the tests. */
export async function mcpClient(app: TestApp, accessToken: string, open: Client[]): Promise<Client> {
  const client = new Client({ name: 'test-assistant', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${app.urls.control}/mcp`), { requestInit: { headers: { Authorization: `Bearer ${accessToken}` } } }));
  open.push(client);
  return client;
}

/** A tool's JSON answer, or its error as `{ isError, ...envelope }`. */
export async function tool(client: Client, name: string, args: Record<string, unknown> = {}): Promise<any> {
  const result = (await client.callTool({ name, arguments: args })) as { isError?: boolean; content: { type: string; text: string }[] };
  const text = result.content[0].text;
  if (!result.isError) return JSON.parse(text);
  // The SDK's own input validation answers text; the routes' refusals answer their envelope as JSON.
  return text.startsWith('{') ? { isError: true, ...JSON.parse(text) } : { isError: true, message: text };
}

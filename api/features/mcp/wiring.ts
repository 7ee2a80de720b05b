import type { ListenerRoutes } from '../../http/route';
import { mcpRoutes, type McpRouteDeps } from './routes';

/** The hosted MCP server (docs/mcp.md): its tools run the given control routes in-process, for a connector token. */
export function createMcpFeature(deps: McpRouteDeps): { routes: ListenerRoutes } {
  return { routes: { control: mcpRoutes(deps) } };
}

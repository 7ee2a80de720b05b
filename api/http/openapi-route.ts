import { defineRoute, type AnyRoute } from './route';
import type { OpenApiCatalog } from './openapi';

export function openApiRoutes(catalog: OpenApiCatalog): AnyRoute[] {
  return [
    defineRoute({
      method: 'get',
      path: '/api/openapi.json',
      summary: 'This API as an OpenAPI 3.1 document, generated from the validators',
      tags: ['meta'],
      auth: 'public',
      handler: () => catalog.document(),
    }),
  ];
}

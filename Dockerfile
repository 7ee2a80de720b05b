# The application image used by docker-compose.yml for every app process; ROLES picks the process.
# Node 24, a supported LTS (Node 20 left support in April 2026; @connectrpc/connect-node wants 22+).
FROM node:24-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
# patches/: fixes to dependencies that npm install applies (patch-package, the postinstall script).
COPY patches ./patches
RUN npm install --no-audit --no-fund
COPY . .
# The build compiles the API, bundles the workflows and builds the web console into dist/web.
RUN npm run build && npm prune --omit=dev

FROM node:24-bookworm-slim
WORKDIR /app
# Two malloc arenas instead of one per thread that allocates (up to 8 per core): the threads of
# chDB, Temporal's core and the PGlite thread each held tens of MB otherwise (docs/operations.md).
ENV NODE_ENV=production HOST=0.0.0.0 MALLOC_ARENA_MAX=2
COPY --from=build /app /app
USER node
EXPOSE 3000 3001 3002 3003
# The node flags each set of ROLES needs (an ingesting process: a larger young generation).
CMD ["sh", "scripts/run-api.sh"]

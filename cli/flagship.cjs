#!/usr/bin/env node
/* eslint-disable @typescript-eslint/no-require-imports, no-undef -- a plain CommonJS launcher run by node, outside the TypeScript build */
// The `flagship` command (package.json "bin"): the TypeScript source through tsx in a checkout,
// else the compiled CLI of `npm run build` (dist/cli/main.js).
const fs = require('node:fs');
const path = require('node:path');

const source = path.join(__dirname, 'main.ts');
let entry;
if (fs.existsSync(source)) {
  require('tsx/cjs/api').register();
  entry = source;
} else {
  entry = path.join(__dirname, '..', 'dist', 'cli', 'main.js');
}
// Exits at once: open keep-alive sockets must not hold a finished command.
require(entry).main(process.argv).then((code) => process.exit(code));

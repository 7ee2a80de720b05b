import fs from 'node:fs';
import path from 'node:path';

/** The checkout root, found from this file whether it runs from source or from dist/. */
export const PROJECT_ROOT = (() => {
  let dir = __dirname;
  while (!fs.existsSync(path.join(dir, 'package.json'))) {
    const parent = path.dirname(dir);
    if (parent === dir) throw new Error('package.json not found above ' + __dirname);
    dir = parent;
  }
  return dir;
})();

export const projectPath = (...parts: string[]) => path.join(PROJECT_ROOT, ...parts);

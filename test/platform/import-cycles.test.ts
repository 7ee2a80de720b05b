import fs from 'node:fs';
import path from 'node:path';
import ts from 'typescript';
import { projectPath } from '../../api/infra/paths';

/**
 * No import circles between the application's modules, `import type` included. Lint's
 * import-x/no-cycle catches modules that load each other but skips type-only edges by design;
 * a circle through a type import still ties two modules together (workflows/ once
 * type-imported the module that loads the Temporal client), so this closes that gap.
 */
const ROOTS = ['api', 'activities', 'workflows', 'analytics', 'scripts'];
const SKIPPED_DIRS = new Set(['gen', 'node_modules']);

function sourceFiles(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return SKIPPED_DIRS.has(entry.name) ? [] : sourceFiles(full);
    return entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts') ? [full] : [];
  });
}

/** Relative imports and re-exports of a file, resolved to files; packages are not followed. */
function localImports(file: string): string[] {
  const source = ts.createSourceFile(file, fs.readFileSync(file, 'utf8'), ts.ScriptTarget.Latest);
  const found: string[] = [];
  for (const statement of source.statements) {
    if (!ts.isImportDeclaration(statement) && !ts.isExportDeclaration(statement)) continue;
    const specifier = statement.moduleSpecifier;
    if (!specifier || !ts.isStringLiteral(specifier) || !specifier.text.startsWith('.')) continue;
    const base = path.resolve(path.dirname(file), specifier.text.replace(/\.js$/, ''));
    const target = [`${base}.ts`, path.join(base, 'index.ts')].find((candidate) => fs.existsSync(candidate));
    if (target) found.push(target);
  }
  return found;
}

/** Strongly connected components with more than one file (Tarjan). */
function circles(graph: Map<string, string[]>): string[][] {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (file: string) => {
    index.set(file, next);
    low.set(file, next++);
    stack.push(file);
    onStack.add(file);
    for (const dep of graph.get(file) ?? []) {
      if (!graph.has(dep)) continue;
      if (!index.has(dep)) {
        visit(dep);
        low.set(file, Math.min(low.get(file)!, low.get(dep)!));
      } else if (onStack.has(dep)) {
        low.set(file, Math.min(low.get(file)!, index.get(dep)!));
      }
    }
    if (low.get(file) !== index.get(file)) return;
    const component: string[] = [];
    let member: string;
    do {
      member = stack.pop()!;
      onStack.delete(member);
      component.push(path.relative(projectPath(), member));
    } while (member !== file);
    if (component.length > 1) found.push(component.sort());
  };
  for (const file of graph.keys()) if (!index.has(file)) visit(file);
  return found;
}

it('has no import circles, type-only imports included', () => {
  const files = ROOTS.flatMap((root) => sourceFiles(projectPath(root)));
  const graph = new Map(files.map((file) => [file, localImports(file)]));
  expect(graph.size).toBeGreaterThan(100);
  expect(circles(graph)).toEqual([]);
});

import fs from 'node:fs';
import path from 'node:path';
import { projectPath } from '../../api/infra/paths';

/**
 * Comments cite what a reader of this repository can open: its own docs (`docs/*.md`, with a
 * heading when an anchor is given) or the OpenAPI document, never documents kept elsewhere or
 * issue numbers. docs/api-reference.md, docs/evaluation.md, docs/limits.md and docs/errors.md
 * carry the rules comments used to cite from outside.
 */

const SOURCE_FOLDERS = ['api', 'workflows', 'activities', 'analytics', 'cli', 'scripts', 'bench', 'migrations', 'proto', 'test', path.join('web', 'src')];
const SKIPPED_FOLDERS = new Set(['node_modules', 'dist', 'data']);
const SLASH_COMMENTED = new Set(['.ts', '.tsx', '.js', '.mjs', '.cjs', '.proto', '.css']);
const DASH_COMMENTED = new Set(['.sql']);
const HASH_COMMENTED = new Set(['.sh']);

/** Citations of documents outside the repository, and issue numbers. */
const OUTSIDE_CITATIONS: { name: string; pattern: RegExp }[] = [
  { name: 'a section of the outside specification', pattern: /\b[Ss]pec(?: section)? \d/ },
  { name: 'the outside contract', pattern: /\bCONTRACT\b/ },
  { name: 'the outside design notes', pattern: /\bDESIGN\b/ },
  { name: 'an issue number', pattern: /\b[Ii]ssues? #?\d|(?:^|[\s(])#\d+\b/ },
];

const DOC_CITATION = /\bdocs\/([\w.-]+\.md)(#[\w-]+)?/g;

function filesUnder(folder: string): string[] {
  const root = projectPath(folder);
  if (!fs.existsSync(root)) return [];
  const found: string[] = [];
  const walk = (dir: string) => {
    for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
      if (entry.isDirectory()) {
        if (!SKIPPED_FOLDERS.has(entry.name)) walk(path.join(dir, entry.name));
      } else {
        found.push(path.join(dir, entry.name));
      }
    }
  };
  walk(root);
  return found;
}

/**
 * The comment text of each line, by the file's comment syntax: whole-line comments and the
 * lines of block comments, plus a trailing `// ...` after code. Strings that merely contain a
 * comment marker (`'http://'`) are not comments: a trailing marker needs a blank before it.
 */
export function commentLines(file: string, text: string): { line: number; comment: string }[] {
  const ext = path.extname(file);
  const lines = text.split('\n');
  const comments: { line: number; comment: string }[] = [];
  let inBlock = false;
  lines.forEach((raw, index) => {
    const line = raw.trim();
    let comment: string | undefined;
    if (SLASH_COMMENTED.has(ext)) {
      if (inBlock) {
        comment = line;
        if (line.includes('*/')) inBlock = false;
      } else if (line.startsWith('/*')) {
        comment = line;
        inBlock = !line.includes('*/');
      } else if (line.startsWith('//')) {
        comment = line;
      } else {
        const trailing = /\s(?:\/\/|\/\*)\s(.*)$/.exec(raw);
        if (trailing) comment = trailing[1];
      }
    } else if (DASH_COMMENTED.has(ext)) {
      const at = raw.indexOf('--');
      if (at >= 0) comment = raw.slice(at + 2);
    } else if (HASH_COMMENTED.has(ext)) {
      if (line.startsWith('#') && !line.startsWith('#!')) comment = line.slice(1);
    }
    if (comment !== undefined) comments.push({ line: index + 1, comment });
  });
  return comments;
}

/** GitHub's anchor of a Markdown heading: lower case, punctuation dropped, blanks as hyphens. */
export function headingAnchor(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

function anchorsOf(doc: string): Set<string> {
  const text = fs.readFileSync(projectPath('docs', doc), 'utf8');
  return new Set(
    text
      .split('\n')
      .map((line) => /^#{1,6}\s+(.*)$/.exec(line)?.[1])
      .filter((heading): heading is string => heading !== undefined)
      .map(headingAnchor),
  );
}

const sourceFiles = SOURCE_FOLDERS.flatMap(filesUnder).filter((file) => {
  const ext = path.extname(file);
  return SLASH_COMMENTED.has(ext) || DASH_COMMENTED.has(ext) || HASH_COMMENTED.has(ext);
});
const sourceComments = sourceFiles.flatMap((file) =>
  commentLines(file, fs.readFileSync(file, 'utf8')).map((c) => ({ where: `${path.relative(projectPath(), file)}:${c.line}`, comment: c.comment })),
);

describe('comments', () => {
  it('are found in every source folder', () => {
    for (const folder of ['api', 'workflows', 'test', 'migrations']) {
      expect(sourceComments.some((c) => c.where.startsWith(`${folder}${path.sep}`))).toBe(true);
    }
  });

  it.each(OUTSIDE_CITATIONS)('never cite $name', ({ pattern }) => {
    const offending = sourceComments.filter((c) => pattern.test(c.comment)).map((c) => `${c.where}: ${c.comment}`);
    expect(offending).toEqual([]);
  });

  it('cite docs pages that exist, and headings that exist when they name one', () => {
    const anchors = new Map<string, Set<string> | null>();
    const broken: string[] = [];
    for (const c of sourceComments) {
      for (const [, doc, anchor] of c.comment.matchAll(DOC_CITATION)) {
        if (!anchors.has(doc)) anchors.set(doc, fs.existsSync(projectPath('docs', doc)) ? anchorsOf(doc) : null);
        const headings = anchors.get(doc);
        if (headings === null) broken.push(`${c.where}: docs/${doc} does not exist`);
        else if (anchor && !headings?.has(anchor.slice(1))) broken.push(`${c.where}: docs/${doc} has no heading ${anchor}`);
      }
    }
    expect(broken).toEqual([]);
  });
});

describe('the docs', () => {
  const pages = [...fs.readdirSync(projectPath('docs')).filter((name) => name.endsWith('.md')).map((name) => path.join('docs', name)), 'README.md'];
  const lines = pages.flatMap((page) =>
    fs
      .readFileSync(projectPath(page), 'utf8')
      .split('\n')
      .map((text, index) => ({ where: `${page}:${index + 1}`, text })),
  );

  it.each(OUTSIDE_CITATIONS)('never cite $name', ({ pattern }) => {
    expect(lines.filter((l) => pattern.test(l.text)).map((l) => `${l.where}: ${l.text}`)).toEqual([]);
  });

  it('cite pages and headings that exist', () => {
    const broken = lines.flatMap((l) =>
      [...l.text.matchAll(DOC_CITATION)]
        .filter(([, doc, anchor]) => !fs.existsSync(projectPath('docs', doc)) || (anchor !== undefined && !anchorsOf(doc).has(anchor.slice(1))))
        .map(([citation]) => `${l.where}: ${citation}`),
    );
    expect(broken).toEqual([]);
  });
});

describe('the checks themselves', () => {
  it('read comments, not code or strings', () => {
    const trailing = ['run();', '//', 'a trailing note'].join(' ');
    const text = ["const url = 'http://example.test/spec 4';", '/**', ' * a block', ' */', trailing].join('\n');
    expect(commentLines('x.ts', text).map((c) => c.line)).toEqual([2, 3, 4, 5]);
    expect(commentLines('x.sql', ['SELECT 1;', '--', 'a note'].join(' ')).map((c) => c.comment.trim())).toEqual(['a note']);
  });

  it('flag each kind of outside citation and leave ordinary words alone', () => {
    const flagged = (comment: string) => OUTSIDE_CITATIONS.some(({ pattern }) => pattern.test(comment));
    for (const comment of ['(spec 4.2)', 'Spec 8: limits', 'spec section 8', 'CONTRACT 9', 'DESIGN "Quality bars"', '(issue 18 point 2)', 'Issue 9.1', 'see #12']) {
      expect(flagged(comment)).toBe(true);
    }
    for (const comment of ['DESIGN_EFFECTIVE_SAMPLES', 'the specification of OFREP', 'porsager/postgres#1142', 'colour #fff', 'compile issues say so']) {
      expect(flagged(comment)).toBe(false);
    }
  });

  it('derive heading anchors as GitHub does', () => {
    expect(headingAnchor('Context ring (`GET /api/contexts`, control plane)')).toBe('context-ring-get-apicontexts-control-plane');
    expect(headingAnchor('Experiments, cohorts, explanation and simulation')).toBe('experiments-cohorts-explanation-and-simulation');
  });
});

import fs from 'node:fs';
import { projectPath } from '../../api/infra/paths';

// The production image runs a supported Node LTS; this machine's Node (20) keeps running the code.
const dockerfile = fs.readFileSync(projectPath('Dockerfile'), 'utf8');
const imageMajors = [...dockerfile.matchAll(/^FROM\s+node:(\d+)/gim)].map((m) => Number(m[1]));
const manifest = JSON.parse(fs.readFileSync(projectPath('package.json'), 'utf8'));

/** The lowest version a `>=X.Y.Z` range admits, as [major, minor, patch] (`*`: any); other forms are refused. */
function minimum(range: string): number[] {
  if (range.trim() === '*') return [0, 0, 0];
  const match = /^>=\s*(\d+)(?:\.(\d+))?(?:\.(\d+))?$/.exec(range.trim());
  if (!match) throw new Error(`engines range ${JSON.stringify(range)} is not of the form >=X.Y.Z`);
  return [Number(match[1]), Number(match[2] ?? 0), Number(match[3] ?? 0)];
}

/**
 * Whether the newest release of a major line satisfies a range of `>=X.Y.Z`, `^X.Y.Z` and bare
 * `X` alternatives joined by `||` (the forms dependencies declare); other forms are refused.
 */
function admitsMajor(range: string, major: number): boolean {
  return range.split('||').some((alternative) => {
    const sameMajor = /^\^?\s*(\d+)(?:\.(?:\d+|x)){0,2}$/.exec(alternative.trim());
    return sameMajor ? Number(sameMajor[1]) === major : major >= minimum(alternative)[0];
  });
}

function atLeast(version: number[], min: number[]): boolean {
  for (let i = 0; i < 3; i++) if (version[i] !== min[i]) return version[i] > min[i];
  return true;
}

describe('Node versions', () => {
  it('builds and runs the image on a supported LTS line: even-numbered, 22 or newer', () => {
    expect(imageMajors.length).toBeGreaterThan(0);
    for (const major of imageMajors) {
      expect(major % 2).toBe(0);
      expect(major).toBeGreaterThanOrEqual(22);
    }
  });

  it.each(Object.keys(manifest.dependencies))('the image satisfies the Node range %s declares', (name) => {
    const range: string | undefined = JSON.parse(fs.readFileSync(projectPath('node_modules', name, 'package.json'), 'utf8')).engines?.node;
    if (!range) return;
    // The tag names a major line and pulls its newest release, so the major decides.
    for (const major of imageMajors) expect(admitsMajor(range, major)).toBe(true);
  });

  it("runs on this machine's Node, within package.json's engines", () => {
    const version = process.versions.node.split('.').map(Number);
    expect(atLeast(version, minimum(manifest.engines.node))).toBe(true);
  });
});

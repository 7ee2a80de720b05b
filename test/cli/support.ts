import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import path from 'node:path';

const LAUNCHER = path.join(__dirname, '..', '..', 'cli', 'flagship.cjs');

/** The hidden fields and target of an HTML page's form with this id (or its first form). */
export function formOf(html: string, id?: string): { action: string; fields: Record<string, string> } {
  const forms = [...html.matchAll(/<form([^>]*)>([\s\S]*?)<\/form>/g)];
  const form = id ? forms.find((f) => f[1].includes(`id="${id}"`)) : forms[0];
  if (!form) throw new Error(`no form in ${html}`);
  const unescape = (s: string) => s.replace(/&quot;/g, '"').replace(/&#39;/g, "'").replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&amp;/g, '&');
  const fields: Record<string, string> = {};
  for (const m of form[2].matchAll(/<input type="hidden" name="([^"]*)" value="([^"]*)">/g)) fields[unescape(m[1])] = unescape(m[2]);
  return { action: unescape(/action="([^"]*)"/.exec(form[1])![1]), fields };
}

/** The CLI as a user runs it: a child process of the `bin` launcher, with its own environment. */
export class CliProcess {
  readonly child: ChildProcessWithoutNullStreams;
  stdout = '';
  stderr = '';
  readonly exited: Promise<number>;

  constructor(args: string[], env: Record<string, string>) {
    // Only what the CLI needs: no FLAGSHIP_* of the machine running the tests.
    const base = { PATH: process.env.PATH ?? '', HOME: env.HOME ?? process.env.HOME ?? '' };
    this.child = spawn(process.execPath, [LAUNCHER, ...args], { env: { ...base, ...env } });
    this.child.stdout.on('data', (d: Buffer) => (this.stdout += d.toString()));
    this.child.stderr.on('data', (d: Buffer) => (this.stderr += d.toString()));
    this.exited = new Promise((resolve) => this.child.on('close', (code, signal) => resolve(code ?? (signal ? 128 : 1))));
  }

  /** Resolves with the first match of `pattern` in stdout or stderr (generous timeout). */
  async waitFor(stream: 'stdout' | 'stderr', pattern: RegExp, timeoutMs = 30_000): Promise<RegExpMatchArray> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const match = this[stream].match(pattern);
      if (match) return match;
      if (Date.now() > deadline) throw new Error(`no ${pattern} on ${stream} within ${timeoutMs} ms; stdout: ${this.stdout}; stderr: ${this.stderr}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs one CLI command to its end. */
export async function runCli(args: string[], env: Record<string, string>): Promise<CliResult> {
  const cli = new CliProcess(args, env);
  const code = await cli.exited;
  return { code, stdout: cli.stdout, stderr: cli.stderr };
}

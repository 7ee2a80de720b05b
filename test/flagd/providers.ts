import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { FlagdProvider } from '@openfeature/flagd-provider';
import { OpenFeature, type Client, type EvaluationContext, type JsonValue } from '@openfeature/server-sdk';
import type { EvaluationResult, FlagDefinition, FlagType } from '../../api/features/evaluation/engine/index';
import { DEFAULT_VARIANT, DISABLED_VARIANT, toFlagdDocument } from '../../api/features/flagd/translate';

/**
 * The published flagd providers (docs/local-evaluation.md) as a test drives them: the JS one in
 * in-process and RPC mode, the Python one in in-process mode through test/flagd/python/run_cases.py.
 */

/** What a provider answered for one evaluation. */
export interface ProviderAnswer {
  value: unknown;
  variant?: string | null;
  reason?: string | null;
  errorCode?: string | null;
}

/** One evaluation a provider is asked for: the flag's type picks the typed call. */
export interface ProviderCase {
  flagKey: string;
  type: FlagType;
  defaultValue: unknown;
  context: Record<string, unknown>;
}

export interface ConnectedProvider {
  client: Client;
  close(): Promise<void>;
}

/** A JS flagd provider on 127.0.0.1:port, ready (its first flag set received, or its event stream up). */
export async function connectJsProvider(mode: 'in-process' | 'rpc', port: number, selector: string, options: { retryBackoffMaxMs?: number } = {}): Promise<ConnectedProvider> {
  const domain = `${mode}-${randomBytes(6).toString('hex')}`;
  const provider = new FlagdProvider({
    resolverType: mode,
    host: '127.0.0.1',
    port,
    selector,
    // The suite's machine is slow and shared: give the first connection time.
    deadlineMs: 10_000,
    retryBackoffMaxMs: options.retryBackoffMaxMs ?? 500,
    // A cached answer would hide the server's: every evaluation asks it.
    cache: 'disabled',
  });
  await OpenFeature.setProviderAndWait(domain, provider);
  return { client: OpenFeature.getClient(domain), close: () => provider.onClose() };
}

/** Evaluates one case with a JS provider's client. */
export async function evaluateWith(client: Client, c: ProviderCase): Promise<ProviderAnswer> {
  const context = c.context as EvaluationContext;
  const details =
    c.type === 'boolean'
      ? await client.getBooleanDetails(c.flagKey, c.defaultValue as boolean, context)
      : c.type === 'string'
        ? await client.getStringDetails(c.flagKey, c.defaultValue as string, context)
        : c.type === 'number'
          ? await client.getNumberDetails(c.flagKey, c.defaultValue as number, context)
          : await client.getObjectDetails(c.flagKey, c.defaultValue as JsonValue, context);
  return { value: details.value, variant: details.variant, reason: details.reason, errorCode: details.errorCode };
}

/** The venv interpreter that has the Python flagd provider (scripts/test-infra.sh), if provisioned. */
export function pythonWithProvider(): string | undefined {
  return process.env.FLAGD_PYTHON_PATH || undefined;
}

/**
 * The Python provider in in-process mode: one provider per selector, each case evaluated by its
 * selector's provider; answers in the cases' order.
 */
export function runPythonCases(python: string, syncPort: number, cases: (ProviderCase & { selector: string })[]): Promise<ProviderAnswer[]> {
  const script = path.join(__dirname, 'python', 'run_cases.py');
  return new Promise((resolve, reject) => {
    const child = spawn(python, [script, '--host', '127.0.0.1', '--port', String(syncPort)], { stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-4000)));
    child.on('error', reject);
    child.on('close', (code) => {
      if (code !== 0) return reject(new Error(`run_cases.py exited with ${code}: ${stderr}`));
      resolve(JSON.parse(stdout) as ProviderAnswer[]);
    });
    child.stdin.end(JSON.stringify(cases));
  });
}

/** Whether the flag's translation is exact: untranslatable ones are marked so in the document (docs/flagd.md). */
export function isTranslatable(flag: FlagDefinition): boolean {
  return toFlagdDocument([{ ...flag, version: 1 }], new Map()).flags[flag.key].metadata.inProcess !== 'unsupported';
}

/**
 * The variant a flagd provider names for our result: our variant, else the rule's, the default
 * or the disabled one (docs/flagd.md#variants).
 */
export function flagdVariant(r: EvaluationResult): string {
  if (r.variant !== undefined) return r.variant;
  if (r.disabled) return DISABLED_VARIANT;
  if (r.ruleId !== undefined) return `rule:${r.ruleId}`;
  return DEFAULT_VARIANT;
}

/**
 * Where a provider's answer differs from our result for the case: value and variant, or, when
 * ours is an error, an error with the caller's default. Empty when they agree.
 */
export function disagreement(r: EvaluationResult, c: ProviderCase, got: ProviderAnswer): string {
  // A float the Python provider returns for an integral number compares equal here.
  const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);
  if (r.reason === 'ERROR') {
    return got.reason === 'ERROR' && same(got.value, c.defaultValue) ? '' : `want ERROR with the default ${JSON.stringify(c.defaultValue)} (${r.errorCode})`;
  }
  if (!same(got.value, r.value)) return `value ${JSON.stringify(got.value)} != ${JSON.stringify(r.value)}`;
  if (got.variant !== flagdVariant(r)) return `variant ${got.variant} != ${flagdVariant(r)}`;
  return '';
}

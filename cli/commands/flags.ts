import { InvalidArgumentError, Option, type Command } from 'commander';
import { ENVIRONMENTS } from '../../api/domain/environments';
import type { ApiClient } from '../api';
import { isApprovalRequired, withChangeRequestHint } from '../approval';
import { CliError } from '../errors';
import { show, table, type Output } from '../output';
import { tailFlag } from './tail';

export interface Flag {
  key: string;
  projectId: string;
  name: string;
  type: string;
  enabled: boolean;
  serviceId: string;
  environment: string;
  defaultValue: unknown;
  targeting: unknown[];
  variants: { name: string; value: unknown; weight: number }[];
  version: number;
  updatedAt: string;
}

interface Explanation {
  flagKey: string;
  value: unknown;
  reason: string;
  variant?: string;
  ruleId?: string;
  errorCode?: string;
  errorMessage?: string;
  rules: { id: string; matched: boolean; conditions: { property: string; operator: string; expected: unknown; actual: unknown; passed: boolean }[] }[];
}

export type Session = (cmd: Command) => { api: ApiClient; out: Output };

export const envOption = (required = false) => {
  const option = new Option('--env <environment>', 'environment').choices([...ENVIRONMENTS]);
  return required ? option.makeOptionMandatory() : option.default('development');
};
const serviceOption = () => new Option('--service <id>', 'service id').makeOptionMandatory();
const flagPath = (key: string, rest = '') => `/api/flags/${encodeURIComponent(key)}${rest}`;

export function flagCommands(program: Command, session: Session): void {
  const flags = program.command('flags').description('list, read, toggle, evaluate and follow flags');

  flags
    .command('list')
    .description("a project's flags (filtered by service and environment)")
    .requiredOption('--project <id>', 'project id')
    .option('--service <id>', 'only this service')
    .addOption(new Option('--env <environment>', 'only this environment').choices([...ENVIRONMENTS]))
    .option('--search <text>', 'keys and names containing this')
    .addOption(new Option('--limit <n>', 'at most this many (1-100)').default(100).argParser(positiveInt))
    .action(async (opts: { project: string; service?: string; env?: string; search?: string; limit: number }, cmd: Command) => {
      const { api, out } = session(cmd);
      const page = await api.get<{ flags: Flag[]; total: number; hasMore: boolean }>('/api/flags', {
        projectId: opts.project,
        serviceId: opts.service,
        environment: opts.env,
        search: opts.search,
        limit: opts.limit,
      });
      out.result(page, () => {
        if (!page.flags.length) return out.say('No flags.');
        const rows = page.flags.map((f) => ({ key: f.key, env: f.environment, service: f.serviceId, enabled: f.enabled ? 'on' : 'off', type: f.type, name: f.name }));
        out.line(table(rows, ['key', 'env', 'service', 'enabled', 'type', 'name']));
        if (page.hasMore) out.say(`Showing ${page.flags.length} of ${page.total}; narrow with --service, --env or --search.`);
      });
    });

  flags
    .command('get <key>')
    .description('one flag in one environment')
    .addOption(serviceOption())
    .addOption(envOption())
    .action(async (key: string, opts: { service: string; env: string }, cmd: Command) => {
      const { api, out } = session(cmd);
      const flag = await api.get<Flag>(flagPath(key), { serviceId: opts.service, environment: opts.env });
      out.result(flag, () => printFlag(out, flag));
    });

  flags
    .command('toggle <key>')
    .description('flip a flag, or switch it on or off')
    .addOption(serviceOption())
    .addOption(envOption(true))
    .addOption(new Option('--on', 'switch it on').conflicts('off'))
    .addOption(new Option('--off', 'switch it off'))
    .action(async (key: string, opts: { service: string; env: string; on?: boolean; off?: boolean }, cmd: Command) => {
      const { api, out } = session(cmd);
      const enabled = opts.on ? true : opts.off ? false : undefined;
      const body = enabled === undefined ? undefined : { enabled };
      const scope = { serviceId: opts.service, environment: opts.env };
      const flag = await api.post<Flag>(flagPath(key, '/toggle'), body, scope).catch(async (error: unknown) => {
        if (!isApprovalRequired(error)) throw error;
        // The refusal names no project; the flag does.
        const { projectId } = await api.get<Flag>(flagPath(key), scope);
        throw withChangeRequestHint(error, projectId, { ...scope, flagKey: key, action: 'toggle', body: body ?? {} });
      });
      out.result(flag, () => out.line(`${flag.key} is now ${flag.enabled ? 'ON' : 'OFF'} in ${flag.environment} (version ${flag.version})`));
    });

  flags
    .command('evaluate <key>')
    .description('the value a context gets, and why (explain; with --token, the evaluation endpoint itself)')
    .addOption(serviceOption())
    .addOption(envOption())
    .option('--context <json>', 'evaluation context, e.g. \'{"targetingKey":"u1"}\'', '{}')
    .option('--token <projectToken>', 'a project API token: evaluate through /api/flags/evaluate as an SDK would (or FLAGSHIP_PROJECT_TOKEN)')
    .action(async (key: string, opts: { service: string; env: string; context: string; token?: string }, cmd: Command) => {
      const { api, out } = session(cmd);
      const context = parseObject(opts.context, '--context');
      const projectToken = opts.token ?? process.env.FLAGSHIP_PROJECT_TOKEN;
      if (projectToken) {
        // Personal tokens are refused on evaluation (docs/api-reference.md#personal-access-tokens):
        // this call uses the project token.
        const result = await api.withToken(projectToken).post<Record<string, unknown>>('/api/flags/evaluate', { flagKey: key, serviceId: opts.service, environment: opts.env, context });
        return out.result(result, () => out.line(`${key} = ${show(result.value)}  (${result.reason}${result.variant ? `, variant ${result.variant}` : ''})`));
      }
      const explanation = await api.post<Explanation>(flagPath(key, '/explain'), { serviceId: opts.service, environment: opts.env, context });
      out.result(explanation, () => printExplanation(out, explanation));
    });

  flags
    .command('tail <key>')
    .description("follow a flag's changes: its SSE stream with --token (a project API token), else its version history")
    .addOption(serviceOption())
    .addOption(envOption())
    .option('--token <projectToken>', 'a project API token for the SSE stream (personal tokens are refused on streams; or FLAGSHIP_PROJECT_TOKEN)')
    .addOption(new Option('--interval <seconds>', 'how often to read the history without --token').default(2).argParser(positiveInt))
    .action(async (key: string, opts: { service: string; env: string; token?: string; interval: number }, cmd: Command) => {
      const { api, out } = session(cmd);
      await tailFlag(api, out, { key, serviceId: opts.service, environment: opts.env, projectToken: opts.token ?? process.env.FLAGSHIP_PROJECT_TOKEN, intervalMs: opts.interval * 1000 });
    });
}

function printFlag(out: Output, flag: Flag) {
  out.line(`${flag.key}  ${flag.enabled ? 'ON' : 'OFF'}  (${flag.environment}, service ${flag.serviceId})`);
  out.line(`  name:     ${flag.name}`);
  out.line(`  type:     ${flag.type}`);
  out.line(`  default:  ${show(flag.defaultValue)}`);
  out.line(`  rules:    ${flag.targeting.length}`);
  if (flag.variants.length) out.line(`  variants: ${flag.variants.map((v) => `${v.name}=${show(v.value)} (${v.weight}%)`).join(', ')}`);
  out.line(`  version:  ${flag.version}, updated ${flag.updatedAt}`);
}

function printExplanation(out: Output, e: Explanation) {
  out.line(`${e.flagKey} = ${show(e.value)}  (${e.reason}${e.variant ? `, variant ${e.variant}` : ''}${e.ruleId ? `, rule ${e.ruleId}` : ''})`);
  if (e.errorCode) out.line(`  error: ${e.errorCode}${e.errorMessage ? `: ${e.errorMessage}` : ''}`);
  for (const rule of e.rules) {
    out.line(`  rule ${rule.id}: ${rule.matched ? 'matched' : 'no match'}`);
    for (const c of rule.conditions) out.line(`    ${c.passed ? '✓' : '✗'} ${c.property} ${c.operator} ${show(c.expected)} (actual ${show(c.actual ?? null)})`);
  }
}

export function positiveInt(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError(`expected a positive whole number, not ${value}`);
  return n;
}

function parseObject(text: string, name: string): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new CliError(`${name} must be JSON, e.g. '{"targetingKey":"u1"}'`);
  }
  if (!value || typeof value !== 'object' || Array.isArray(value)) throw new CliError(`${name} must be a JSON object`);
  return value as Record<string, unknown>;
}

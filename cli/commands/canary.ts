import { Option, type Command } from 'commander';
import type { Output } from '../output';
import { envOption, type Session } from './flags';

interface Stage {
  index: number;
  rolloutPercent: number;
  startedAt: string;
  endedAt?: string;
}

interface Canary {
  id: string;
  flagKey: string;
  environment: string;
  ruleId: string;
  status: string;
  statusReason: string | null;
  currentStage: Stage | null;
  completedStages: Stage[];
  remainingSoakSeconds: number;
  health: { status: string; checkedAt: string | null; gate: unknown };
  updatedAt: string;
}

export function canaryCommands(program: Command, session: Session): void {
  const canary = program.command('canary').description('canary pipelines (docs/canary.md)');
  canary
    .command('show <key>')
    .description("the flag's active canary pipeline, else its latest")
    .addOption(new Option('--service <id>', 'service id').makeOptionMandatory())
    .addOption(envOption())
    .action(async (key: string, opts: { service: string; env: string }, cmd: Command) => {
      const { api, out } = session(cmd);
      const record = await api.get<Canary>(`/api/flags/${encodeURIComponent(key)}/canary`, { serviceId: opts.service, environment: opts.env });
      out.result(record, () => printCanary(out, record));
    });
}

function printCanary(out: Output, c: Canary) {
  out.line(`${c.flagKey} canary ${c.id}: ${c.status}${c.statusReason ? ` (${c.statusReason})` : ''}  [${c.environment}, rule ${c.ruleId}]`);
  out.line(`  stage:     ${c.currentStage ? describeStage(c.currentStage) : 'none'}`);
  out.line(`  completed: ${c.completedStages.length ? c.completedStages.map(describeStage).join(', ') : 'none'}`);
  out.line(`  soak left: ${c.remainingSoakSeconds} s`);
  out.line(`  health:    ${c.health.status}${c.health.checkedAt ? ` (checked ${c.health.checkedAt})` : ''}`);
  out.line(`  updated:   ${c.updatedAt}`);
}

const describeStage = (s: Stage) => `#${s.index + 1} ${s.rolloutPercent}% since ${s.startedAt}${s.endedAt ? ` until ${s.endedAt}` : ''}`;

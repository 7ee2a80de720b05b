import fs from 'node:fs';
import { Option, type Command } from 'commander';
import { CHANGE_REQUEST_STATUSES, type ChangeRequest } from '../../api/features/change-requests/schema';
import { CliError } from '../errors';
import { show, table, type Output } from '../output';
import { positiveInt, type Session } from './flags';

const projectOption = () => new Option('--project <id>', 'project id').makeOptionMandatory();
const requestsPath = (projectId: string, rest = '') => `/api/projects/${encodeURIComponent(projectId)}/change-requests${rest}`;
const requestPath = (projectId: string, id: string, rest = '') => requestsPath(projectId, `/${encodeURIComponent(id)}${rest}`);

/** `flagship change-requests …`: flag changes that need approval (docs/cli.md#change-requests). */
export function changeRequestCommands(program: Command, session: Session): void {
  const requests = program.command('change-requests').description('open, review, approve and apply change requests (flag changes that need approval)');

  requests
    .command('list')
    .description("a project's change requests, newest first")
    .addOption(projectOption())
    .addOption(new Option('--status <status>', 'only this status').choices(CHANGE_REQUEST_STATUSES))
    .addOption(new Option('--limit <n>', 'at most this many (1-100)').default(100).argParser(positiveInt))
    .action(async (opts: { project: string; status?: string; limit: number }, cmd: Command) => {
      const { api, out } = session(cmd);
      const page = await api.get<{ changeRequests: ChangeRequest[]; total: number }>(requestsPath(opts.project), { status: opts.status, limit: opts.limit });
      out.result(page, () => {
        if (!page.changeRequests.length) return out.say('No change requests.');
        const rows = page.changeRequests.map((r) => ({
          id: r.id,
          status: r.status,
          approvals: `${r.approvals.length}/${r.requiredApprovals}`,
          changes: String(r.changes.length),
          author: r.createdByName,
          created: r.createdAt,
          title: r.title,
        }));
        out.line(table(rows, ['id', 'status', 'approvals', 'changes', 'author', 'created', 'title']));
        if (page.total > page.changeRequests.length) out.say(`Showing ${page.changeRequests.length} of ${page.total}; narrow with --status.`);
      });
    });

  requests
    .command('show <id>')
    .description('one change request: changes, approvals, simulated impact, conflicts')
    .addOption(projectOption())
    .action(async (id: string, opts: { project: string }, cmd: Command) => {
      const { api, out } = session(cmd);
      const request = await api.get<ChangeRequest>(requestPath(opts.project, id));
      out.result(request, () => printRequest(out, request));
    });

  requests
    .command('create')
    .description('open a change request')
    .addOption(projectOption())
    .requiredOption('--title <text>', 'what it is for')
    .option('--description <text>', 'more about it')
    .option('--change <json>', 'a change, e.g. \'{"serviceId":"…","environment":"production","flagKey":"checkout","action":"toggle","body":{"enabled":true}}\' (repeatable)', collect, [])
    .addOption(new Option('--file <path>', 'a JSON file with the array of changes (- for stdin)').conflicts('change'))
    .option('--schedule <iso>', 'apply at this time once approved (ISO 8601)')
    .action(async (opts: { project: string; title: string; description?: string; change: string[]; file?: string; schedule?: string }, cmd: Command) => {
      const { api, out } = session(cmd);
      if (opts.file === undefined && !opts.change.length) throw new CliError('Give the changes: --change <json> (repeatable) or --file <path>');
      const changes = opts.file === undefined ? opts.change.map((text) => parseJson(text, '--change')) : parseJson(readFile(opts.file), '--file');
      const request = await api.post<ChangeRequest>(requestsPath(opts.project), { title: opts.title, description: opts.description, changes, scheduledAt: opts.schedule });
      out.result(request, () => {
        out.line(`Opened change request ${request.id}: ${request.status}`);
        printState(out, request);
      });
    });

  requests
    .command('approve <id>')
    .description('approve a change request as yourself')
    .addOption(projectOption())
    .option('--comment <text>', 'a note with the approval')
    .action(async (id: string, opts: { project: string; comment?: string }, cmd: Command) => {
      const { api, out } = session(cmd);
      await transition(out, api.post<ChangeRequest>(requestPath(opts.project, id, '/approve'), { comment: opts.comment }));
    });

  requests
    .command('reject <id>')
    .description('reject a change request (final)')
    .addOption(projectOption())
    .requiredOption('--comment <text>', 'why')
    .action(async (id: string, opts: { project: string; comment: string }, cmd: Command) => {
      const { api, out } = session(cmd);
      await transition(out, api.post<ChangeRequest>(requestPath(opts.project, id, '/reject'), { comment: opts.comment }));
    });

  requests
    .command('cancel <id>')
    .description('withdraw a change request (its author, or an owner or admin; final)')
    .addOption(projectOption())
    .action(async (id: string, opts: { project: string }, cmd: Command) => {
      const { api, out } = session(cmd);
      await transition(out, api.post<ChangeRequest>(requestPath(opts.project, id, '/cancel')));
    });

  requests
    .command('apply <id>')
    .description('apply an approved change request now, all changes at once')
    .addOption(projectOption())
    .action(async (id: string, opts: { project: string }, cmd: Command) => {
      const { api, out } = session(cmd);
      await transition(out, api.post<ChangeRequest>(requestPath(opts.project, id, '/apply')));
    });
}

async function transition(out: Output, answer: Promise<ChangeRequest>) {
  const request = await answer;
  out.result(request, () => {
    out.line(`${request.id} is now ${request.status}`);
    printState(out, request);
  });
}

function printState(out: Output, r: ChangeRequest) {
  out.line(`  approvals: ${r.approvals.length} of ${r.requiredApprovals}${r.approvals.length ? ` (${r.approvals.map((a) => a.name).join(', ')})` : ''}`);
  if (r.scheduledAt) out.line(`  scheduled: ${r.scheduledAt}`);
  if (r.appliedAt) out.line(`  applied:   ${r.appliedAt}`);
  if (r.failureReason) out.line(`  failed:    ${r.failureReason}`);
}

function printRequest(out: Output, r: ChangeRequest) {
  out.line(`${r.id}  ${r.status}  ${r.title}`);
  if (r.description) out.line(`  ${r.description}`);
  out.line(`  author:    ${r.createdByName}, ${r.createdAt}`);
  printState(out, r);
  for (const a of r.approvals) out.line(`    ✓ ${a.name} at ${a.at}${a.comment ? `: ${a.comment}` : ''}`);
  if (r.rejection) out.line(`  rejected:  by ${r.rejection.name} at ${r.rejection.at}: ${r.rejection.comment}`);
  out.line(`  approvers: ${r.approverRoles.join(', ') || 'none needed'}`);
  out.line('  changes:');
  for (const c of r.changes) {
    const impact = r.impact.find((i) => i.serviceId === c.serviceId && i.environment === c.environment && i.flagKey === c.flagKey);
    out.line(
      `    ${c.action} ${c.flagKey} (${c.environment}, service ${c.serviceId})${c.baseVersion === null ? '' : ` from version ${c.baseVersion}`}: ${show(c.body ?? {})}` +
        (impact ? `; ${impact.evaluated ? `${impact.changed} of ${impact.evaluated} recent contexts would change` : 'no recent contexts to measure its impact on'}` : ''),
    );
  }
  for (const c of r.conflicts) out.line(`  conflict:  ${c.flagKey} (${c.environment}) is at version ${c.currentVersion ?? 'deleted'}, the request was made on ${c.baseVersion}`);
  const open = Object.entries(r.actions)
    .filter(([, allowed]) => allowed)
    .map(([action]) => action);
  out.line(`  you may:   ${open.join(', ') || 'nothing'}`);
}

const collect = (value: string, previous: string[]) => [...previous, value];

function readFile(file: string): string {
  try {
    return fs.readFileSync(file === '-' ? 0 : file, 'utf8');
  } catch (error) {
    throw new CliError(`Cannot read ${file}: ${(error as Error).message}`);
  }
}

/** JSON as the user typed it; its shape is the server's to check. */
function parseJson(text: string, name: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    throw new CliError(`${name} must be JSON`);
  }
}

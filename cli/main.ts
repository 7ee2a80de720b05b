import { Command, CommanderError } from 'commander';
import { ApiClient } from './api';
import { authCommands } from './commands/auth';
import { canaryCommands } from './commands/canary';
import { changeRequestCommands } from './commands/change-requests';
import { flagCommands } from './commands/flags';
import { resolveCredentials } from './credentials';
import { CliError, EXIT, notLoggedIn } from './errors';
import { createOutput } from './output';

interface GlobalOptions {
  server?: string;
  json?: boolean;
}

const globalsOf = (cmd: Command) => cmd.optsWithGlobals<GlobalOptions>();
const output = (cmd: Command) => createOutput(Boolean(globalsOf(cmd).json));

/** The API client of a command: the stored login, or FLAGSHIP_TOKEN / FLAGSHIP_SERVER. */
function session(cmd: Command) {
  const globals = globalsOf(cmd);
  const credentials = resolveCredentials({ server: globals.server });
  if (!credentials) throw notLoggedIn();
  return { api: new ApiClient(credentials.server, credentials.token), out: output(cmd) };
}

export function buildProgram(): Command {
  const program = new Command('flagship')
    .description('The Flagship feature-flag service from the command line (docs/cli.md)')
    .option('--server <url>', 'server base URL (default: the one logged in to, FLAGSHIP_SERVER, or http://127.0.0.1:3000)')
    .option('--json', 'machine-readable JSON on stdout only')
    // Before the commands are added: subcommands copy these settings when created.
    .exitOverride()
    .showHelpAfterError();
  authCommands(program, session, output);
  flagCommands(program, session);
  canaryCommands(program, session);
  changeRequestCommands(program, session);
  return program;
}

/** Runs the CLI; resolves to its exit code. */
export async function main(argv: string[]): Promise<number> {
  const program = buildProgram();
  const json = argv.includes('--json');
  try {
    await program.parseAsync(argv);
    return EXIT.ok;
  } catch (error) {
    if (error instanceof CommanderError) return error.exitCode === 0 ? EXIT.ok : EXIT.failed;
    const failure = error instanceof CliError ? error : new CliError(`Unexpected failure: ${(error as Error).message}`);
    if (json) {
      const { api, hint } = failure;
      process.stderr.write(`${JSON.stringify({ error: api?.error ?? 'CLI error', message: failure.message, status: api?.status, code: api?.code, hint, exitCode: failure.exitCode })}\n`);
    } else process.stderr.write(`Error: ${failure.message}\n${failure.hint ? `Hint: ${failure.hint}\n` : ''}`);
    return failure.exitCode;
  }
}

if (require.main === module) {
  // Exits at once: open keep-alive sockets must not hold a finished command.
  void main(process.argv).then((code) => process.exit(code));
}

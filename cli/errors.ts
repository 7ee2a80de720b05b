/** Exit codes (docs/cli.md): scripts tell "fix the call" from "log in first". */
export const EXIT = { ok: 0, failed: 1, notLoggedIn: 2 } as const;

/** A failure the CLI explains to its user and exits with. */
export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode: number = EXIT.failed,
    /** The API's answer when the failure is one (status and its error envelope, with its `code` when it has one). */
    readonly api?: { status: number; error: string; code?: string },
    /** What to do about it, printed after the message. */
    readonly hint?: string,
  ) {
    super(message);
    this.name = 'CliError';
  }
}

export const notLoggedIn = (why = 'Not logged in') => new CliError(`${why}: run \`flagship login\` (or set FLAGSHIP_TOKEN)`, EXIT.notLoggedIn);

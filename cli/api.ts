import { CliError, EXIT, notLoggedIn } from './errors';

export type Query = Record<string, string | number | boolean | undefined>;

/**
 * The flag service's REST API as the CLI calls it: bearer token, JSON, the error envelope of
 * docs/errors.md.
 */
export class ApiClient {
  constructor(
    readonly server: string,
    private readonly token: string,
  ) {}

  /** The same server with another credential (a project API token for evaluation and streams). */
  withToken(token: string): ApiClient {
    return new ApiClient(this.server, token);
  }

  get<T>(path: string, query?: Query): Promise<T> {
    return this.request<T>('GET', path, { query });
  }

  post<T>(path: string, body?: unknown, query?: Query): Promise<T> {
    return this.request<T>('POST', path, { query, body });
  }

  /** An API URL with its query (undefined values left out). */
  url(path: string, query: Query = {}): string {
    const url = new URL(this.server + path);
    for (const [name, value] of Object.entries(query)) if (value !== undefined) url.searchParams.set(name, String(value));
    return url.toString();
  }

  get authorization(): string {
    return `Bearer ${this.token}`;
  }

  async request<T>(method: string, path: string, opts: { query?: Query; body?: unknown } = {}): Promise<T> {
    const headers: Record<string, string> = { authorization: this.authorization, accept: 'application/json' };
    if (opts.body !== undefined) headers['content-type'] = 'application/json';
    let res: Response;
    try {
      res = await fetch(this.url(path, opts.query), { method, headers, body: opts.body === undefined ? undefined : JSON.stringify(opts.body) });
    } catch (error) {
      throw new CliError(`Cannot reach ${this.server}: ${(error as Error & { cause?: Error }).cause?.message ?? (error as Error).message}`);
    }
    const text = await res.text();
    const body = parseJson(text);
    if (res.ok) return body as T;
    throw apiError(res.status, body, text);
  }
}

function parseJson(text: string): unknown {
  if (!text) return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/**
 * The error envelope `{error, message}` (docs/errors.md) as a CliError; 401 means the token is gone
 * or wrong.
 */
export function apiError(status: number, body: unknown, text: string): CliError {
  const envelope = (body ?? {}) as { error?: unknown; message?: unknown; code?: unknown };
  const error = typeof envelope.error === 'string' ? envelope.error : `HTTP ${status}`;
  const message = typeof envelope.message === 'string' ? envelope.message : text.slice(0, 200) || error;
  if (status === 401) return notLoggedIn(`The server refused the token (${message})`);
  return new CliError(`${message} (HTTP ${status})`, EXIT.failed, { status, error, code: typeof envelope.code === 'string' ? envelope.code : undefined });
}

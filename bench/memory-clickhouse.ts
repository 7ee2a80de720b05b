/**
 * A small ClickHouse HTTP interface on loopback, backed by chDB (the real ClickHouse engine,
 * in this process).
 *
 * WHY IT EXISTS: so the app can run on the production profile with its analytics on ANOTHER
 * process (CLICKHOUSE_URL), as in production, where ClickHouse is a server elsewhere. This
 * machine has no ClickHouse server and cannot download one; without CLICKHOUSE_URL the app would
 * load chDB into its own process (the embedded profile), which maps a few hundred MB and would make
 * a data-plane memory figure meaningless, and several processes could not share one store. Used by
 * the benches (bench/memory.ts, bench:peers, bench:faults) and the multi-instance test
 * (test/platform/multi-instance.test.ts); never by the app. It is not a ClickHouse server: no
 * users, no sessions, one query at a time.
 *
 * Run: `node --import tsx bench/memory-clickhouse.ts` (CH_SHIM_PORT, default 0 = any free port;
 * CH_SHIM_PATH, the chDB data directory, default a temporary one removed at exit). Under a parent
 * with an IPC channel it sends {type: 'ready', url} and exits when the parent goes; otherwise it
 * prints the URL. SIGTERM/SIGINT stop it.
 *
 * What it implements (what @clickhouse/client 1.x sends and reads, see
 * node_modules/@clickhouse/client/dist/connection/node_base_connection.js and socket_pool.js):
 *   - GET /ping, GET / without a query, GET /replicas_status: `Ok.`
 *   - GET or POST / : the SQL is the `query` URL parameter, the body, or both (ClickHouse's rule:
 *     the parameter is the start of the statement and the body the rest). `INSERT INTO t [(cols)]
 *     FORMAT f` in the parameter with the data in the body goes through chDB's raw insert (text
 *     formats: JSONEachRow, JSONCompactEachRow, CSV[WithNames], TabSeparated/TSV[WithNames]),
 *     which reports the rows written; anything else runs as one statement text.
 *   - multipart/form-data bodies (the client's form for long query parameters): parts `query`
 *     and `param_<name>`.
 *   - `database` (as `USE`, kept while the next request asks for the same), `param_<name>` query
 *     parameters (bound by the engine: `SET param_<name> = '<value as sent>'`), `default_format`
 *     (else TabSeparated), and every other parameter as a ClickHouse setting (`SET k = 'v'`;
 *     settings a previous request set and this one does not are reset with `SET k = DEFAULT`).
 *     HTTP-only parameters (query_id, session_id, compress, wait_end_of_query, ...) are not
 *     settings here; query_id is echoed. Credentials are accepted and ignored.
 *   - Content-Encoding gzip/deflate/br of the request body; with enable_http_compression=1 the
 *     answer is compressed to the first of gzip/deflate/br the client accepts. ClickHouse's own
 *     block compression (`compress=1` / `decompress=1`) is refused.
 *   - Answers: the result bytes as chDB produced them in the statement's FORMAT (else the default
 *     format), with Content-Type, X-ClickHouse-Query-Id, X-ClickHouse-Format,
 *     X-ClickHouse-Timezone, X-ClickHouse-Server-Display-Name and X-ClickHouse-Summary
 *     ({read_rows, read_bytes, written_rows, written_bytes, total_rows_to_read, result_rows,
 *     result_bytes, elapsed_ns} as strings; read_* is the result size chDB reports, written_* is
 *     filled for raw inserts only). Node's server adds `Keep-Alive: timeout=10`.
 *   - Errors: ClickHouse's status mapping for common codes (404 unknown table/database, 400
 *     syntax and argument errors, else 500), X-ClickHouse-Exception-Code, and the engine's
 *     `Code: N. DB::Exception: ... (NAME)` text as the body, which the client parses into a
 *     ClickHouseError.
 * Like a server (unlike chDB's own default), JSON formats quote 64-bit integers.
 * Requests are served one at a time on one chDB session (USE and SET are session state);
 * /ping is answered at once.
 */
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { Session } from 'chdb';

/** URL parameters of the HTTP interface that are not ClickHouse settings. */
const HTTP_ONLY = new Set([
  'query',
  'query_id',
  'database',
  'default_format',
  'session_id',
  'session_timeout',
  'session_check',
  'role',
  'user',
  'password',
  'quota_key',
  'compress',
  'decompress',
  'enable_http_compression',
  'http_zlib_compression_level',
  'wait_end_of_query',
  'send_progress_in_http_headers',
  'http_headers_progress_interval_ms',
  'buffer_size',
  'http_response_buffer_size',
  'add_http_cors_header',
  'cancel_http_readonly_queries_on_client_close',
  'http_native_compression_disable_checksumming_on_decompress',
]);

/** Raw insert formats chDB takes as bytes (its whitelist; TSV aliases included). */
const RAW_INSERT_FORMATS = new Set([
  'JSONEachRow',
  'JSONCompactEachRow',
  'CSV',
  'CSVWithNames',
  'TSV',
  'TabSeparated',
  'TSVWithNames',
  'TabSeparatedWithNames',
]);

/** ClickHouse's HTTP status for some exception codes (src/Server/HTTPHandler.cpp); others are 500. */
const STATUS_BY_CODE: Record<number, number> = {
  60: 404, // UNKNOWN_TABLE
  81: 404, // UNKNOWN_DATABASE
  6: 400, // CANNOT_PARSE_TEXT
  26: 400, // CANNOT_PARSE_QUOTED_STRING
  27: 400, // CANNOT_PARSE_INPUT_ASSERTION_FAILED
  36: 400, // BAD_ARGUMENTS
  43: 400, // ILLEGAL_TYPE_OF_ARGUMENT
  46: 400, // UNKNOWN_FUNCTION
  47: 400, // UNKNOWN_IDENTIFIER
  62: 400, // SYNTAX_ERROR
  115: 400, // UNKNOWN_SETTING
  456: 400, // UNKNOWN_QUERY_PARAMETER
  457: 400, // BAD_QUERY_PARAMETER
};

const INSERT_RE = /^\s*INSERT\s+INTO\s+([A-Za-z0-9_.`"]+)\s*(?:\(([^)]*)\))?\s*FORMAT\s+([A-Za-z0-9_]+)\s*;?\s*$/i;
const FORMAT_RE = /\bFORMAT\s+([A-Za-z0-9_]+)\s*;?\s*(?:SETTINGS\s[^;]*)?$/i;

interface Summary {
  read_rows: number;
  read_bytes: number;
  written_rows: number;
  written_bytes: number;
  result_rows: number;
  result_bytes: number;
  elapsed_ns: number;
}

class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly code: number,
    message: string,
  ) {
    super(message);
  }
}

/** A single-quoted SQL string literal. */
const literal = (s: string) => `'${s.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;
const identifier = (s: string) => `\`${s.replace(/\\/g, '\\\\').replace(/`/g, '\\`')}\``;
const unquote = (s: string) => s.trim().replace(/^[`"]|[`"]$/g, '');

function contentType(format: string): string {
  if (format.startsWith('JSON')) return 'application/json; charset=UTF-8';
  if (format.startsWith('TabSeparated') || format.startsWith('TSV')) return 'text/tab-separated-values; charset=UTF-8';
  if (format.startsWith('CSV')) return `text/csv; charset=UTF-8; header=${format.includes('WithNames') ? 'present' : 'absent'}`;
  return 'text/plain; charset=UTF-8';
}

function readBody(req: http.IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

function decodeBody(body: Buffer, encoding: string | undefined): Buffer {
  switch ((encoding ?? '').toLowerCase()) {
    case '':
    case 'identity':
      return body;
    case 'gzip':
      return zlib.gunzipSync(body);
    case 'deflate':
      return zlib.inflateSync(body);
    case 'br':
      return zlib.brotliDecompressSync(body);
    default:
      throw new HttpError(400, 36, `Code: 36. DB::Exception: Unsupported Content-Encoding '${encoding}' in this ClickHouse shim. (BAD_ARGUMENTS)`);
  }
}

/** The client's multipart/form-data body: parts `query` and `param_<name>`. */
function parseMultipart(body: Buffer, type: string): Map<string, string> {
  const boundary = /boundary=(?:"([^"]+)"|([^;]+))/i.exec(type);
  if (!boundary) throw new HttpError(400, 36, 'Code: 36. DB::Exception: multipart body without a boundary. (BAD_ARGUMENTS)');
  const delimiter = `--${boundary[1] ?? boundary[2]}`;
  const parts = new Map<string, string>();
  for (const raw of body.toString('utf8').split(delimiter)) {
    const headerEnd = raw.indexOf('\r\n\r\n');
    if (headerEnd < 0) continue;
    const name = /name="([^"]*)"/i.exec(raw.slice(0, headerEnd));
    if (!name) continue;
    parts.set(name[1], raw.slice(headerEnd + 4).replace(/\r\n$/, ''));
  }
  return parts;
}

function compress(body: Buffer, acceptEncoding: string | undefined): { body: Buffer; encoding?: string } {
  const accepted = (acceptEncoding ?? '').toLowerCase();
  if (/\bgzip\b/.test(accepted)) return { body: zlib.gzipSync(body), encoding: 'gzip' };
  if (/\bdeflate\b/.test(accepted)) return { body: zlib.deflateSync(body), encoding: 'deflate' };
  if (/\bbr\b/.test(accepted)) return { body: zlib.brotliCompressSync(body), encoding: 'br' };
  return { body };
}

function asClickHouseError(error: unknown): HttpError {
  if (error instanceof HttpError) return error;
  const message = error instanceof Error ? error.message : String(error);
  const code = /Code: (\d+)\./.exec(message);
  if (code) {
    const n = Number(code[1]);
    return new HttpError(STATUS_BY_CODE[n] ?? 500, n, message);
  }
  // Not from the engine (e.g. the chDB wrapper refused an argument): in ClickHouse's shape, so the client parses it.
  return new HttpError(500, 1001, `Code: 1001. DB::Exception: ${message}. (STD_EXCEPTION)`);
}

export interface ClickHouseShim {
  url: string;
  close(): Promise<void>;
}

export async function startClickHouseShim(opts: { port?: number; dataPath: string }): Promise<ClickHouseShim> {
  fs.mkdirSync(opts.dataPath, { recursive: true });
  // A ClickHouse server quotes 64-bit integers in JSON formats by default; clickhouse-local (chDB) does not.
  const session = new Session(opts.dataPath, { connectionArgs: ['--output_format_json_quote_64bit_integers=1'] });
  const timezone = (await session.queryAsync('SELECT timezone()', { format: 'TabSeparated' })).text().trim() || 'UTC';
  const displayName = os.hostname();

  // Session state the requests share: the current database, the settings and query parameters set on it.
  let currentDatabase = 'default';
  const appliedSettings = new Map<string, string>();
  let queue: Promise<unknown> = Promise.resolve();
  const serialized = <T>(fn: () => Promise<T>): Promise<T> => {
    const run = queue.then(fn, fn);
    queue = run.catch(() => undefined);
    return run;
  };

  /** Brings the session to this request's database, settings and parameters (one statement at a time, so the state known here stays true when one fails). */
  async function prepare(database: string, settings: Map<string, string>, params: Map<string, string>) {
    const run = (sql: string) => session.queryAsync(sql, { format: 'TabSeparated' });
    if (database !== currentDatabase) {
      await run(`USE ${identifier(database)}`);
      currentDatabase = database;
    }
    for (const name of [...appliedSettings.keys()]) {
      if (settings.has(name)) continue;
      await run(`SET ${name} = DEFAULT`);
      appliedSettings.delete(name);
    }
    for (const [name, value] of settings) {
      if (appliedSettings.get(name) === value) continue;
      if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) throw new HttpError(400, 115, `Code: 115. DB::Exception: Unknown setting '${name}'. (UNKNOWN_SETTING)`);
      await run(`SET ${name} = ${literal(value)}`);
      appliedSettings.set(name, value);
    }
    for (const name of params.keys()) {
      if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) throw new HttpError(400, 457, `Code: 457. DB::Exception: Bad query parameter name '${name}'. (BAD_QUERY_PARAMETER)`);
    }
    if (params.size > 0) await run([...params].map(([name, value]) => `SET param_${name} = ${literal(value)}`).join(';\n'));
  }

  async function execute(req: http.IncomingMessage, url: URL, rawBody: Buffer) {
    const search = url.searchParams;
    if (search.get('compress') === '1' || search.get('decompress') === '1') {
      throw new HttpError(400, 36, "Code: 36. DB::Exception: ClickHouse block compression (compress/decompress=1) is not supported by this shim; use Content-Encoding. (BAD_ARGUMENTS)");
    }
    let body = decodeBody(rawBody, req.headers['content-encoding']);
    let queryText = search.get('query') ?? '';
    const params = new Map<string, string>();
    const settings = new Map<string, string>();
    for (const [name, value] of search) {
      if (name.startsWith('param_')) params.set(name.slice('param_'.length), value);
      else if (!HTTP_ONLY.has(name)) settings.set(name, value);
    }
    const type = req.headers['content-type'] ?? '';
    if (type.toLowerCase().startsWith('multipart/form-data')) {
      const parts = parseMultipart(body, type);
      for (const [name, value] of parts) {
        if (name === 'query') queryText = queryText ? `${queryText}\n${value}` : value;
        else if (name.startsWith('param_')) params.set(name.slice('param_'.length), value);
      }
      body = Buffer.alloc(0);
    }
    const database = search.get('database') || 'default';
    const defaultFormat = search.get('default_format') || 'TabSeparated';
    const summary: Summary = { read_rows: 0, read_bytes: 0, written_rows: 0, written_bytes: 0, result_rows: 0, result_bytes: 0, elapsed_ns: 0 };

    return serialized(async () => {
      await prepare(database, settings, params);
      const insert = queryText && body.length > 0 ? INSERT_RE.exec(queryText) : null;
      if (insert && RAW_INSERT_FORMATS.has(insert[3])) {
        const columns = insert[2]?.split(',').map(unquote).filter(Boolean);
        const result = await session.insert({
          table: unquote(insert[1]),
          values: body,
          format: insert[3] as 'JSONEachRow',
          ...(columns?.length ? { columns } : {}),
        });
        summary.written_rows = result.rowsWritten;
        summary.written_bytes = result.bytesWritten;
        summary.elapsed_ns = Math.round(result.elapsed * 1e9);
        return { output: Buffer.alloc(0), format: insert[3], summary };
      }
      // ClickHouse's rule: the `query` parameter is the beginning of the statement, the body the rest.
      const sql = queryText && body.length > 0 ? `${queryText}\n${body.toString('utf8')}` : queryText || body.toString('utf8');
      if (!sql.trim()) throw new HttpError(400, 62, 'Code: 62. DB::Exception: Empty query. (SYNTAX_ERROR)');
      const result = await session.queryAsync(sql, { format: defaultFormat });
      const output = Buffer.from(result.bytes());
      summary.read_rows = summary.result_rows = result.rowsRead;
      summary.read_bytes = result.bytesRead;
      summary.result_bytes = output.length;
      summary.elapsed_ns = Math.round(result.elapsed * 1e9);
      const format = /^\s*INSERT\b/i.test(sql) ? defaultFormat : (FORMAT_RE.exec(sql)?.[1] ?? defaultFormat);
      return { output, format, summary };
    });
  }

  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://localhost');
    const queryId = url.searchParams.get('query_id') || randomUUID();
    const common = { 'X-ClickHouse-Server-Display-Name': displayName, 'X-ClickHouse-Query-Id': queryId, 'X-ClickHouse-Timezone': timezone };
    const ok = () => {
      req.resume();
      res.writeHead(200, { ...common, 'Content-Type': 'text/plain; charset=UTF-8' }).end('Ok.\n');
    };
    if (url.pathname === '/ping' || url.pathname === '/replicas_status') return ok();
    if (url.pathname !== '/') {
      req.resume();
      res.writeHead(404, { ...common, 'Content-Type': 'text/plain; charset=UTF-8', 'X-ClickHouse-Exception-Code': '36' });
      return res.end(`Code: 36. DB::Exception: There is no handle ${url.pathname} in this ClickHouse shim. (BAD_ARGUMENTS)\n`);
    }
    if (req.method === 'GET' && !url.searchParams.has('query')) return ok();
    if (req.method !== 'GET' && req.method !== 'POST') {
      req.resume();
      res.writeHead(405, { ...common, Allow: 'GET, POST' });
      return res.end();
    }
    readBody(req)
      .then((body) => execute(req, url, body))
      .then(({ output, format, summary }) => {
        const summaryHeader = JSON.stringify({ ...Object.fromEntries(Object.entries(summary).map(([k, v]) => [k, String(v)])), total_rows_to_read: '0' });
        const compressed = url.searchParams.get('enable_http_compression') === '1' ? compress(output, req.headers['accept-encoding']) : { body: output };
        res.writeHead(200, {
          ...common,
          'Content-Type': contentType(format),
          'X-ClickHouse-Format': format,
          'X-ClickHouse-Summary': summaryHeader,
          'Content-Length': compressed.body.length,
          ...(compressed.encoding ? { 'Content-Encoding': compressed.encoding } : {}),
        });
        res.end(compressed.body);
      })
      .catch((error: unknown) => {
        const e = asClickHouseError(error);
        const text = `${e.message.trimEnd()}\n`;
        res.writeHead(e.status, {
          ...common,
          'Content-Type': 'text/plain; charset=UTF-8',
          'X-ClickHouse-Exception-Code': String(e.code),
          'Content-Length': Buffer.byteLength(text),
        });
        res.end(text);
      });
  });
  server.keepAliveTimeout = 10_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, '127.0.0.1', resolve);
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    async close() {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
      await queue;
      session.close();
    },
  };
}

async function main() {
  const ownPath = !process.env.CH_SHIM_PATH;
  const dataPath = process.env.CH_SHIM_PATH || fs.mkdtempSync(path.join(os.tmpdir(), 'flags-ch-shim-'));
  const shim = await startClickHouseShim({ port: Number(process.env.CH_SHIM_PORT ?? 0), dataPath });
  let stopping = false;
  const stop = () => {
    if (stopping) return;
    stopping = true;
    const force = setTimeout(() => process.exit(1), 5_000);
    force.unref();
    shim
      .close()
      .catch(() => undefined)
      .finally(() => {
        if (ownPath) fs.rmSync(dataPath, { recursive: true, force: true });
        process.exit(0);
      });
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  if (process.send) {
    process.on('disconnect', stop);
    process.on('message', (m: { type?: string }) => {
      if (m?.type === 'stop') stop();
      if (m?.type === 'memory') process.send!({ type: 'memory', usage: process.memoryUsage() });
    });
    process.send({ type: 'ready', url: shim.url });
  } else {
    console.log(`ClickHouse HTTP shim (chDB) listening on ${shim.url}, data in ${dataPath}`);
  }
}

if (require.main === module) {
  main().catch((error) => {
    console.error('ClickHouse shim failed:', error);
    process.exit(1);
  });
}

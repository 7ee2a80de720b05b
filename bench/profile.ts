/**
 * `npm run bench:profile -- <file.cpuprofile> [...]`: where a server's CPU went, by part of a
 * request. Reads V8 CPU profiles (`node --cpu-prof`, e.g. through bench:peers'
 * BENCH_SERVER_NODE_ARGS) and gives each sample to the first part its stack names, from the
 * running function outwards:
 *
 *   parsing        the HTTP parser, reading and JSON-parsing the body, the evaluation context
 *   auth           credentials, access and rate limits
 *   evaluation     the engine and the snapshot it reads
 *   recording      the evaluation recorder and the batched event writer
 *   serialization  building and stringifying the answer
 *   write          writing the answer to the socket
 *   gc             the garbage collector
 *   other          everything else (the rest of node's HTTP server, event loop, timers)
 *
 * Idle samples are left out. The top functions by self time are listed under the table, to see
 * what a part is made of. BENCH_PROFILE_WINDOW=SECONDS keeps only the busiest window of that many
 * seconds (the measured run, e.g. 8 for bench:peers' rounds): a whole profile also holds the
 * server's start (module loading, the set-up's requests) and its shutdown (the last flush).
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string };
  children?: number[];
}
interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

const WINDOW_US = Number(process.env.BENCH_PROFILE_WINDOW ?? 0) * 1e6;

type Part = 'parsing' | 'auth' | 'evaluation' | 'recording' | 'serialization' | 'write' | 'gc' | 'other';
const PARTS: Part[] = ['parsing', 'auth', 'evaluation', 'recording', 'serialization', 'write', 'gc', 'other'];

/** First match wins, tried on each frame from the running function outwards. */
const RULES: { part: Part; test: (name: string, url: string) => boolean }[] = [
  { part: 'gc', test: (name) => name === '(garbage collector)' },
  { part: 'recording', test: (_, url) => /evaluation\/recorder|analytics\/writer|evaluation-log/.test(url) },
  { part: 'evaluation', test: (_, url) => /evaluation\/engine\/|evaluation\/snapshots|evaluation\/service/.test(url) },
  { part: 'auth', test: (_, url) => /evaluation\/access|\/auth\/|features\/tokens|rate-limit|evaluation\/stream-limits/.test(url) },
  { part: 'serialization', test: (name, url) => /serializ|stringify|respond|answer|headers$/i.test(name) && /\/api\//.test(url) },
  { part: 'serialization', test: (name, url) => /_storeHeader|processHeader|setHeader|writeHead/.test(name) && /node:_http/.test(url) },
  { part: 'write', test: (name, url) => /node:net|node:internal\/stream_base_commons|node:internal\/streams\/writable/.test(url) || (/^(end|_send|_writeRaw|write_|_finish)$/.test(name) && /node:_http_outgoing/.test(url)) },
  { part: 'parsing', test: (name, url) => /evaluation\/contexts|evaluation\/schemas/.test(url) || /parse|onBody|parserOn/i.test(name) },
  { part: 'parsing', test: (_, url) => /node:_http_common/.test(url) },
];

function partOf(stack: ProfileNode[]): Part {
  for (const node of stack) {
    const { functionName, url } = node.callFrame;
    for (const rule of RULES) if (rule.test(functionName, url)) return rule.part;
  }
  return 'other';
}

function summarize(file: string) {
  const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const stackOf = (id: number) => {
    const stack: ProfileNode[] = [];
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) stack.push(byId.get(at)!);
    return stack;
  };
  const partMemo = new Map<number, Part | 'idle'>();
  const perPart = new Map<Part, number>();
  const selfTime = new Map<string, { part: Part; us: number }>();
  const [from, to] = WINDOW_US > 0 ? busiestWindow(profile, byId, WINDOW_US) : [0, profile.samples.length];
  let total = 0;
  for (let i = from; i < to; i++) {
    const id = profile.samples[i];
    const us = profile.timeDeltas[i + 1] ?? 0;
    let part = partMemo.get(id);
    if (part === undefined) {
      const node = byId.get(id)!;
      part = node.callFrame.functionName === '(idle)' ? 'idle' : partOf(stackOf(id));
      partMemo.set(id, part);
    }
    if (part === 'idle') continue;
    total += us;
    perPart.set(part, (perPart.get(part) ?? 0) + us);
    const { functionName, url } = byId.get(id)!.callFrame;
    const name = `${functionName || '(anonymous)'} ${url ? path.basename(url) : ''}`.trim();
    const entry = selfTime.get(name) ?? { part, us: 0 };
    entry.us += us;
    selfTime.set(name, entry);
  }
  const window = WINDOW_US > 0 ? `, the busiest ${WINDOW_US / 1e6} s` : '';
  console.log(`\n${file}: ${(total / 1e6).toFixed(2)} s of CPU sampled (idle left out${window})`);
  console.log('| part | share |\n|---|---|');
  for (const part of PARTS) console.log(`| ${part} | ${(((perPart.get(part) ?? 0) / total) * 100).toFixed(1)}% |`);
  console.log('\ntop functions by self time:');
  for (const [name, { part, us }] of [...selfTime].sort((a, b) => b[1].us - a[1].us).slice(0, 25)) {
    console.log(`  ${((us / total) * 100).toFixed(1).padStart(5)}%  ${part.padEnd(13)} ${name}`);
  }
}

/** The samples [from, to) of the `span` microseconds with the most CPU (idle left out). */
function busiestWindow(profile: CpuProfile, byId: Map<number, ProfileNode>, span: number): [number, number] {
  const at: number[] = [];
  let t = 0;
  for (const delta of profile.timeDeltas) at.push((t += delta));
  const busy = (i: number) => (byId.get(profile.samples[i])!.callFrame.functionName === '(idle)' ? 0 : (profile.timeDeltas[i + 1] ?? 0));
  let best: [number, number] = [0, 0];
  let bestCpu = -1;
  let cpu = 0;
  for (let from = 0, to = 0; to < profile.samples.length; to++) {
    cpu += busy(to);
    while (at[to] - at[from] > span) cpu -= busy(from++);
    if (cpu > bestCpu) {
      bestCpu = cpu;
      best = [from, to + 1];
    }
  }
  return best;
}

const files = process.argv.slice(2);
if (files.length === 0) {
  console.error('usage: npm run bench:profile -- <file.cpuprofile> [...]');
  process.exit(2);
}
for (const file of files) summarize(file);

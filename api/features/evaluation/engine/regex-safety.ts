/**
 * Regular-expression safety: the write-time check that a `matches` pattern runs in bounded time.
 *
 * Regular expressions
 * `matches` must be time-bounded. RE2 (linear time) was tried through re2-wasm and rejected:
 * its WebAssembly heap is fixed at 16 MB and compiled patterns are never freed, so a data
 * plane that recompiles flags on every change aborts the whole process after a few thousand
 * patterns, and each match costs about 20x native. The native `re2` binding has no such heap,
 * but npm installs it by compiling C++ (its prebuilt binaries come from outside the npm
 * registry), and its `.` and `\s` differ from JavaScript's (`.` matches `\r` and U+2028,
 * `\s` misses U+00A0). Patterns therefore run on V8's native RegExp and are bounded at write
 * time instead:
 * - a pattern is at most 512 characters, and an attribute longer than 1,024 characters never
 *   matches (input is not truncated: truncation would change what `$` means);
 * - backreferences, lookarounds, octal escapes and inline modifiers are refused;
 * - a repeated group (`*`, `+`, `{n,m}`) may not contain a variable repetition or an
 *   ambiguous alternation (`(a+)+`, `(a|a)*`, `(.*a){20}`), unless every iteration is pinned
 *   by a delimiter that its repetitions cannot consume: `(\.\d+)*` and `(\w+,)*` are fine;
 * - the worst-case backtracking is estimated (see estimateSequence) and refused above 8·n²
 *   character comparisons for n = 4,096 (the estimate keeps the earlier input cap, so every
 *   pattern stored before the cap went down is still accepted): repetitions that can stop at
 *   the same characters multiply (`.*a.*b` is cubic, because the `a` can be found by either
 *   `.*`), an unanchored pattern counts one repetition for the start positions the engine
 *   tries, a last repetition that nothing follows counts none, and alternatives that are not
 *   plain, prefix-free literals multiply the count.
 * The estimate is conservative: it refuses some safe patterns (three overlapping repetitions
 * such as `.*foo.*bar`; write `foo.*bar`, patterns are unanchored) and is meant never to
 * accept an exponential or cubic one. Worst cases are quadratic: `.*foo.*` against 1,024
 * hostile characters takes about 1 ms on the development machine. Typical matches take
 * microseconds.
 *
 * A request evaluates many patterns, so their time also counts against the request's
 * EvaluationBudget (budget.ts), and a flag stores at most MAX_MATCHES_PER_FLAG `matches`
 * conditions (checked when flags are written). The estimate cannot price a match for the
 * budget: it undercharges some accepted patterns by two orders of magnitude (`([^b]\s{2,}\S)+`
 * on 1,024 spaces is quadratic, estimated linear), so the budget measures their time.
 */

export const MAX_PATTERN_LENGTH = 512;
export const MAX_MATCH_INPUT_LENGTH = 1024;
/** `matches` conditions one flag may hold (write time; stored flags over it still evaluate, within the budget). */
export const MAX_MATCHES_PER_FLAG = 20;

/** Character sets as sorted, disjoint, inclusive [low, high] pairs of UTF-16 code units. */
type CharSet = readonly number[];

const EMPTY_SET: CharSet = [];
const ANY_CHAR: CharSet = [0, 0xffff];
const DIGIT_SET: CharSet = [0x30, 0x39];
const WORD_SET: CharSet = [0x30, 0x39, 0x41, 0x5a, 0x5f, 0x5f, 0x61, 0x7a];
const SPACE_SET: CharSet = [
  0x09, 0x0d, 0x20, 0x20, 0xa0, 0xa0, 0x1680, 0x1680, 0x2000, 0x200a, 0x2028, 0x2029, 0x202f, 0x202f,
  0x205f, 0x205f, 0x3000, 0x3000, 0xfeff, 0xfeff,
];
const LINE_TERMINATORS: CharSet = [0x0a, 0x0a, 0x0d, 0x0d, 0x2028, 0x2029];

function normalizeSet(pairs: number[]): CharSet {
  const ranges: [number, number][] = [];
  for (let i = 0; i < pairs.length; i += 2) ranges.push([pairs[i], pairs[i + 1]]);
  ranges.sort((a, b) => a[0] - b[0]);
  const merged: number[] = [];
  for (const [low, high] of ranges) {
    const last = merged.length - 1;
    if (last > 0 && low <= merged[last] + 1) merged[last] = Math.max(merged[last], high);
    else merged.push(low, high);
  }
  return merged;
}

function unionSets(a: CharSet, b: CharSet): CharSet {
  if (a.length === 0) return b;
  if (b.length === 0) return a;
  return normalizeSet([...a, ...b]);
}

function complementSet(set: CharSet): CharSet {
  const result: number[] = [];
  let next = 0;
  for (let i = 0; i < set.length; i += 2) {
    if (set[i] > next) result.push(next, set[i] - 1);
    next = set[i + 1] + 1;
  }
  if (next <= 0xffff) result.push(next, 0xffff);
  return result;
}

function setsOverlap(a: CharSet, b: CharSet): boolean {
  let i = 0;
  let j = 0;
  while (i < a.length && j < b.length) {
    if (a[i + 1] < b[j]) i += 2;
    else if (b[j + 1] < a[i]) j += 2;
    else return true;
  }
  return false;
}

const ANY_EXCEPT_LINE_TERMINATORS = complementSet(LINE_TERMINATORS);

type Atom =
  | { kind: 'char'; set: CharSet; literal: number }
  | { kind: 'anchor'; isStart: boolean }
  | { kind: 'group'; alternatives: Term[][] };

interface Term {
  atom: Atom;
  min: number;
  max: number;
}

class UnsafePattern extends Error {}

const CLASS_ESCAPES: Readonly<Record<string, CharSet>> = {
  d: DIGIT_SET,
  D: complementSet(DIGIT_SET),
  w: WORD_SET,
  W: complementSet(WORD_SET),
  s: SPACE_SET,
  S: complementSet(SPACE_SET),
};

const CONTROL_ESCAPES: Readonly<Record<string, number>> = { n: 10, r: 13, t: 9, v: 11, f: 12 };

/**
 * Reads a pattern that `new RegExp(pattern)` already accepted into terms, refusing the
 * constructs that backtrack without bound or that the estimate cannot reason about.
 */
class PatternReader {
  private position = 0;

  constructor(private readonly pattern: string) {}

  readAll(): Term[][] {
    const alternatives = this.readAlternatives();
    if (this.position < this.pattern.length) throw new UnsafePattern('unbalanced parenthesis');
    return alternatives;
  }

  private peek(offset = 0): string {
    return this.pattern.charAt(this.position + offset);
  }

  private readAlternatives(): Term[][] {
    const alternatives: Term[][] = [[]];
    while (this.position < this.pattern.length && this.peek() !== ')') {
      if (this.peek() === '|') {
        this.position++;
        alternatives.push([]);
        continue;
      }
      const atom = this.readAtom();
      alternatives[alternatives.length - 1].push(this.readQuantifier(atom));
    }
    return alternatives;
  }

  private readAtom(): Atom {
    const char = this.peek();
    this.position++;
    switch (char) {
      case '^':
        return { kind: 'anchor', isStart: true };
      case '$':
        return { kind: 'anchor', isStart: false };
      case '.':
        return { kind: 'char', set: ANY_EXCEPT_LINE_TERMINATORS, literal: -1 };
      case '(':
        return this.readGroup();
      case '[':
        return { kind: 'char', set: this.readClass(), literal: -1 };
      case '\\':
        return this.readEscape();
      default:
        return literalAtom(char.charCodeAt(0));
    }
  }

  private readGroup(): Atom {
    if (this.peek() === '?') {
      const marker = this.peek(1);
      if (marker === ':') {
        this.position += 2;
      } else if (marker === '=' || marker === '!') {
        throw new UnsafePattern('lookahead assertions are not supported');
      } else if (marker === '<' && (this.peek(2) === '=' || this.peek(2) === '!')) {
        throw new UnsafePattern('lookbehind assertions are not supported');
      } else if (marker === '<') {
        const close = this.pattern.indexOf('>', this.position);
        if (close < 0) throw new UnsafePattern('unterminated group name');
        this.position = close + 1;
      } else {
        throw new UnsafePattern('inline modifiers are not supported');
      }
    }
    const alternatives = this.readAlternatives();
    if (this.peek() !== ')') throw new UnsafePattern('unbalanced parenthesis');
    this.position++;
    return { kind: 'group', alternatives };
  }

  private readEscape(): Atom {
    const char = this.peek();
    this.position++;
    if (char === 'b' || char === 'B') return { kind: 'anchor', isStart: false };
    if (char >= '1' && char <= '9') throw new UnsafePattern('backreferences are not supported');
    if (char === 'k') throw new UnsafePattern('backreferences are not supported');
    const classSet = CLASS_ESCAPES[char];
    if (classSet !== undefined) return { kind: 'char', set: classSet, literal: -1 };
    return literalAtom(this.readCharacterEscape(char));
  }

  /** The code unit of a single-character escape whose letter was just consumed. */
  private readCharacterEscape(char: string): number {
    const control = CONTROL_ESCAPES[char];
    if (control !== undefined) return control;
    if (char === '0') {
      if (this.peek() >= '0' && this.peek() <= '9') throw new UnsafePattern('octal escapes are not supported');
      return 0;
    }
    if (char === 'x' || char === 'u') {
      const width = char === 'x' ? 2 : 4;
      const hex = this.pattern.slice(this.position, this.position + width);
      if (hex.length === width && /^[0-9a-fA-F]+$/.test(hex)) {
        this.position += width;
        return parseInt(hex, 16);
      }
      return char.charCodeAt(0);
    }
    if (char === 'c') {
      const letter = this.peek();
      if (!/^[A-Za-z]$/.test(letter)) throw new UnsafePattern('\\c must be followed by a letter');
      this.position++;
      return letter.charCodeAt(0) % 32;
    }
    return char.charCodeAt(0);
  }

  private readClass(): CharSet {
    const negated = this.peek() === '^';
    if (negated) this.position++;
    const pairs: number[] = [];
    while (this.position < this.pattern.length && this.peek() !== ']') {
      const low = this.readClassMember();
      if (this.peek() === '-' && this.peek(1) !== ']' && this.position + 1 < this.pattern.length) {
        this.position++;
        const high = this.readClassMember();
        if (typeof low === 'number' && typeof high === 'number') {
          pairs.push(low, high);
          continue;
        }
        pairs.push(0x2d, 0x2d);
        addMember(pairs, high);
      }
      addMember(pairs, low);
    }
    if (this.peek() !== ']') throw new UnsafePattern('unterminated character class');
    this.position++;
    const set = normalizeSet(pairs);
    return negated ? complementSet(set) : set;
  }

  private readClassMember(): number | CharSet {
    const char = this.peek();
    this.position++;
    if (char !== '\\') return char.charCodeAt(0);
    const escaped = this.peek();
    this.position++;
    const classSet = CLASS_ESCAPES[escaped];
    if (classSet !== undefined) return classSet;
    if (escaped === 'b') return 8;
    if (escaped >= '1' && escaped <= '9') throw new UnsafePattern('octal escapes are not supported');
    return this.readCharacterEscape(escaped);
  }

  private readQuantifier(atom: Atom): Term {
    const char = this.peek();
    let min = 1;
    let max = 1;
    if (char === '*' || char === '+' || char === '?') {
      this.position++;
      min = char === '+' ? 1 : 0;
      max = char === '?' ? 1 : Infinity;
    } else if (char === '{') {
      const braces = /^\{(\d+)(,(\d*))?\}/.exec(this.pattern.slice(this.position));
      if (braces === null) return { atom, min, max };
      this.position += braces[0].length;
      min = Number(braces[1]);
      max = braces[2] === undefined ? min : braces[3] === '' ? Infinity : Number(braces[3]);
    } else {
      return { atom, min, max };
    }
    if (this.peek() === '?') this.position++;
    return { atom, min, max };
  }
}

function literalAtom(code: number): Atom {
  return { kind: 'char', set: [code, code], literal: code };
}

function addMember(pairs: number[], member: number | CharSet): void {
  if (typeof member === 'number') pairs.push(member, member);
  else pairs.push(...member);
}

/** The input length the estimate assumes: the earlier input cap, four times the current one, so acceptance did not change. */
const ASSUMED_INPUT_LENGTH = 4096;
const BACKTRACKING_BUDGET = 8 * ASSUMED_INPUT_LENGTH * ASSUMED_INPUT_LENGTH;
/** How much slower V8 backtracks through a counted loop (`a{0,6}`) than through unrolled code. */
const COUNTED_LOOP_COST = 8;

/** Ways a quantifier can end; backtracking into a counted loop (`a{0,6}`) is slow, so it weighs more. */
function repetitionChoices(min: number, max: number): number {
  if (max === Infinity) return ASSUMED_INPUT_LENGTH;
  const loopCost = max >= 3 && min < max ? COUNTED_LOOP_COST : 1;
  return Math.min(ASSUMED_INPUT_LENGTH, (max - min + 1) * loopCost);
}

function charactersOf(atom: Atom): CharSet {
  if (atom.kind === 'char') return atom.set;
  if (atom.kind === 'anchor') return EMPTY_SET;
  let set = EMPTY_SET;
  for (const alternative of atom.alternatives) {
    for (const term of alternative) set = unionSets(set, charactersOf(term.atom));
  }
  return set;
}

function minimumLength(atom: Atom): number {
  if (atom.kind === 'char') return 1;
  if (atom.kind === 'anchor') return 0;
  let shortest = Infinity;
  for (const alternative of atom.alternatives) {
    let length = 0;
    for (const term of alternative) length += term.min * minimumLength(term.atom);
    shortest = Math.min(shortest, length);
  }
  return shortest;
}

/** The literal string an alternative spells, or undefined when it is not a plain literal. */
function literalText(alternative: Term[]): string | undefined {
  let text = '';
  for (const term of alternative) {
    if (term.atom.kind !== 'char' || term.atom.literal < 0 || term.min !== 1 || term.max !== 1) return undefined;
    text += String.fromCharCode(term.atom.literal);
  }
  return text;
}

/** True when at most one alternative can match at any position: distinct literals, none a prefix of another. */
function isPrefixFreeLiteralAlternation(alternatives: Term[][]): boolean {
  const texts: string[] = [];
  for (const alternative of alternatives) {
    const text = literalText(alternative);
    if (text === undefined) return false;
    texts.push(text);
  }
  for (let i = 0; i < texts.length; i++) {
    for (let j = 0; j < texts.length; j++) {
      if (i !== j && texts[j].startsWith(texts[i])) return false;
    }
  }
  return true;
}

/** A body that every iteration matches in exactly one way: fixed repetitions, unambiguous alternations. */
function isDeterministic(alternatives: Term[][]): boolean {
  if (alternatives.length > 1 && !isPrefixFreeLiteralAlternation(alternatives)) return false;
  for (const alternative of alternatives) {
    for (const term of alternative) {
      if (term.min !== term.max) return false;
      if (term.atom.kind === 'group' && !isDeterministic(term.atom.alternatives)) return false;
    }
  }
  return true;
}

/**
 * A flat body whose first or last character is one that none of its repetitions can consume,
 * so iteration boundaries are forced: `\.\d+`, `\w+,`.
 */
function isDelimited(alternatives: Term[][]): boolean {
  if (alternatives.length !== 1) return false;
  const terms = alternatives[0];
  let repeated = EMPTY_SET;
  for (const term of terms) {
    if (term.atom.kind !== 'char') return false;
    if (term.min === term.max) continue;
    // Two repetitions that can take the same character would make the iteration ambiguous.
    if (setsOverlap(term.atom.set, repeated)) return false;
    repeated = unionSets(repeated, term.atom.set);
  }
  return isDelimiter(terms[0], repeated) || isDelimiter(terms[terms.length - 1], repeated);
}

function isDelimiter(term: Term | undefined, repeated: CharSet): boolean {
  return term !== undefined && term.atom.kind === 'char' && term.min === term.max && term.min >= 1 &&
    !setsOverlap(term.atom.set, repeated);
}

function checkRepeatedGroups(alternatives: Term[][]): void {
  for (const alternative of alternatives) {
    for (const term of alternative) {
      if (term.atom.kind !== 'group') continue;
      const body = term.atom.alternatives;
      if (term.max > 1 && !isDeterministic(body) && !isDelimited(body)) {
        throw new UnsafePattern(
          body.length > 1
            ? 'a repeated alternation must list plain literals of which none is a prefix of another, as in (a|b)*; (a|a)* and (a|ab)* backtrack catastrophically'
            : 'nested repetition such as (a+)+ or (.*a){20} backtracks catastrophically',
        );
      }
      checkRepeatedGroups(body);
    }
  }
}

/**
 * Backtracking estimate of a sequence: the characters compared when every path fails.
 * - Each term is attempted once per path reaching it, and an attempt costs the characters it
 *   compares (attemptCost).
 * - Paths multiply at every repetition (its possible lengths) and at every alternation whose
 *   branches can match the same text (its branch count).
 * - Paths collapse at a mandatory term that the latest open repetitions cannot consume: in
 *   `\w+@` the `\w+` can only stop right before the `@`, so one path goes on; in `.*a`
 *   the `.*` can stop before any `a`, so n paths go on. `.*a.*b` is therefore cubic.
 * - A repetition that ends the whole pattern costs one iteration per path: once it matches,
 *   the search is over.
 * - An unanchored pattern starts with an open repetition over any character: the start
 *   positions the engine tries.
 * Counted loops (`a{4}`, `(ab){2}`) cost eight times their length because V8 runs them as
 * loops where it unrolls literals: `.*a{16}$` compares 16 characters, slowly, on each of n²
 * paths.
 */
interface Estimate {
  /** Ways the sequence can match the same text through different alternatives. */
  ambiguity: number;
  /** Ways the sequence's repetitions can divide the text. */
  choices: number;
  work: number;
}

interface OpenRepetition {
  set: CharSet;
  choices: number;
}

/** The most characters one match of the atom compares, counting an unbounded repetition once. */
function attemptLength(atom: Atom): number {
  if (atom.kind === 'char') return 1;
  if (atom.kind === 'anchor') return 0;
  let longest = 0;
  for (const alternative of atom.alternatives) {
    let length = 0;
    for (const term of alternative) length += attemptCost(term);
    longest = Math.max(longest, length);
  }
  return Math.min(longest, ASSUMED_INPUT_LENGTH);
}

function attemptCost(term: Term): number {
  const iterations = term.max === Infinity ? Math.max(term.min, 1) : term.max;
  const runsAsLoop = term.max !== Infinity && (term.max >= 3 || (term.atom.kind === 'group' && term.max > 1));
  const loopCost = runsAsLoop ? COUNTED_LOOP_COST : 1;
  return Math.min(iterations * attemptLength(term.atom) * loopCost, ASSUMED_INPUT_LENGTH);
}

/** A group that is neither plain (spliced) nor repeated (checked by checkRepeatedGroups). */
function estimateGroup(term: Term, alternatives: Term[][]): Estimate {
  const skip = term.min === 0 ? 1 : 0;
  if (alternatives.length > 1 && isPrefixFreeLiteralAlternation(alternatives)) {
    return { ambiguity: 1, choices: 1 + skip, work: attemptCost(term) };
  }
  let ambiguity = 0;
  let choices = 1;
  let work = 0;
  for (const alternative of alternatives) {
    const estimate = estimateSequence(alternative, false, false);
    ambiguity += estimate.ambiguity;
    choices = Math.max(choices, estimate.choices);
    work += estimate.work;
  }
  return { ambiguity, choices: choices + skip, work };
}

/** Terms with plain groups (one alternative, no quantifier) replaced by their contents. */
function spliceGroups(terms: Term[]): Term[] {
  const spliced: Term[] = [];
  for (const term of terms) {
    const { atom } = term;
    if (atom.kind === 'group' && atom.alternatives.length === 1 && term.min === 1 && term.max === 1) {
      spliced.push(...spliceGroups(atom.alternatives[0]));
    } else {
      spliced.push(term);
    }
  }
  return spliced;
}

/** Closes the latest open repetitions that cannot consume any character of `set`. */
function closeRepetitions(open: OpenRepetition[], set: CharSet): void {
  while (open.length > 0 && !setsOverlap(open[open.length - 1].set, set)) open.pop();
}

function pathsThrough(open: OpenRepetition[]): number {
  let paths = 1;
  for (const repetition of open) paths *= repetition.choices;
  return paths;
}

function estimateSequence(sequence: Term[], unanchoredStart: boolean, isWholePattern: boolean): Estimate {
  const terms = spliceGroups(sequence);
  const open: OpenRepetition[] = unanchoredStart ? [{ set: ANY_CHAR, choices: ASSUMED_INPUT_LENGTH }] : [];
  let ambiguity = 1;
  let work = pathsThrough(open);
  for (let i = 0; i < terms.length; i++) {
    const term = terms[i];
    const { atom, min, max } = term;
    if (atom.kind === 'anchor') continue;
    if (isWholePattern && i === terms.length - 1 && max > 1 && min <= 1) {
      // Nothing follows: once a first iteration matches the search is over, so each path
      // costs one iteration and its other lengths are never tried.
      work += ambiguity * pathsThrough(open) * attemptLength(atom);
      continue;
    }
    const set = charactersOf(atom);
    let choices = repetitionChoices(min, max);
    let cost = attemptCost(term);
    if (atom.kind === 'group' && max <= 1) {
      const inner = estimateGroup(term, atom.alternatives);
      ambiguity *= inner.ambiguity;
      choices = inner.choices;
      cost = inner.work;
    }
    const mandatory = min > 0 && minimumLength(atom) > 0;
    if (mandatory) closeRepetitions(open, set);
    if (choices > 1) open.push({ set, choices });
    work += ambiguity * pathsThrough(open) * cost;
  }
  return { ambiguity, choices: pathsThrough(open), work };
}

function estimateBacktracking(alternatives: Term[][]): number {
  let total = 0;
  for (const alternative of alternatives) {
    const first = alternative[0];
    const anchored = first !== undefined && first.atom.kind === 'anchor' && first.atom.isStart;
    total += estimateSequence(alternative, !anchored, true).work;
  }
  return total;
}

/** Null when `pattern` is a valid regular expression that runs in bounded time; why not otherwise. */
export function checkRegexSafety(pattern: string): string | null {
  if (pattern.length > MAX_PATTERN_LENGTH) return `pattern is longer than ${MAX_PATTERN_LENGTH} characters`;
  try {
    new RegExp(pattern);
  } catch (error) {
    return (error as Error).message;
  }
  try {
    const alternatives = new PatternReader(pattern).readAll();
    checkRepeatedGroups(alternatives);
    if (estimateBacktracking(alternatives) > BACKTRACKING_BUDGET) {
      return 'pattern may backtrack catastrophically: its repetitions or alternatives can match the same text in too many ways (patterns are unanchored: drop a leading .*)';
    }
    return null;
  } catch (error) {
    if (error instanceof UnsafePattern) return error.message;
    throw error;
  }
}

/**
 * The work one evaluation request may do, whatever its flag count, rule count or input. Each
 * pattern's backtracking is bounded on its own (regex-safety.ts); this bounds the request:
 * - conditions are counted: a flag costs one unit plus the units of every condition of its
 *   rules (about one per simple comparison, more for dates, long prefixes and dotted paths:
 *   conditionUnits in operators.ts), charged before its rules run since all of them may be
 *   tested, and `contains` pays one more per 16 characters or elements it searches; counted,
 *   so a request gets the same answer on an idle and on a loaded machine;
 * - patterns are timed: the time spent in `matches` adds up, and once it passes the request's
 *   allowance no further pattern runs. The backtracking estimate cannot price a match (it
 *   undercharges some accepted quadratic patterns a hundredfold), and typical matches take
 *   microseconds, so only a request built to spend it comes near the allowance.
 * Once either runs out the budget stays exhausted: the flag being evaluated and every later
 * flag of the request answer ERROR (GENERAL) with the request's default, and the request
 * completes instead of holding the event loop. The pattern that overran finishes (at most
 * about 4 ms at the 1,024-character input cap).
 */
export class EvaluationBudget {
  private conditionsLeft: number;
  private regexMsLeft: number;
  exhausted = false;

  constructor(
    limits: { conditions: number; regexMs: number },
    /** Milliseconds on a monotonic clock (performance.now). */
    private readonly now: () => number,
  ) {
    this.conditionsLeft = limits.conditions;
    this.regexMsLeft = limits.regexMs;
  }

  /** Takes `units` of the condition allowance when they fit; otherwise the budget is exhausted. */
  charge(units: number): boolean {
    if (this.exhausted) return false;
    if (units > this.conditionsLeft) {
      this.exhausted = true;
      return false;
    }
    this.conditionsLeft -= units;
    return true;
  }

  /** `pattern.test(input)` while pattern time is left; false, with the budget exhausted, after. */
  test(pattern: RegExp, input: string): boolean {
    if (this.exhausted) return false;
    if (this.regexMsLeft <= 0) {
      this.exhausted = true;
      return false;
    }
    const started = this.now();
    const matched = pattern.test(input);
    this.regexMsLeft -= this.now() - started;
    return matched;
  }
}

export const BUDGET_EXHAUSTED_MESSAGE = 'evaluation work budget of this request exhausted; evaluate fewer flags per request';

import { DESIGN_EFFECTIVE_SAMPLES } from '../../lib/release-safety/gates';
import { effectiveSampleSize, mixingRate, mixtureBoundary } from '../../lib/release-safety/stats/confidence-sequence';
import { correctedScoreStatistic, rateDifferenceBounds, type RateDifference } from '../../lib/release-safety/stats/proportions';
import { betaSampler } from './allocation/random';

export { seededRandom } from './allocation/random';

/**
 * Bandit allocation (docs/experiments.md#allocation). Pure, no I/O:
 * the experiment store gathers the counts, calls decideAllocation with a seeded generator, and
 * writes the result to the flag's variant weights through the one flag write path.
 */

export const BANDIT_ALGORITHMS = ['thompson_sampling', 'epsilon_greedy'] as const;
export type BanditAlgorithm = (typeof BANDIT_ALGORITHMS)[number];

export interface ArmStats {
  name: string;
  trials: number;
  successes: number;
}

export interface AllocationPolicy {
  algorithm: BanditAlgorithm;
  /** Share every arm keeps, 0..1/arms; a larger floor cannot hold for every arm and means an equal split. */
  minExplorationFloor: number;
  /** Trials every arm needs before anything moves. */
  minSampleSizePerVariant: number;
  /** 0..1, P(best) that declares a winner. */
  confidenceThreshold: number;
  autoRolloutWinner: boolean;
}

export interface AllocationDecision {
  /** Share per arm name, each >= floor while no winner is promoted, summing to 1. */
  allocations: Record<string, number>;
  /**
   * Posterior probability each arm is best: the share of MONTE_CARLO_DRAWS joint draws from the
   * Beta(1 + successes, 1 + failures) posteriors in which the arm's draw is the highest. The same
   * for both algorithms (epsilon-greedy only allocates differently), so the winner is declared
   * on the same evidence.
   */
  probabilityBest: Record<string, number>;
  /** Set when P(best) reached the threshold (whatever autoRolloutWinner says). */
  leader: string | null;
  /** True when the winner is promoted: leader set, autoRolloutWinner on; allocations then 1 for it, 0 for others. */
  promoted: boolean;
  /** 'insufficient_samples' (allocations unchanged), 'reallocated', 'winner_promoted'. */
  outcome: 'insufficient_samples' | 'reallocated' | 'winner_promoted';
}

/** Joint posterior draws behind probabilityBest: its Monte Carlo standard error is at most 0.005. */
export const MONTE_CARLO_DRAWS = 10_000;

/** Epsilon-greedy explores at least this share of traffic, evenly over the arms. */
export const MIN_EPSILON = 0.1;

export function decideAllocation(
  arms: ArmStats[],
  current: Record<string, number>,
  policy: AllocationPolicy,
  random: () => number,
): AllocationDecision {
  checkArms(arms);
  const probabilityBest = posteriorProbabilityBest(arms, random);
  const names = arms.map((arm) => arm.name);

  if (arms.some((arm) => arm.trials < policy.minSampleSizePerVariant)) {
    return { allocations: currentShares(names, current), probabilityBest, leader: null, promoted: false, outcome: 'insufficient_samples' };
  }

  const best = names.reduce((a, b) => (probabilityBest[b] > probabilityBest[a] ? b : a));
  const leader = probabilityBest[best] >= policy.confidenceThreshold ? best : null;
  if (leader !== null && policy.autoRolloutWinner) {
    const allocations = Object.fromEntries(names.map((name) => [name, name === leader ? 1 : 0]));
    return { allocations, probabilityBest, leader, promoted: true, outcome: 'winner_promoted' };
  }

  const floor = Math.min(Math.max(0, policy.minExplorationFloor), 1 / arms.length);
  const shares =
    policy.algorithm === 'thompson_sampling'
      ? flooredShares(
          names.map((name) => probabilityBest[name]),
          floor,
        )
      : epsilonGreedyShares(arms, floor);
  return { allocations: Object.fromEntries(names.map((name, i) => [name, shares[i]])), probabilityBest, leader, promoted: false, outcome: 'reallocated' };
}

function checkArms(arms: ArmStats[]): void {
  if (arms.length === 0) throw new RangeError('a bandit needs at least one arm');
  const names = new Set<string>();
  for (const arm of arms) {
    if (names.has(arm.name)) throw new RangeError(`duplicate arm "${arm.name}"`);
    names.add(arm.name);
    if (!(Number.isInteger(arm.trials) && Number.isInteger(arm.successes) && arm.successes >= 0 && arm.successes <= arm.trials)) {
      throw new RangeError(`arm "${arm.name}": successes (${arm.successes}) and trials (${arm.trials}) must be integers with 0 <= successes <= trials`);
    }
  }
}

/** Share of joint Beta posterior draws in which each arm draws highest. */
function posteriorProbabilityBest(arms: ArmStats[], random: () => number): Record<string, number> {
  const beta = betaSampler(random);
  const wins = new Array<number>(arms.length).fill(0);
  for (let draw = 0; draw < MONTE_CARLO_DRAWS; draw++) {
    let bestIndex = 0;
    let bestValue = -1;
    for (let i = 0; i < arms.length; i++) {
      const value = beta(1 + arms[i].successes, 1 + arms[i].trials - arms[i].successes);
      if (value > bestValue) {
        bestValue = value;
        bestIndex = i;
      }
    }
    wins[bestIndex]++;
  }
  return Object.fromEntries(arms.map((arm, i) => [arm.name, wins[i] / MONTE_CARLO_DRAWS]));
}

/**
 * Shares proportional to `weights`, except that no share falls below `floor`: arms below it are
 * raised to it and the rest of the traffic is split among the others in proportion to their
 * weights, repeated until no share is below the floor (water-filling). A floor of 1/arms is an
 * equal split.
 */
function flooredShares(weights: number[], floor: number): number[] {
  const count = weights.length;
  if (floor * count >= 1 - 1e-12) return exactlyOne(weights.map(() => 1 / count));
  const atFloor = new Array<boolean>(count).fill(false);
  for (;;) {
    const free = weights.map((_, i) => i).filter((i) => !atFloor[i]);
    const freeMass = 1 - floor * (count - free.length);
    const freeWeight = free.reduce((sum, i) => sum + weights[i], 0);
    const shares = weights.map((weight, i) => {
      if (atFloor[i]) return floor;
      return freeWeight > 0 ? (freeMass * weight) / freeWeight : freeMass / free.length;
    });
    const below = free.filter((i) => shares[i] < floor);
    if (below.length === 0) return exactlyOne(shares);
    for (const i of below) atFloor[i] = true;
  }
}

/**
 * Epsilon-greedy: epsilon = max(floor * arms, MIN_EPSILON) of the traffic split evenly over all
 * arms, the rest to the arm with the best observed conversion rate (split evenly on a tie). Every
 * arm keeps epsilon / arms >= floor.
 */
function epsilonGreedyShares(arms: ArmStats[], floor: number): number[] {
  const epsilon = Math.min(1, Math.max(floor * arms.length, MIN_EPSILON));
  const rates = arms.map((arm) => (arm.trials > 0 ? arm.successes / arm.trials : 0));
  const bestRate = Math.max(...rates);
  const greedy = rates.filter((rate) => rate === bestRate).length;
  return exactlyOne(rates.map((rate) => epsilon / arms.length + (rate === bestRate ? (1 - epsilon) / greedy : 0)));
}

/** The stored shares of these arms, renormalized to sum to 1 (an equal split when there are none). */
function currentShares(names: string[], current: Record<string, number>): Record<string, number> {
  const values = names.map((name) => {
    const share = current[name];
    return typeof share === 'number' && Number.isFinite(share) && share > 0 ? share : 0;
  });
  const total = values.reduce((sum, share) => sum + share, 0);
  const shares = exactlyOne(total > 0 ? values.map((share) => share / total) : names.map(() => 1 / names.length));
  return Object.fromEntries(names.map((name, i) => [name, shares[i]]));
}

/** Puts the rounding residue on the largest share, so the shares sum to 1 and the floors stay exact. */
function exactlyOne(shares: number[]): number[] {
  const largest = shares.reduce((best, share, i) => (share > shares[best] ? i : best), 0);
  const others = shares.reduce((sum, share, i) => (i === largest ? sum : sum + share), 0);
  return shares.map((share, i) => (i === largest ? 1 - others : share));
}

// ---------------------------------------------------------------------------------------------
// Guardrail: arms whose error rate is significantly worse than the best arm's.

export interface ArmErrors {
  name: string;
  requests: number;
  errors: number;
}

export interface ArmCut {
  name: string;
  /** The arm with the lowest error rate, the one compared against. */
  comparedWith: string;
  errorRate: number;
  bestErrorRate: number;
  /** Continuity-corrected score statistic of (this arm - best arm) at a difference of zero. */
  statistic: number;
  /** Anytime-valid bounds of (this arm - best arm) at `alpha`; the arm is cut because `lower` > 0. */
  interval: RateDifference;
  /** Per comparison: the family alpha split over every ordered pair of arms. */
  alpha: number;
}

/** Requests an arm (and the best arm) needs before it is judged: the canary gates' default minimum per cohort. */
export const MIN_REQUESTS_TO_CUT = 100;

/**
 * Arms whose error rate is significantly worse than the best (lowest observed rate) arm's, by the
 * canary gates' test: the one-sided normal-mixture confidence sequence on the difference of error
 * rates with score variance (api/lib/release-safety). The best arm is picked from the data,
 * so each comparison runs at alpha / (k (k - 1)), a Bonferroni split over every ordered pair of
 * the k judged arms: with equal error rates, the chance that any arm is ever cut, however often
 * this is called as data accrues, stays at most alpha.
 */
export function armsToCut(arms: ArmErrors[], alpha = 0.05): ArmCut[] {
  const judged = arms
    .map((arm) => ({ name: arm.name, requests: arm.requests, errors: Math.min(arm.errors, arm.requests) }))
    .filter((arm) => arm.requests >= MIN_REQUESTS_TO_CUT);
  if (judged.length < 2) return [];
  const rate = (arm: ArmErrors) => arm.errors / arm.requests;
  const best = judged.reduce((a, b) => (rate(b) < rate(a) ? b : a));
  const pairAlpha = alpha / (judged.length * (judged.length - 1));
  const rho2 = mixingRate(pairAlpha, DESIGN_EFFECTIVE_SAMPLES);
  const cuts: ArmCut[] = [];
  for (const arm of judged) {
    if (arm === best) continue;
    const boundary = mixtureBoundary(rho2 * effectiveSampleSize(arm.requests, best.requests), pairAlpha);
    const interval = rateDifferenceBounds(arm.errors, arm.requests, best.errors, best.requests, boundary);
    if (interval.lower > 0) {
      cuts.push({
        name: arm.name,
        comparedWith: best.name,
        errorRate: rate(arm),
        bestErrorRate: rate(best),
        statistic: correctedScoreStatistic(arm.errors, arm.requests, best.errors, best.requests, 0),
        interval,
        alpha: pairAlpha,
      });
    }
  }
  return cuts;
}

// ---------------------------------------------------------------------------------------------
// Flag weights.

/** Weight units per percentage point: the flag's bucket resolution (0.001 percentage points). */
const UNITS_PER_PERCENT = 1000;
const TOTAL_UNITS = 100 * UNITS_PER_PERCENT;

/**
 * Variant weights (percent, in 0.001 steps, the bucket resolution) from allocations, by largest
 * remainder: the units sum to exactly 100,000, so the weights sum to 100 as flag validation
 * requires, and each weight is within 0.001 of its share. Ties go to the earlier arm.
 */
export function allocationsToWeights(allocations: Record<string, number>): Record<string, number> {
  const entries = Object.entries(allocations).map(([name, share]) => [name, Number.isFinite(share) && share > 0 ? share : 0] as const);
  if (entries.length === 0) return {};
  const total = entries.reduce((sum, [, share]) => sum + share, 0);
  const exact = entries.map(([, share]) => (total > 0 ? (share / total) * TOTAL_UNITS : TOTAL_UNITS / entries.length));
  const units = exact.map(Math.floor);
  let missing = TOTAL_UNITS - units.reduce((sum, unit) => sum + unit, 0);
  const byRemainder = exact.map((value, i) => ({ i, remainder: value - units[i] })).sort((a, b) => b.remainder - a.remainder || a.i - b.i);
  for (const { i } of byRemainder) {
    if (missing <= 0) break;
    units[i]++;
    missing--;
  }
  return Object.fromEntries(entries.map(([name], i) => [name, units[i] / UNITS_PER_PERCENT]));
}

import {
  allocationsToWeights,
  armsToCut,
  decideAllocation,
  MIN_EPSILON,
  MIN_REQUESTS_TO_CUT,
  MONTE_CARLO_DRAWS,
  seededRandom,
  type AllocationPolicy,
  type ArmErrors,
  type ArmStats,
} from '../../api/features/experiments/allocation';

/** Figures behind these bounds: docs/experiments.md, "Allocation". */

const CONVERSION_RATES: Record<string, number> = { control: 0.05, treatment: 0.25 };

const policy: AllocationPolicy = {
  algorithm: 'thompson_sampling',
  minExplorationFloor: 0.05,
  minSampleSizePerVariant: 100,
  confidenceThreshold: 0.95,
  autoRolloutWinner: true,
};

interface Round {
  rewards: number;
  allocations: Record<string, number>;
  outcome: string;
  promoted: boolean;
}

/**
 * Simulated traffic: each round, `batch` users are assigned by the current allocations and convert
 * at their arm's rate, then the bandit reallocates; stops when a winner is promoted.
 */
function simulate(seed: number, banditPolicy: AllocationPolicy, batch: number, maxRewards: number): Round[] {
  const random = seededRandom(seed);
  const stats: Record<string, ArmStats> = {
    control: { name: 'control', trials: 0, successes: 0 },
    treatment: { name: 'treatment', trials: 0, successes: 0 },
  };
  let allocations: Record<string, number> = { control: 0.5, treatment: 0.5 };
  const rounds: Round[] = [];
  for (let rewards = batch; rewards <= maxRewards; rewards += batch) {
    for (let i = 0; i < batch; i++) {
      const arm = stats[random() < allocations.control ? 'control' : 'treatment'];
      arm.trials++;
      if (random() < CONVERSION_RATES[arm.name]) arm.successes++;
    }
    const decision = decideAllocation(Object.values(stats), allocations, banditPolicy, random);
    allocations = decision.allocations;
    rounds.push({ rewards, allocations, outcome: decision.outcome, promoted: decision.promoted });
    if (decision.promoted) break;
  }
  return rounds;
}

const sum = (values: number[]) => values.reduce((total, value) => total + value, 0);
const SEEDS = Array.from({ length: 20 }, (_, i) => i + 1);

/** log B(a, b) for positive integers, from sums of logs. */
function logBeta(a: number, b: number): number {
  const logFactorial = (n: number) => sum(Array.from({ length: n }, (_, i) => Math.log(i + 1)));
  return logFactorial(a - 1) + logFactorial(b - 1) - logFactorial(a + b - 1);
}

/** Exact P(X_b > X_a) for X ~ Beta(alpha, beta) with integer parameters (Evan Miller's closed form). */
function exactProbabilityBBeatsA(aA: number, bA: number, aB: number, bB: number): number {
  let total = 0;
  for (let i = 0; i < aB; i++) total += Math.exp(logBeta(aA + i, bA + bB) - Math.log(bB + i) - logBeta(1 + i, bB) - logBeta(aA, bA));
  return total;
}

describe('Thompson sampling', () => {
  it('estimates P(best) within Monte Carlo error of the exact two-arm value', () => {
    const arms = [
      { name: 'a', trials: 40, successes: 2 },
      { name: 'b', trials: 40, successes: 6 },
    ];
    const exact = exactProbabilityBBeatsA(3, 39, 7, 35);
    const standardError = Math.sqrt((exact * (1 - exact)) / MONTE_CARLO_DRAWS);
    for (const seed of [1, 2, 3]) {
      const { probabilityBest } = decideAllocation(arms, {}, { ...policy, autoRolloutWinner: false, confidenceThreshold: 1 }, seededRandom(seed));
      expect(Math.abs(probabilityBest.b - exact)).toBeLessThan(4 * standardError);
      expect(probabilityBest.a + probabilityBest.b).toBeCloseTo(1, 12);
    }
  });

  it('is reproducible from the seed', () => {
    const arms = [
      { name: 'a', trials: 120, successes: 10 },
      { name: 'b', trials: 130, successes: 14 },
      { name: 'c', trials: 110, successes: 9 },
    ];
    const first = decideAllocation(arms, {}, policy, seededRandom(42));
    expect(decideAllocation(arms, {}, policy, seededRandom(42))).toEqual(first);
    expect(decideAllocation(arms, {}, policy, seededRandom(43)).probabilityBest).not.toEqual(first.probabilityBest);
  });

  it('raises the better arm over rounds and keeps the floor (5% vs 25%)', () => {
    const watching = { ...policy, minSampleSizePerVariant: 10, confidenceThreshold: 0.999, autoRolloutWinner: false };
    const trajectories = SEEDS.map((seed) => simulate(seed, watching, 10, 300));
    for (const rounds of trajectories) {
      for (const round of rounds) {
        expect(round.promoted).toBe(false);
        expect(Math.min(...Object.values(round.allocations))).toBeGreaterThanOrEqual(watching.minExplorationFloor);
        expect(sum(Object.values(round.allocations))).toBeCloseTo(1, 12);
      }
      expect(rounds).toHaveLength(30);
      expect(rounds[29].allocations.treatment).toBeGreaterThan(0.9);
    }
    // Averaged over seeds, the better arm's share grows round after round towards 1 - floor.
    const meanAt = (round: number) => sum(trajectories.map((rounds) => rounds[round].allocations.treatment)) / trajectories.length;
    expect(meanAt(0)).toBe(0.5);
    expect(meanAt(2)).toBeGreaterThan(0.8);
    expect(meanAt(4)).toBeGreaterThan(meanAt(2));
    expect(meanAt(29)).toBeGreaterThan(meanAt(4));
    expect(meanAt(29)).toBeGreaterThan(0.94);
  });

  it('changes nothing before every arm has the minimum sample', () => {
    const current = { control: 0.3, treatment: 0.7 };
    const decision = decideAllocation(
      [
        { name: 'control', trials: 99, successes: 1 },
        { name: 'treatment', trials: 500, successes: 200 },
      ],
      current,
      policy,
      seededRandom(1),
    );
    expect(decision.outcome).toBe('insufficient_samples');
    expect(decision.allocations).toEqual(current);
    expect(decision.leader).toBeNull();
    expect(decision.promoted).toBe(false);
    expect(decision.probabilityBest.treatment).toBeGreaterThan(0.99);

    const rounds = simulate(5, policy, 50, 20_000);
    for (const round of rounds.filter((r) => r.outcome === 'insufficient_samples')) expect(round.allocations).toEqual({ control: 0.5, treatment: 0.5 });
  });

  it('promotes the better arm within 250 rewards (floor 0.05, 100 per arm, threshold 0.95, every 50 rewards)', () => {
    for (const seed of SEEDS) {
      const rounds = simulate(seed, policy, 50, 20_000);
      const last = rounds[rounds.length - 1];
      expect(last.promoted).toBe(true);
      expect(last.outcome).toBe('winner_promoted');
      expect(last.allocations).toEqual({ control: 0, treatment: 1 });
      expect(last.rewards).toBeLessThanOrEqual(250);
    }
  });

  it('names the leader without promoting it when autoRolloutWinner is off', () => {
    const arms = [
      { name: 'control', trials: 200, successes: 10 },
      { name: 'treatment', trials: 200, successes: 50 },
    ];
    const decision = decideAllocation(arms, {}, { ...policy, autoRolloutWinner: false }, seededRandom(3));
    expect(decision).toMatchObject({ leader: 'treatment', promoted: false, outcome: 'reallocated' });
    expect(decision.allocations.control).toBe(policy.minExplorationFloor);
  });

  it('water-fills the floor: arms below it get exactly the floor, the rest follow P(best)', () => {
    const arms = [
      { name: 'a', trials: 300, successes: 30 },
      { name: 'b', trials: 300, successes: 33 },
      { name: 'c', trials: 300, successes: 3 },
    ];
    const floored = { ...policy, minExplorationFloor: 0.1, confidenceThreshold: 1 };
    const { allocations, probabilityBest } = decideAllocation(arms, {}, floored, seededRandom(9));
    expect(probabilityBest.c).toBeLessThan(0.1);
    expect(allocations.c).toBe(0.1);
    expect(allocations.a / allocations.b).toBeCloseTo(probabilityBest.a / probabilityBest.b, 10);
    expect(sum(Object.values(allocations))).toBeCloseTo(1, 12);
    // A floor of 1/arms (or more, which cannot hold) is an equal split.
    const equal = decideAllocation(arms, {}, { ...floored, minExplorationFloor: 0.5 }, seededRandom(9)).allocations;
    for (const share of Object.values(equal)) expect(share).toBeCloseTo(1 / 3, 12);
  });

  it('rejects arms that cannot be counts', () => {
    expect(() => decideAllocation([], {}, policy, seededRandom(1))).toThrow(RangeError);
    expect(() => decideAllocation([{ name: 'a', trials: 5, successes: 6 }], {}, policy, seededRandom(1))).toThrow(RangeError);
    const twice = [
      { name: 'a', trials: 5, successes: 1 },
      { name: 'a', trials: 5, successes: 1 },
    ];
    expect(() => decideAllocation(twice, {}, policy, seededRandom(1))).toThrow(/duplicate/);
  });
});

describe('epsilon-greedy', () => {
  const greedy: AllocationPolicy = { ...policy, algorithm: 'epsilon_greedy', confidenceThreshold: 1 };
  const arms = [
    { name: 'a', trials: 200, successes: 10 },
    { name: 'b', trials: 200, successes: 30 },
    { name: 'c', trials: 200, successes: 20 },
  ];

  it('explores epsilon = max(floor x arms, 0.1) evenly and gives the rest to the best observed rate', () => {
    const low = decideAllocation(arms, {}, { ...greedy, minExplorationFloor: 0.01 }, seededRandom(1)).allocations;
    expect(low.a).toBeCloseTo(MIN_EPSILON / 3, 12);
    expect(low.c).toBeCloseTo(MIN_EPSILON / 3, 12);
    expect(low.b).toBeCloseTo(1 - MIN_EPSILON + MIN_EPSILON / 3, 12);

    const high = decideAllocation(arms, {}, { ...greedy, minExplorationFloor: 0.2 }, seededRandom(1)).allocations;
    expect(high.a).toBeCloseTo(0.2, 12);
    expect(high.c).toBeCloseTo(0.2, 12);
    expect(high.b).toBeCloseTo(0.6, 12);
    expect(sum(Object.values(high))).toBeCloseTo(1, 12);
  });

  it('splits the greedy share on a tie', () => {
    const tied = [
      { name: 'a', trials: 100, successes: 10 },
      { name: 'b', trials: 200, successes: 20 },
    ];
    const { allocations } = decideAllocation(tied, {}, greedy, seededRandom(1));
    expect(allocations).toEqual({ a: 0.5, b: 0.5 });
  });

  it('promotes the better arm of 5% vs 25% within 250 rewards, on the same P(best) as Thompson sampling', () => {
    for (const seed of SEEDS) {
      const rounds = simulate(seed, { ...policy, algorithm: 'epsilon_greedy' }, 50, 20_000);
      for (const round of rounds.slice(0, -1)) expect(Math.min(...Object.values(round.allocations))).toBeGreaterThanOrEqual(policy.minExplorationFloor);
      const last = rounds[rounds.length - 1];
      expect(last.allocations).toEqual({ control: 0, treatment: 1 });
      expect(last.rewards).toBeLessThanOrEqual(250);
    }
  });
});

describe('armsToCut', () => {
  /** Requests arrive in looks of `perLook` per arm; the arms are judged after every look. */
  function firstCut(seed: number, rates: number[], perLook: number, looks: number): { look: number; names: string[] } | null {
    const random = seededRandom(seed);
    const arms: ArmErrors[] = rates.map((_, i) => ({ name: `v${i}`, requests: 0, errors: 0 }));
    for (let look = 1; look <= looks; look++) {
      arms.forEach((arm, i) => {
        for (let j = 0; j < perLook; j++) {
          arm.requests++;
          if (random() < rates[i]) arm.errors++;
        }
      });
      const cut = armsToCut(arms);
      if (cut.length > 0) return { look, names: cut.map((c) => c.name) };
    }
    return null;
  }

  it('cuts a clearly worse arm and names the interval against the best arm', () => {
    const cut = armsToCut([
      { name: 'a', requests: 2000, errors: 20 },
      { name: 'b', requests: 2000, errors: 80 },
      { name: 'c', requests: 2000, errors: 22 },
    ]);
    expect(cut.map((c) => c.name)).toEqual(['b']);
    expect(cut[0]).toMatchObject({ comparedWith: 'a', errorRate: 0.04, bestErrorRate: 0.01, alpha: 0.05 / 6 });
    expect(cut[0].interval.lower).toBeGreaterThan(0);
    expect(cut[0].interval.estimate).toBeCloseTo(0.03, 12);
    expect(cut[0].statistic).toBeGreaterThan(3);
  });

  it('detects 4% against 2% errors and only ever cuts the worse arm', () => {
    for (const seed of SEEDS) {
      const found = firstCut(seed, [0.02, 0.04], 100, 100);
      expect(found?.names).toEqual(['v1']);
      expect(found!.look * 100).toBeLessThanOrEqual(10_000);
    }
  });

  it('never cuts equal arms: identical counts, and A/A traffic at alpha 0.05 over 20 looks', () => {
    const same = { requests: 5000, errors: 100 };
    expect(armsToCut(['a', 'b', 'c'].map((name) => ({ name, ...same })))).toEqual([]);
    for (const arms of [2, 3]) {
      const seeds = Array.from({ length: 200 }, (_, i) => i + 1);
      const falseCuts = seeds.filter((seed) => firstCut(seed, new Array<number>(arms).fill(0.02), 1000, 20) !== null).length;
      expect(falseCuts / seeds.length).toBeLessThanOrEqual(0.05);
    }
  });

  it('judges no arm before it and another have the minimum requests', () => {
    expect(
      armsToCut([
        { name: 'a', requests: MIN_REQUESTS_TO_CUT - 1, errors: MIN_REQUESTS_TO_CUT - 1 },
        { name: 'b', requests: 10_000, errors: 0 },
      ]),
    ).toEqual([]);
  });
});

describe('allocationsToWeights', () => {
  const units = (weights: Record<string, number>) => sum(Object.values(weights).map((w) => Math.round(w * 1000)));

  it('gives 0.001 steps summing to exactly 100', () => {
    const thirds = allocationsToWeights({ a: 1 / 3, b: 1 / 3, c: 1 / 3 });
    expect(thirds).toEqual({ a: 33.334, b: 33.333, c: 33.333 });
    expect(Math.abs(sum(Object.values(thirds)) - 100)).toBeLessThan(1e-9);

    const random = seededRandom(11);
    for (let i = 0; i < 500; i++) {
      const raw = Array.from({ length: 2 + Math.floor(random() * 8) }, () => random());
      const total = sum(raw);
      const weights = allocationsToWeights(Object.fromEntries(raw.map((value, j) => [`v${j}`, value / total])));
      expect(units(weights)).toBe(100_000);
      expect(Math.abs(sum(Object.values(weights)) - 100)).toBeLessThan(1e-9);
      raw.forEach((value, j) => {
        expect(Number.isInteger(Math.round(weights[`v${j}`] * 1000))).toBe(true);
        expect(Math.abs(weights[`v${j}`] - (100 * value) / total)).toBeLessThanOrEqual(0.001);
      });
    }
  });

  it('keeps a promoted winner at 100 and the floor exact', () => {
    expect(allocationsToWeights({ a: 0, b: 1 })).toEqual({ a: 0, b: 100 });
    const decision = decideAllocation(
      [
        { name: 'a', trials: 300, successes: 3 },
        { name: 'b', trials: 300, successes: 90 },
      ],
      {},
      { ...policy, autoRolloutWinner: false },
      seededRandom(2),
    );
    expect(allocationsToWeights(decision.allocations)).toEqual({ a: 5, b: 95 });
  });
});

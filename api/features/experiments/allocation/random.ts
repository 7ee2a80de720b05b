/**
 * Random draws for the bandit: a seeded uniform generator and Beta samples built on it. Pure: the
 * only state is the generator's, so a stored seed replays a reallocation exactly.
 */

// Local copies: inside a vm context (Temporal's workflow sandbox, jest) every global lookup goes
// through an interceptor, and the Monte Carlo loop makes millions of them (about 20x slower).
const { cos, imul, log, sin, sqrt, PI } = Math;

/** Deterministic uniform [0, 1) from a 32-bit seed (mulberry32, the generator the benches use). */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = imul(t ^ (t >>> 15), t | 1);
    t ^= t + imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

/** Standard normal draws by the Box-Muller transform; each pair of uniforms yields two normals. */
function normalSampler(random: () => number): () => number {
  let spare: number | null = null;
  return () => {
    if (spare !== null) {
      const value = spare;
      spare = null;
      return value;
    }
    // 1 - u lies in (0, 1], so the logarithm is finite.
    const radius = sqrt(-2 * log(1 - random()));
    const angle = 2 * PI * random();
    spare = radius * sin(angle);
    return radius * cos(angle);
  };
}

/**
 * Gamma(shape, 1) draws for shape >= 1 by Marsaglia & Tsang (2000), "A simple method for
 * generating gamma variables": a squeezed rejection from a transformed normal, accepting about
 * 95% or more of proposals at every shape.
 */
function gammaSampler(random: () => number): (shape: number) => number {
  const normal = normalSampler(random);
  return (shape) => {
    if (!(shape >= 1)) throw new RangeError(`gamma shape must be at least 1, got ${shape}`);
    const d = shape - 1 / 3;
    const c = 1 / sqrt(9 * d);
    for (;;) {
      const x = normal();
      const base = 1 + c * x;
      if (base <= 0) continue;
      const v = base * base * base;
      const u = 1 - random();
      if (u < 1 - 0.0331 * x * x * x * x) return d * v;
      if (log(u) < 0.5 * x * x + d * (1 - v + log(v))) return d * v;
    }
  };
}

/** Beta(alpha, beta) draws for alpha, beta >= 1 as X / (X + Y) with X ~ Gamma(alpha), Y ~ Gamma(beta). */
export function betaSampler(random: () => number): (alpha: number, beta: number) => number {
  const gamma = gammaSampler(random);
  return (alpha, beta) => {
    const x = gamma(alpha);
    const y = gamma(beta);
    return x / (x + y);
  };
}

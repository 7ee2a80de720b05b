/**
 * Standard normal distribution without a dependency: erfc from its power series below 2.5
 * (Abramowitz & Stegun 7.1.6, positive terms only, so no cancellation) and its continued fraction
 * above (A&S 7.1.14, Lentz's method), both summed to double precision; the quantile from Acklam's
 * rational approximation polished by one Halley step on that CDF. Checked against scipy in
 * test/release-safety/gates-stats.test.ts.
 */

const SQRT_PI = Math.sqrt(Math.PI);
const EPSILON = 1e-16;

/** erf(x) = 2/sqrt(pi) * exp(-x^2) * sum_n 2^n x^(2n+1) / (1*3*...*(2n+1)), for |x| < 2.5. */
function erfSeries(x: number): number {
  let term = x;
  let sum = x;
  for (let n = 1; n < 200 && Math.abs(term) > EPSILON * Math.abs(sum); n++) {
    term *= (2 * x * x) / (2 * n + 1);
    sum += term;
  }
  return ((2 / SQRT_PI) * Math.exp(-x * x) * sum);
}

/** erfc(x) for x >= 2.5: exp(-x^2)/sqrt(pi) * 1/(x + (1/2)/(x + 1/(x + (3/2)/(x + ...)))). */
function erfcContinuedFraction(x: number): number {
  const tiny = 1e-300;
  let f = x;
  let c = x;
  let d = 0;
  for (let n = 1; n < 500; n++) {
    const a = n / 2;
    d = x + a * d;
    d = Math.abs(d) < tiny ? tiny : d;
    c = x + a / c;
    c = Math.abs(c) < tiny ? tiny : c;
    d = 1 / d;
    const delta = c * d;
    f *= delta;
    if (Math.abs(delta - 1) < EPSILON) break;
  }
  return Math.exp(-x * x) / (SQRT_PI * f);
}

export function erfc(x: number): number {
  if (Number.isNaN(x)) return NaN;
  if (x < 0) return 2 - erfc(-x);
  return x < 2.5 ? 1 - erfSeries(x) : erfcContinuedFraction(x);
}

/** P(Z <= z). */
export function normalCdf(z: number): number {
  return 0.5 * erfc(-z / Math.SQRT2);
}

/** P(Z > z), accurate far into the upper tail. */
export function normalSf(z: number): number {
  return 0.5 * erfc(z / Math.SQRT2);
}

/** log P(Z <= z): log1p of the upper tail above 0, no underflow far below (log of the continued-fraction form). */
export function logNormalCdf(z: number): number {
  if (z > 0) return Math.log1p(-normalSf(z));
  if (z > -5) return Math.log(normalCdf(z));
  const x = -z / Math.SQRT2;
  // erfc(x) = exp(-x^2) * g(x) with g from the continued fraction; take the log of each factor.
  const g = erfcContinuedFraction(x) * Math.exp(x * x);
  return Math.log(0.5) - x * x + Math.log(g);
}

const ACKLAM_A = [-3.969683028665376e1, 2.209460984245205e2, -2.759285104469687e2, 1.38357751867269e2, -3.066479806614716e1, 2.506628277459239];
const ACKLAM_B = [-5.447609879822406e1, 1.615858368580409e2, -1.556989798598866e2, 6.680131188771972e1, -1.328068155288572e1];
const ACKLAM_C = [-7.784894002430293e-3, -3.223964580411365e-1, -2.400758277161838, -2.549732539343734, 4.374664141464968, 2.938163982698783];
const ACKLAM_D = [7.784695709041462e-3, 3.224671290700398e-1, 2.445134137142996, 3.754408661907416];
const ACKLAM_LOW = 0.02425;

/** z with P(Z <= z) = p, for 0 < p < 1. */
export function normalQuantile(p: number): number {
  if (!(p > 0 && p < 1)) throw new RangeError(`normalQuantile: p must lie in (0, 1), got ${p}`);
  const [a, b, c, d] = [ACKLAM_A, ACKLAM_B, ACKLAM_C, ACKLAM_D];
  let z: number;
  if (p < ACKLAM_LOW || p > 1 - ACKLAM_LOW) {
    const q = Math.sqrt(-2 * Math.log(p < ACKLAM_LOW ? p : 1 - p));
    const tail = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) / ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
    z = p < ACKLAM_LOW ? tail : -tail;
  } else {
    const q = p - 0.5;
    const r = q * q;
    z = ((((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q) / (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
  }
  // One Halley step on the exact CDF takes Acklam's 1e-9 relative error to machine precision.
  const e = normalCdf(z) - p;
  const u = e * Math.sqrt(2 * Math.PI) * Math.exp((z * z) / 2);
  return z - u / (1 + (z * u) / 2);
}

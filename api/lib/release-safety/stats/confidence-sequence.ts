import { logNormalCdf } from './normal';

/**
 * One-sided normal-mixture confidence sequences (Robbins' mixture; Howard et al. 2021,
 * "Time-uniform, nonparametric, nonasymptotic confidence sequences"; in the asymptotic form of
 * Waudby-Smith et al. 2023, "Time-uniform central limit theory and asymptotic confidence
 * sequences"). For an estimate with variance V and a mixing distribution N(0, tau^2) on the
 * effect restricted to one side (a half-normal), the likelihood ratio against the boundary value
 * is, with z the standardized distance and r = tau^2 / V,
 *
 *   L(z, r) = 2 (1 + r)^(-1/2) exp(z^2 r / (2 (1 + r))) Phi(z sqrt(r / (1 + r))),
 *
 * a nonnegative martingale under the null, so by Ville's inequality it ever reaches 1/alpha with
 * probability at most alpha, however often it is looked at. The boundary is the z where
 * L(z, r) = 1/alpha.
 */

/** log L(z, r) of the half-normal mixture. */
export function logMixtureLikelihoodRatio(z: number, r: number): number {
  const shrink = r / (1 + r);
  return Math.log(2) - 0.5 * Math.log1p(r) + (z * z * shrink) / 2 + logNormalCdf(z * Math.sqrt(shrink));
}

/** The standardized distance at which the one-sided mixture test rejects: L(z, r) = 1 / alpha. */
export function mixtureBoundary(r: number, alpha: number): number {
  if (!(r > 0)) return Infinity;
  const target = -Math.log(alpha);
  let low = 0;
  let high = 1;
  while (logMixtureLikelihoodRatio(high, r) < target) {
    low = high;
    high *= 2;
    if (high > 1e6) return Infinity;
  }
  for (let i = 0; i < 60 && high - low > 1e-12 * high; i++) {
    const mid = (low + high) / 2;
    if (logMixtureLikelihoodRatio(mid, r) < target) low = mid;
    else high = mid;
  }
  return high;
}

/**
 * Mixing variance per unit of effective sample size, rho^2, chosen so that the one-sided
 * boundary is tightest when the effective sample size reaches `designSamples` (Waudby-Smith et
 * al., eq. for rho with alpha replaced by 2 alpha for one side). Then r = rho^2 * n_eff: the
 * mixture is scaled to the standard deviation of one observation, so one setting serves error
 * rates and latencies alike.
 */
export function mixingRate(alpha: number, designSamples: number): number {
  const twoLog = -2 * Math.log(2 * alpha);
  return (twoLog + Math.log1p(twoLog)) / designSamples;
}

/** Effective sample size of a two-sample difference: 1 / (1/n1 + 1/n2). */
export function effectiveSampleSize(n1: number, n2: number): number {
  return n1 > 0 && n2 > 0 ? (n1 * n2) / (n1 + n2) : 0;
}

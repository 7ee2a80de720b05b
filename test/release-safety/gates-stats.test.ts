import fixture from './fixtures/gate-stats.json';
import { effectiveSampleSize, mixingRate, mixtureBoundary } from '../../api/lib/release-safety/stats/confidence-sequence';
import { meanDifferenceBounds } from '../../api/lib/release-safety/stats/means';
import { erfc, logNormalCdf, normalCdf, normalQuantile, normalSf } from '../../api/lib/release-safety/stats/normal';
import { correctedScoreStatistic, rateDifferenceBounds, restrictedRates } from '../../api/lib/release-safety/stats/proportions';
import { sampleRatioTest } from '../../api/lib/release-safety/stats/srm';

/** Reference values: test/release-safety/fixtures/make_fixtures.py (scipy, statsmodels). */

const closeRelative = (actual: number, expected: number, tolerance: number) => {
  expect(Math.abs(actual - expected)).toBeLessThanOrEqual(tolerance * Math.max(Math.abs(expected), 1e-300));
};

describe('standard normal against scipy', () => {
  it.each(fixture.normal)('erfc, cdf, sf and log cdf at $z', ({ z, erfc: e, cdf, sf, logcdf }) => {
    closeRelative(erfc(z), e, 1e-12);
    closeRelative(normalCdf(z), cdf, 1e-12);
    closeRelative(normalSf(z), sf, 1e-12);
    closeRelative(logNormalCdf(z), logcdf, 1e-12);
  });

  it.each(fixture.quantiles)('quantile at $p', ({ p, z }) => {
    expect(Math.abs(normalQuantile(p) - z)).toBeLessThan(1e-9 * Math.max(1, Math.abs(z)));
  });

  it('rejects probabilities outside (0, 1)', () => {
    expect(() => normalQuantile(0)).toThrow(RangeError);
    expect(() => normalQuantile(1)).toThrow(RangeError);
  });
});

describe('sample-ratio mismatch against scipy.stats.chisquare', () => {
  it.each(fixture.srm)('$treatment / $control at share $share', ({ treatment, control, share, statistic, pValue }) => {
    const test = sampleRatioTest(treatment, control, share);
    closeRelative(test.statistic, statistic, 1e-12);
    closeRelative(test.pValue, pValue, 1e-10);
  });

  it('has nothing to test without exposures or with a degenerate share', () => {
    expect(sampleRatioTest(0, 0, 0.1).pValue).toBe(1);
    expect(sampleRatioTest(10, 0, 1).pValue).toBe(1);
  });
});

describe('one-sided normal-mixture boundary', () => {
  it.each(fixture.boundaries)('r $r, alpha $alpha', ({ r, alpha, z }) => {
    closeRelative(mixtureBoundary(r, alpha), z, 1e-10);
  });

  it('is unbounded without data and falls as data accumulate', () => {
    expect(mixtureBoundary(0, 0.05)).toBe(Infinity);
    expect(mixtureBoundary(1, 0.05)).toBeGreaterThan(mixtureBoundary(6, 0.05));
  });

  it.each(fixture.mixing)('mixing rate for alpha $alpha tuned at $design samples', ({ alpha, design, rho2 }) => {
    closeRelative(mixingRate(alpha, design), rho2, 1e-14);
  });

  it('effective sample size of a difference', () => {
    expect(effectiveSampleSize(1000, 9000)).toBe(900);
    expect(effectiveSampleSize(0, 9000)).toBe(0);
  });
});

describe('difference of proportions', () => {
  it.each(fixture.restricted)('restricted rates for $errors1/$n1 vs $errors2/$n2 at difference $difference', ({ errors1, n1, errors2, n2, difference, p1, p2 }) => {
    const [r1, r2] = restrictedRates(errors1, n1, errors2, n2, difference);
    expect(Math.abs(r1 - p1)).toBeLessThan(1e-9);
    expect(Math.abs(r2 - p2)).toBeLessThan(1e-9);
  });

  it.each(fixture.score)('score variance matches statsmodels for $errors1/$n1 vs $errors2/$n2 at $difference', ({ errors1, n1, errors2, n2, difference, z }) => {
    const [p1, p2] = restrictedRates(errors1, n1, errors2, n2, difference);
    const uncorrected = (errors1 / n1 - errors2 / n2 - difference) / Math.sqrt((p1 * (1 - p1)) / n1 + (p2 * (1 - p2)) / n2);
    closeRelative(uncorrected, z, 1e-8);
  });

  it.each(fixture.bounds)('bounds of $errors1/$n1 vs $errors2/$n2 at distance $boundary', ({ errors1, n1, errors2, n2, boundary, estimate, lower, upper }) => {
    const bounds = rateDifferenceBounds(errors1, n1, errors2, n2, boundary);
    expect(bounds.estimate).toBeCloseTo(estimate, 12);
    expect(Math.abs(bounds.lower - lower)).toBeLessThan(1e-9);
    expect(Math.abs(bounds.upper - upper)).toBeLessThan(1e-9);
    // The lower bound is where the corrected statistic reaches the boundary.
    if (bounds.lower > -1) expect(correctedScoreStatistic(errors1, n1, errors2, n2, bounds.lower)).toBeCloseTo(boundary, 5);
  });

  it('spans every difference when a side has no exposures', () => {
    expect(rateDifferenceBounds(3, 100, 0, 0, 2)).toEqual({ estimate: 0.03, lower: -1, upper: 1 });
  });
});

describe('difference of means', () => {
  it('is the estimate plus or minus the distance in Welch standard errors', () => {
    const bounds = meanDifferenceBounds({ count: 100, mean: 150, variance: 400 }, { count: 400, mean: 140, variance: 900 }, 3);
    const standardError = Math.sqrt(400 / 100 + 900 / 400);
    expect(bounds.estimate).toBe(10);
    expect(bounds.lower).toBeCloseTo(10 - 3 * standardError, 12);
    expect(bounds.upper).toBeCloseTo(10 + 3 * standardError, 12);
  });
});

/** Difference of two means, treatment minus control, with the unpooled (Welch) variance. */

export interface MeanSample {
  count: number;
  mean: number;
  /** Sample variance, n - 1 denominator. */
  variance: number;
}

export interface MeanDifference {
  estimate: number;
  lower: number;
  upper: number;
  /** Variance of the estimate: s1^2/n1 + s2^2/n2. */
  variance: number;
}

/** estimate -/+ boundary * standard error; `boundary` is the standardized distance of the test. */
export function meanDifferenceBounds(treatment: MeanSample, control: MeanSample, boundary: number): MeanDifference {
  const estimate = treatment.mean - control.mean;
  const variance = treatment.variance / treatment.count + control.variance / control.count;
  const halfWidth = boundary * Math.sqrt(variance);
  return { estimate, lower: estimate - halfWidth, upper: estimate + halfWidth, variance };
}

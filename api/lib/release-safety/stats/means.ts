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
}

/** estimate -/+ boundary * standard error; `boundary` is the standardized distance of the test. */
export function meanDifferenceBounds(treatment: MeanSample, control: MeanSample, boundary: number): MeanDifference {
  const estimate = treatment.mean - control.mean;
  // Variances summed from running sums can come out a hair below zero.
  const variance = Math.max(0, treatment.variance) / treatment.count + Math.max(0, control.variance) / control.count;
  const halfWidth = boundary * Math.sqrt(variance);
  return { estimate, lower: estimate - halfWidth, upper: estimate + halfWidth };
}

import { erfc } from './normal';

export interface SrmTest {
  statistic: number;
  pValue: number;
}

/**
 * Sample-ratio mismatch: Pearson chi-square goodness of fit (1 degree of freedom) of the
 * exposure counts against the expected treatment share. With one degree of freedom the
 * chi-square survival function is erfc(sqrt(x / 2)).
 */
export function sampleRatioTest(treatmentExposures: number, controlExposures: number, treatmentShare: number): SrmTest {
  const total = treatmentExposures + controlExposures;
  if (total === 0 || treatmentShare <= 0 || treatmentShare >= 1) return { statistic: 0, pValue: 1 };
  const expectedTreatment = total * treatmentShare;
  const expectedControl = total - expectedTreatment;
  const statistic = (treatmentExposures - expectedTreatment) ** 2 / expectedTreatment + (controlExposures - expectedControl) ** 2 / expectedControl;
  return { statistic, pValue: erfc(Math.sqrt(statistic / 2)) };
}

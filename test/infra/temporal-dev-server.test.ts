import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { devServerPartitionArgs } from '../../api/infra/temporal';

// The embedded profile's Temporal dev server (docs/operations.md#resource-use-at-idle): one
// partition per task queue on a database it creates; a database made with Temporal's four keeps them.
describe('the dev server task queue partitions', () => {
  let dir: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'flags-temporal-partitions-'));
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));
  const single = ['--dynamic-config-value', 'matching.numTaskqueueReadPartitions=1', '--dynamic-config-value', 'matching.numTaskqueueWritePartitions=1'];

  it('gives a new database one partition, and keeps it one once the database exists', () => {
    const database = path.join(dir, 'temporal.sqlite');
    expect(devServerPartitionArgs(database)).toEqual(single);
    fs.writeFileSync(database, 'made by the dev server');
    expect(devServerPartitionArgs(database)).toEqual(single);
  });

  it('leaves a database made before (with four partitions) on the default, so no waiting task is stranded', () => {
    const database = path.join(dir, 'temporal.sqlite');
    fs.writeFileSync(database, 'made by an earlier version');
    expect(devServerPartitionArgs(database)).toEqual([]);
    expect(devServerPartitionArgs(database)).toEqual([]);
  });
});

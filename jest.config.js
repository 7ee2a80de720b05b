/** Jest runs TypeScript through SWC; integration tests share the servers started by scripts/test.sh. */
module.exports = {
  testEnvironment: 'node',
  transform: { '^.+\\.ts$': ['@swc/jest'] },
  testMatch: ['<rootDir>/test/**/*.test.ts', '<rootDir>/api/**/*.test.ts'],
  globalSetup: '<rootDir>/test/support/global-setup.ts',
  testTimeout: 60000,
  maxWorkers: 2,
};

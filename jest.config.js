/** Jest runs TypeScript through SWC; integration tests share the servers started by scripts/test.sh. */
module.exports = {
  testEnvironment: 'node',
  // jose and oauth4webapi are ESM-only: SWC turns them into CommonJS for the test runtime (Node 20 runs it natively).
  transform: { '^.+\\.(t|j|mj)s$': ['@swc/jest'] },
  transformIgnorePatterns: ['/node_modules/(?!(?:jose|oauth4webapi)/)'],
  // Dynamic imports name the compiled file (`../activities/worker.js`); tests load the .ts.
  moduleNameMapper: { '^(\\.{1,2}/.*)\\.js$': '$1' },
  testMatch: ['<rootDir>/test/**/*.test.ts', '<rootDir>/api/**/*.test.ts'],
  globalSetup: '<rootDir>/test/support/global-setup.ts',
  globalTeardown: '<rootDir>/test/support/global-teardown.ts',
  testTimeout: 60000,
  maxWorkers: 2,
};

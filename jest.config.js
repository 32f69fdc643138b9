// One jest run covers every package and app. TypeScript is transpiled per file (isolatedModules);
// type checking is `tsc -b`, which the test script runs first.
const packages = ['domain', 'scopes', 'webhooks', 'config', 'db', 'queue', 'net', 'outbox', 'audit', 'mail', 'storage'];

/** @type {import('jest').Config} */
module.exports = {
  testEnvironment: 'node',
  roots: ['<rootDir>/packages', '<rootDir>/apps', '<rootDir>/bench'],
  testMatch: ['**/?(*.)test.ts'],
  testPathIgnorePatterns: ['/node_modules/', '/dist/'],
  transform: {
    '^.+\\.ts$': ['ts-jest', { tsconfig: '<rootDir>/tsconfig.test.json' }],
  },
  moduleNameMapper: {
    ...Object.fromEntries(packages.map((name) => [`^@svc/${name}$`, `<rootDir>/packages/${name}/src`])),
    // The generated Prisma client imports its siblings with .js extensions.
    '^(\\.{1,2}/.*)\\.js$': '$1',
  },
  globalSetup: '<rootDir>/test-support/global-setup.js',
  globalTeardown: '<rootDir>/test-support/global-teardown.js',
  testTimeout: 30000,
};

/** @type {import('jest').Config} */
export default {
  testEnvironment: 'node',
  extensionsToTreatAsEsm: ['.ts'],
  transform: {
    '^.+\\.ts$': ['@swc/jest', { jsc: { parser: { syntax: 'typescript' }, target: 'es2023' } }],
  },
  moduleNameMapper: { '^(\\.{1,2}/.*)\\.js$': '$1' },
  testMatch: ['<rootDir>/test/**/*.test.ts'],
  // Tests that need the Go-built tools (a Kubernetes control plane, MinIO): jest.k8s.config.js.
  testPathIgnorePatterns: ['/node_modules/', '<rootDir>/test/k8s/', '<rootDir>/test/tools/'],
  globalSetup: '<rootDir>/test/helpers/global-setup.ts',
  // Checks every response from a Triad server against its OpenAPI document (fails the test).
  setupFilesAfterEnv: ['<rootDir>/test/helpers/validate-responses.ts'],
  globalTeardown: '<rootDir>/test/helpers/global-teardown.ts',
  testTimeout: 60000,
  maxWorkers: 2,
  // A finished run exits even if a library keeps an idle keep-alive socket open.
  forceExit: true,
};

import base from './jest.config.js';

/**
 * Tests against a real Kubernetes control plane (test/k8s) and the other Go-built tools (MinIO):
 * `npm run test:k8s`, which builds the tools first when they are missing.
 * @type {import('jest').Config}
 */
export default {
  ...base,
  testMatch: ['<rootDir>/test/k8s/**/*.test.ts', '<rootDir>/test/tools/**/*.test.ts'],
  testPathIgnorePatterns: [],
  globalSetup: '<rootDir>/test/k8s/global-setup.ts',
  globalTeardown: '<rootDir>/test/k8s/global-teardown.ts',
  testTimeout: 180000,
};

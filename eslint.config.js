import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import globals from 'globals';

/** Folders of src/ that are not features: shared layers every feature may import. */
const SHARED = ['domain', 'http', 'db', 'events', 'storage', 'telemetry', 'vcs'];
/** The files that speak HTTP: each feature's route table, the VCS wire protocol endpoint, the web pages. */
const HTTP_EDGE = ['src/*/routes.ts', 'src/repos/hosting.ts', 'src/web/**'];
const OTHER_FEATURE_DATA = {
  group: ['../*/*repository', '../*/*repository.ts', '../*/*entities', '../*/*entities.ts'],
  message: "another feature's data is reached through its service (docs/architecture.md)",
};
const NO_EXPRESS = {
  name: 'express',
  message: 'only routes speak HTTP: services, repositories and vcs/ take and return plain values',
};

export default tseslint.config(
  {
    ignores: [
      'node_modules/',
      'data/',
      'dist/',
      'coverage/',
      'bench/.work/',
      'charts/',
      'manifests/',
      // generated from the OpenAPI document (test/client/generate.ts)
      'test/client/triad-api.ts',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      globals: { ...globals.node },
      parserOptions: {
        projectService: { allowDefaultProject: ['*.js', 'bin/*.js'] },
        tsconfigRootDir: import.meta.dirname,
      },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/switch-exhaustiveness-check': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_' }],
    },
  },
  // Layer boundaries (docs/architecture.md): a feature folder (any folder of src/ but the shared
  // ones) asks another feature's service, never its repository or entities; below the routes,
  // nothing speaks express.
  {
    files: ['src/*/**/*.ts'],
    ignores: SHARED.map((d) => `src/${d}/**`),
    rules: { 'no-restricted-imports': ['error', { patterns: [OTHER_FEATURE_DATA] }] },
  },
  {
    files: ['src/*/**/*.ts'],
    ignores: [...SHARED.filter((d) => d !== 'vcs').map((d) => `src/${d}/**`), ...HTTP_EDGE],
    rules: {
      'no-restricted-imports': ['error', { paths: [NO_EXPRESS], patterns: [OTHER_FEATURE_DATA] }],
    },
  },
  // The file-size rule of docs/architecture.md: a file that outgrows it is split by use case.
  { files: ['src/**/*.ts', 'agent/**/*.ts'], rules: { 'max-lines': ['error', { max: 400 }] } },
  {
    files: ['test/**/*.ts', 'bench/**/*.ts'],
    rules: {
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-non-null-assertion': 'off',
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
    },
  },
  // The web interface's script islands run in browsers.
  { files: ['src/web/islands/**/*.ts'], languageOptions: { globals: { ...globals.browser } } },
  { files: ['*.js', 'bin/*.js'], ...tseslint.configs.disableTypeChecked },
);

import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import { createNodeResolver, importX } from 'eslint-plugin-import-x';
import reactHooks from 'eslint-plugin-react-hooks';

// Node built-ins that do I/O or read the host: never in workflow code (bare and node: forms).
const IO_BUILTINS = ['fs', 'fs/promises', 'net', 'http', 'https', 'http2', 'tls', 'dgram', 'dns', 'dns/promises', 'child_process', 'cluster', 'worker_threads', 'os', 'readline'];

export default tseslint.config(
  { ignores: ['dist/**', 'api/gen/**', 'web/src/api/schema.d.ts', 'node_modules/**', 'data/**', 'coverage/**', '*.js', '*.mjs'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    plugins: { 'import-x': importX },
    settings: {
      'import-x/extensions': ['.ts', '.js'],
      'import-x/parsers': { '@typescript-eslint/parser': ['.ts'] },
      'import-x/resolver-next': [createNodeResolver({ extensions: ['.ts', '.js', '.json', '.node'] })],
    },
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/no-explicit-any': 'off',
      // A type crosses modules as `import type`: erased at build, it never loads the module.
      // `typeof import('jose', ...)` stays allowed: it types an ESM-only package loaded with import().
      '@typescript-eslint/consistent-type-imports': ['error', { disallowTypeAnnotations: false }],
      // Circles between modules that load each other (import-x does not follow `import type`).
      'import-x/no-cycle': ['error', { ignoreExternal: true }],
    },
  },
  {
    // The web console (web/, built by Vite): browser code with JSX; imports resolve .tsx too.
    files: ['web/**/*.{ts,tsx}'],
    settings: {
      'import-x/extensions': ['.ts', '.tsx', '.js'],
      'import-x/parsers': { '@typescript-eslint/parser': ['.ts', '.tsx'] },
      'import-x/resolver-next': [createNodeResolver({ extensions: ['.ts', '.tsx', '.js', '.json'] })],
    },
    plugins: { 'react-hooks': reactHooks },
    rules: {
      'react-hooks/rules-of-hooks': 'error',
      'react-hooks/exhaustive-deps': 'error',
    },
  },
  {
    // Workflow code runs in Temporal's deterministic sandbox bundle: it talks to the world only
    // through activities, and shares types with starters and activities through
    // workflows/messages.ts. api/ and activities/ are off limits as a whole (types included):
    // their modules reach clients and drivers, and a type import is how the old circle began.
    // The one exception is api/domain/, whose modules import nothing but zod (checked below).
    files: ['workflows/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          paths: [...IO_BUILTINS, ...IO_BUILTINS.map((name) => `node:${name}`)].map((name) => ({ name, message: 'Workflow code does no I/O: use an activity.' })),
          patterns: [
            {
              group: ['@temporalio/client', '@temporalio/client/*', '@temporalio/worker', '@temporalio/worker/*', '@temporalio/activity', '@temporalio/activity/*'],
              message: 'Workflow code uses @temporalio/workflow only; starting and running workflows belongs to api/ and activities/.',
            },
            {
              group: ['postgres', 'ioredis', '@clickhouse/client', '@clickhouse/client/*', 'chdb', 'chdb/*', 'undici', 'undici/*', 'nodemailer', 'express'],
              message: 'Workflow code uses no client or driver: use an activity.',
            },
            {
              regex: '(^|/)(api(?!/domain/)|activities)(/|$)',
              message: 'Workflow code imports only workflows/ and api/domain/ (shared types and signals are in workflows/messages.ts).',
            },
          ],
        },
      ],
    },
  },
  {
    // Shared domain lists and schemas that workflow code imports too: zod and each other only, so the workflow bundle stays free of I/O.
    files: ['api/domain/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        { patterns: [{ regex: '^(?!zod$|\\./)', message: 'api/domain/ is imported by workflow code: it imports nothing but zod and its own modules.' }] },
      ],
    },
  },
);

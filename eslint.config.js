import js from '@eslint/js';
import tseslint from 'typescript-eslint';

// The layers of src/, in dependency order: a file may import its own layer and the layers before it,
// never one after it (docs/architecture.md). src/index.ts, src/cli and src/nestjs are the entries on
// top. Checked on every relative import and re-export, type-only ones included.
const LAYERS = ['core', 'dialects', 'admin', 'integrations', 'guard', ['cli', 'nestjs']];
const DIRECTION = 'core -> dialects -> admin -> integrations -> guard -> cli, nestjs (see docs/architecture.md)';
const up = (depth) => '\\.\\./'.repeat(depth);

/** The no-restricted-imports blocks that keep src/ one way. */
function layerRules() {
  const blocks = [];
  LAYERS.forEach((entry, index) => {
    const later = LAYERS.slice(index + 1).flat();
    const names = [entry].flat();
    for (const name of names) {
      // The other entries of the same rank (cli and nestjs) do not import each other either.
      const forbidden = [...later, ...names.filter((other) => other !== name), 'index\\.js$'];
      for (let depth = 1; depth <= 3; depth++) {
        const patterns = [
          {
            regex: `^${up(depth)}(${forbidden.join('|')})(/|$)`,
            message: `src/${name} may not import a later layer or an entry point: ${DIRECTION}.`,
          },
        ];
        if (name === 'dialects' && depth === 2) {
          // Inside dialects/: the dialect folders and common/ never import the dialects root
          // (connect.ts, which imports them) nor each other; only common/ is shared.
          patterns.push({
            regex: '^\\.\\./(?!common/|\\.\\./)',
            message: 'A dialect folder may import only its own files, dialects/common and earlier layers (docs/architecture.md).',
          });
        }
        blocks.push({
          files: [`src/${name}/${'*/'.repeat(depth - 1)}*.ts`],
          rules: { 'no-restricted-imports': ['error', { patterns }] },
        });
      }
    }
  });
  blocks.push({
    files: ['migrations/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              regex: '^\\.\\./src/(?!core/)',
              message: `The migrations may import only src/core: src/admin runs them. ${DIRECTION}.`,
            },
          ],
        },
      ],
    },
  });
  return blocks;
}

export default tseslint.config(
  {
    ignores: [
      'dist/**',
      '**/node_modules/**',
      '.tmp/**',
      'test/fixtures/decorators/**/out/**',
      'test/fixtures/nest-app/out/**',
      'examples/nestjs/dist/**',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.strict,
  {
    files: ['**/*.ts'],
    rules: {
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      // NestJS modules are classes that only carry a decorator (@Module({ … })).
      '@typescript-eslint/no-extraneous-class': ['error', { allowWithDecorator: true }],
    },
  },
  ...layerRules(),
  {
    // Files split by concept, none over 400 lines (docs/architecture.md; test/architecture.test.ts checks it too).
    files: ['src/**/*.ts'],
    rules: { 'max-lines': ['error', { max: 400, skipBlankLines: false, skipComments: false }] },
  },
  {
    files: ['**/*.js', '**/*.cjs', '**/*.mjs'],
    languageOptions: { globals: { console: 'readonly', process: 'readonly', require: 'readonly' } },
  },
);

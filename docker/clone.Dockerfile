# syntax=docker/dockerfile:1
# The clone init container of step pods (the kubernetes executor, TRIAD_AGENT_CLONE_IMAGE; the
# chart's cloneImage): sh, git, mercurial, fossil and CA certificates, nothing else (no Node, no
# Triad). Build (docs/kubernetes.md, "Images"):
#
#   docker build -f docker/clone.Dockerfile --build-arg VERSION=0.1.0 \
#     --build-arg REVISION="$(git rev-parse HEAD)" -t registry.example.com/triad-clone:0.1.0 docker
#
# The base image is pinned to an exact Debian release (the same Debian as the server image's, so
# the three tools have the same versions); add a digest with --build-arg BASE_IMAGE=...@sha256:<digest>.
ARG BASE_IMAGE=debian:12.12-slim
FROM ${BASE_IMAGE}
ARG VERSION=0.1.0
ARG REVISION=unknown
ARG CREATED=unknown
ARG SOURCE=''
LABEL org.opencontainers.image.title="triad-clone" \
      org.opencontainers.image.description="Clone init container of Triad's CI step pods: sh, git, mercurial, fossil" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.source="${SOURCE}" \
      org.opencontainers.image.base.name="${BASE_IMAGE}"

RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates git mercurial fossil \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --gid 1000 triad \
 && useradd --uid 1000 --gid 1000 --create-home --shell /bin/sh triad

# The executor sets HOME to the workspace and runs the container as the pod's user (1000 by default).
ENV HGPLAIN=1 \
    GIT_TERMINAL_PROMPT=0
USER 1000:1000
WORKDIR /home/triad
CMD ["sh"]

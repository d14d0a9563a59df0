# syntax=docker/dockerfile:1
# mcpctl in a container (docs/src/operations/deploy.md).
#
#   docker build -t mcpctl .                         # mcpctl alone (the default, last stage)
#   docker build -t mcpctl:node --target node .      # with Node.js, for servers run with npx
#
# The image runs as the unprivileged user `mcpctl`, keeps its store in the volume
# /var/lib/mcpctl (MCPCTL_HOME) and listens on 0.0.0.0:8080 (MCPCTL_LISTEN) once told what to
# serve: `docker run -e MCPCTL_PROJECT=demo ...`, or `docker run mcpctl serve demo`.

# The toolchain rust-toolchain.toml names (scripts/image-check keeps the two equal).
ARG RUST_VERSION=1.95.0

FROM rust:${RUST_VERSION}-slim-bookworm AS builder
ARG RUST_VERSION
# The image's own toolchain: rustup then leaves out rust-toolchain.toml's rustfmt and clippy,
# which a release build does not use.
ENV RUSTUP_TOOLCHAIN=${RUST_VERSION}
WORKDIR /src
# The whole workspace (.dockerignore leaves out target/, .git and the test suites' installs):
# cargo reads every member's manifest, and --locked builds exactly Cargo.lock.
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p mcpctl \
    && install -D -m 0755 target/release/mcpctl /out/mcpctl

FROM debian:bookworm-slim AS runtime
# ca-certificates: the system roots, for HTTPS upstreams, OTLP and rediss://.
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 10001 mcpctl \
    && useradd --system --uid 10001 --gid mcpctl --create-home --home-dir /home/mcpctl mcpctl \
    && install -d -o mcpctl -g mcpctl -m 0700 /var/lib/mcpctl
COPY --from=builder /out/mcpctl /usr/local/bin/mcpctl
ENV MCPCTL_HOME=/var/lib/mcpctl \
    MCPCTL_LISTEN=0.0.0.0:8080
VOLUME ["/var/lib/mcpctl"]
EXPOSE 8080
USER mcpctl
WORKDIR /home/mcpctl
ENTRYPOINT ["mcpctl"]
CMD ["serve"]

# Node.js and npm (Debian's), for projects whose servers start with `npx`.
FROM runtime AS node
USER root
RUN apt-get update \
    && apt-get install -y --no-install-recommends nodejs npm \
    && rm -rf /var/lib/apt/lists/*
USER mcpctl

# The default image: mcpctl alone.
FROM runtime

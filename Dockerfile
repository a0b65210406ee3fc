# Build: the official Swift 6.3 image, static Swift runtime, release mode.
FROM swift:6.3-bookworm AS build
RUN apt-get update && apt-get install -y --no-install-recommends libsqlite3-dev libpq-dev && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY Package.swift ./
RUN swift package resolve
COPY . .
RUN swift build -c release --static-swift-stdlib --product library-server \
    && cp "$(swift build -c release --show-bin-path)/library-server" /library-server

# Run: slim Debian with only what the binary links: SQLite, and libpq for a postgres:// database
# (replicas). No CA certificates: TLS to PostgreSQL, when wanted, needs ca-certificates added. No curl either: the health check is the binary's own --check-health.
# scripts/container-runtime.sh runs this stage's RUN line, COPYs, ENV, USER and HEALTHCHECK in a
# debootstrap'ed Debian root under chroot, since no Docker engine runs on the build machines.
FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends libsqlite3-0 libpq5 && rm -rf /var/lib/apt/lists/* && useradd --system --uid 10001 --home-dir /data library && mkdir -p /data && chown library /data
COPY --from=build /library-server /usr/local/bin/library-server
# The schema is embedded in the binary; the migrations are also shipped for reference.
COPY Migrations /usr/local/share/library-server/Migrations
USER 10001
VOLUME /data
ENV LIBRARY_HOST=0.0.0.0 LIBRARY_PORT=8080 LIBRARY_DATABASE=/data/library.sqlite
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s CMD ["/usr/local/bin/library-server", "--check-health"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/library-server"]

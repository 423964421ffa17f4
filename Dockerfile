# syntax=docker/dockerfile:1
# The clinic-server image: a Rust build stage, then a small Debian runtime with the binary
# alone (migrations are compiled in, TLS roots are bundled, time zones come from PostgreSQL).
#
#   docker build -t clinic-server .
#   docker run -e DATABASE_URL=postgres://clinic:secret@db:5432/clinic -p 8080:8080 \
#     --stop-timeout 40 clinic-server
#
# DATABASE_URL is required: the image has no PostgreSQL of its own. SIGTERM drains for up to
# SHUTDOWN_GRACE_SECONDS (30 by default); give the container longer than that to stop
# (docker --stop-timeout, compose stop_grace_period, Kubernetes terminationGracePeriodSeconds),
# or lower the setting, or the drain is cut short.

FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock build.rs ./
COPY src ./src
# The fonts documents print with are compiled in (assets/fonts/README.md).
COPY assets/fonts ./assets/fonts
COPY migrations ./migrations
COPY tenants ./tenants
COPY sql ./sql
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bin clinic-server \
    && cp target/release/clinic-server /usr/local/bin/clinic-server

FROM debian:bookworm-slim
# A fixed, unprivileged user; its home holds what the server writes (./var/mail without SMTP).
RUN groupadd --system --gid 10001 clinic \
    && useradd --system --uid 10001 --gid clinic --home-dir /var/lib/clinic-server --create-home \
       --shell /usr/sbin/nologin clinic
COPY --from=build /usr/local/bin/clinic-server /usr/local/bin/clinic-server
USER 10001:10001
WORKDIR /var/lib/clinic-server
ENV BIND_ADDR=0.0.0.0:8080 \
    RUST_LOG=info
EXPOSE 8080
# Readiness: 200 when this instance should get traffic (503 while it drains or while its
# registry database does not answer). Asked over bash's /dev/tcp, so the image needs no
# HTTP client.
HEALTHCHECK --interval=10s --timeout=4s --start-period=60s --retries=3 \
    CMD ["bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/${BIND_ADDR##*:} && printf 'GET /api/v1/public/ready HTTP/1.0\\r\\nHost: localhost\\r\\n\\r\\n' >&3 && read -r _ status _ <&3 && [ \"$status\" = 200 ]"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/clinic-server"]
CMD ["serve"]

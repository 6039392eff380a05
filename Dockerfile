# syntax=docker/dockerfile:1
# Floodgate's container image: a static binary FROM scratch, running as
# the unprivileged user 65532, with the quickstart's configuration at
# /etc/floodgate/floodgate.yaml (mount yours over it).
#
#   make image        # docker build -t floodgate:dev, version/commit/date stamped
#   docker run --rm -p 127.0.0.1:8080:8080 -p 127.0.0.1:9090:9090 floodgate:dev
#
# Ports: 8080 gateway, 8081 decision API and forward-auth, 9090 admin
# (/healthz, /readyz, /metrics). docs/DEPLOY.md has the rest.
#
# /bin/ratelimit links to the binary: run under that name, it is
# envoyproxy/ratelimit configured by its environment, so Envoy Gateway's
# rate limit Deployment (command /bin/ratelimit) runs this image as it is
# (docs/ENVOY.md, "Envoy Gateway and AI Gateway").

ARG GO_VERSION=1.26

FROM golang:${GO_VERSION} AS build
WORKDIR /src
# The go.mod and go.sum of the daemon's module and of the library's modules
# its replace directives name (docs/ARCHITECTURE.md, "Modules"), so the
# download is a layer of its own that a change of source keeps.
COPY go.mod go.sum ./
COPY envoyrls/go.mod envoyrls/go.sum envoyrls/
COPY metrics/go.mod metrics/go.sum metrics/
COPY ops/go.mod ops/go.sum ops/
COPY rlqs/go.mod rlqs/go.sum rlqs/
COPY tier/go.mod tier/go.sum tier/
COPY tierhttp/go.mod tierhttp/go.sum tierhttp/
COPY cmd/floodgate/go.mod cmd/floodgate/go.sum cmd/floodgate/
RUN cd cmd/floodgate && go mod download
COPY . .
ARG VERSION="" COMMIT="" DATE=""
# The same script as make build, so the image runs the binary that
# scripts/emptyroot-test.sh proves in an empty root.
RUN VERSION="$VERSION" COMMIT="$COMMIT" DATE="$DATE" scripts/build.sh /out/floodgate \
 && mkdir -p /out/etc/floodgate /out/etc/ssl/certs /out/bin \
 && ln -s ../floodgate /out/bin/ratelimit \
 && cp deploy/container/floodgate.yaml /out/etc/floodgate/floodgate.yaml \
 && cp /etc/ssl/certs/ca-certificates.crt /out/etc/ssl/certs/

# Nothing but the binary, its configuration and the CA certificates (for
# https:// upstreams and rediss://).
FROM scratch AS final
COPY --from=build /out/ /
USER 65532:65532
EXPOSE 8080 8081 9090
# scratch has no curl: the binary checks its own admin listener.
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
  CMD ["/floodgate", "healthcheck", "http://127.0.0.1:9090/healthz"]
ENTRYPOINT ["/floodgate"]
CMD ["serve", "-c", "/etc/floodgate/floodgate.yaml"]

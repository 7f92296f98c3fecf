# syntax=docker/dockerfile:1
# Loopgate: a static binary on a distroless base, run as a non-root user.
#   docker build -t loopgate .
#   docker run --rm -p 8080:8080 -v "$PWD/loopgate.yaml:/etc/loopgate/loopgate.yaml:ro" loopgate
# GO_VERSION follows go.mod's go line (TestDockerfile checks it).
ARG GO_VERSION=1.26.8

FROM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# No cgo: the binary links nothing from the build image and runs on a base
# without a libc.
RUN CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags="-s -w" -o /out/loopgate ./cmd/loopgate

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/loopgate /usr/local/bin/loopgate
COPY cmd/loopgate/dist/loopgate.yaml /etc/loopgate/loopgate.yaml
# distroless's nonroot user; /tmp (spill files) is writable by it.
USER 65532:65532
EXPOSE 8080
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/loopgate"]
CMD ["-config", "/etc/loopgate/loopgate.yaml"]

# qwenrun serve in a container: the model from a mounted volume or from a
# registry (oci://), answering on port 8080.
#
#   docker build -t qwenrun .
#   docker run -p 8080:8080 -v "$PWD/build:/models:ro" qwenrun /models/qwen3-go-demo.qbin
#   docker run -p 8080:8080 qwenrun oci://registry.example.com/models/qwen3-8b:q4
#
# Flags follow the model: ... qwenrun /models/m.qbin --parallel 8 --ctx 8192.
# The image also holds qwenc, for an init container's `qwenc pull`.
#
# The build needs no network beyond the base images when the context has a
# vendor/ directory (go mod vendor): Go then builds from it.

ARG GO_VERSION=1.26

# Names in full: podman resolves a short name such as golang:1.26 only
# through its registries.conf, which need not name Docker Hub.
FROM docker.io/library/golang:${GO_VERSION} AS build
WORKDIR /src
COPY . .
ARG VERSION=""
# Static binaries (no cgo: the kernels are Go assembly), for an image
# with no C library.
RUN --mount=type=cache,target=/root/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags "-s -w -X main.version=${VERSION}" -o /out/qwenrun ./cmd/qwenrun && \
    CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags "-s -w -X main.version=${VERSION}" -o /out/qwenc ./cmd/qwenc && \
    mkdir -p /cache/qwenc

# distroless static: CA certificates for registries over TLS, /etc/passwd
# with the nonroot user (65532), and nothing else: no shell, no curl, hence
# qwenrun health for the HEALTHCHECK.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/qwenrun /out/qwenc /usr/local/bin/
USER 65532:65532
# Pulled models land in $XDG_CACHE_HOME/qwenc; mount a volume there to
# keep them across containers. The directory is in the image, the user's:
# a new named volume takes the ownership of what it is mounted over, and
# over nothing it would be root's, which the user could not write to.
COPY --from=build --chown=65532:65532 /cache /home/nonroot/.cache
ENV XDG_CACHE_HOME=/home/nonroot/.cache
EXPOSE 8080
# The start period covers a first pull and the model's load.
HEALTHCHECK --interval=30s --timeout=5s --start-period=5m --retries=3 \
    CMD ["qwenrun", "health", "--addr", "127.0.0.1:8080"]
ENTRYPOINT ["qwenrun", "serve", "--addr", "0.0.0.0:8080"]
CMD ["/models/model.qbin"]

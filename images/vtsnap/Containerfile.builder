# The same images with the binaries built in a builder stage (cargo, release, --locked),
# for machines that reach a registry (`docker build` elsewhere; not run in CI here, where no
# registry is reachable — CI builds the binaries on the host and uses ./Containerfile).
#
#   docker build --build-arg PROGRAM=vtsnap-gc -f images/vtsnap/Containerfile.builder .
ARG RUST_IMAGE=docker.io/library/rust:1.95-bookworm
ARG BASE=docker.io/library/debian:bookworm-slim

# Every program at once: this stage is the same for each image, so it is built once and
# then taken from the build cache.
FROM ${RUST_IMAGE} AS builder
ARG GIT_COMMIT=unknown
WORKDIR /src
COPY . .
RUN VTSNAP_GIT_COMMIT="${GIT_COMMIT}" cargo build --release --locked \
      --bin vtsnap-snapshot --bin vtsnap-gc --bin vtsnap-vtbackup-storage \
      --bin vtsnap-admission --bin vtsnap-node --bin vtsnap-restore \
 && mkdir -p /context/bin \
 && for p in vtsnap-snapshot vtsnap-gc vtsnap-vtbackup-storage vtsnap-admission vtsnap-node vtsnap-restore; do \
      cp "target/release/$p" /context/bin/ && strip --strip-debug "/context/bin/$p"; done

FROM ${BASE} AS root
ARG PROGRAM
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends ca-certificates >/dev/null \
 && mkdir -p /out/etc/ssl /out/lib/x86_64-linux-gnu /out/lib64 /out/usr/local/bin /out/tmp /out/home/nonroot \
 && cp -a /etc/ssl/certs /out/etc/ssl/ \
 && for l in libc.so.6 libm.so.6 libgcc_s.so.1 libdl.so.2 libpthread.so.0 librt.so.1; do \
      cp -L "/lib/x86_64-linux-gnu/$l" /out/lib/x86_64-linux-gnu/; done \
 && cp -L /lib64/ld-linux-x86-64.so.2 /out/lib64/ \
 && printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' > /out/etc/passwd \
 && printf 'root:x:0:\nnonroot:x:65532:\n' > /out/etc/group \
 && chmod 1777 /out/tmp && chown 65532:65532 /out/home/nonroot \
 && ln -s "/usr/local/bin/${PROGRAM}" /out/entrypoint

FROM scratch
ARG PROGRAM
ARG VERSION=0.0.0
ARG GIT_COMMIT=unknown
ARG RUN_AS=65532:65532
COPY --from=root /out/ /
COPY --from=builder /context/bin/${PROGRAM} /usr/local/bin/${PROGRAM}
LABEL org.opencontainers.image.title="${PROGRAM}" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${GIT_COMMIT}" \
      org.opencontainers.image.source="https://github.com/vtsnap/vtsnap" \
      org.opencontainers.image.licenses="Apache-2.0"
USER ${RUN_AS}
ENTRYPOINT ["/entrypoint"]

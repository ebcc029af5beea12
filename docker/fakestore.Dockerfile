# The fake Mooncake store. Static (CGO_ENABLED=0), so rootfs/ holds the binary and the ipcls helper
# only; FROM scratch because nothing is ever pulled.
FROM scratch
COPY rootfs/ /
ENTRYPOINT ["/usr/local/bin/fakestore"]

# The harness's own test node image (harness/testdata/zmqbind), built like simnode's.
FROM scratch
COPY rootfs/ /
ENTRYPOINT ["/usr/local/bin/zmqbind"]

# The runtime conformance specs' test node (harness/testdata/hostprobe), built like simnode's image.
FROM scratch
COPY rootfs/ /
ENTRYPOINT ["/usr/local/bin/hostprobe"]

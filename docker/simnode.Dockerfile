# The simulated vLLM node. No base image: nothing is ever pulled (no registry is reachable), and a
# node needs only its binary, the shared libraries ldd lists (libzmq and its dependencies) and the
# dynamic loader, which the harness copies into rootfs/ at the paths they have on the build machine.
FROM scratch
COPY rootfs/ /
ENTRYPOINT ["/usr/local/bin/simnode"]

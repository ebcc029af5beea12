"""Sends the frames vLLM's Mooncake store LookupKeyClient sends, with pyzmq, and prints the replies.

Frames follow vllm/distributed/kv_transfer/kv_connector/v1/mooncake/store/worker.py
(LookupKeyClient._lookup and _reset) and store/protocol.py. Usage: vllm_client.py ENDPOINT TIMEOUT_MS.
Prints one JSON object: {"<case>": "<reply hex>" | "timeout"}.
"""
import json
import sys

import zmq

LOOKUP_MSG = b"lookup"
RESET_MSG = b"reset"


def lookup_frames(num_tokens, block_hashes, apply_eagle):
    hash_len = len(block_hashes[0]) if block_hashes else 0
    return (
        LOOKUP_MSG,
        num_tokens.to_bytes(4, byteorder="big"),
        hash_len.to_bytes(2, byteorder="big"),
        b"".join(block_hashes),
        int(apply_eagle).to_bytes(1, byteorder="big"),
    )


def main():
    endpoint, timeout_ms = sys.argv[1], int(sys.argv[2])
    ctx = zmq.Context()
    hashes = [bytes([i]) * 32 for i in (0xAB, 0xCD, 0xEF)]
    cases = [
        ("lookup", lookup_frames(48, hashes, True)),
        ("lookup_empty", lookup_frames(7, [], False)),
        ("reset", (RESET_MSG,)),
        ("garbage", (b"bogus", b"\x00\x01")),
        ("short_lookup", (LOOKUP_MSG, b"\x00\x00")),
        ("ragged_blob", (LOOKUP_MSG, (5).to_bytes(4, "big"), (32).to_bytes(2, "big"), b"x" * 33, b"\x01")),
        ("after_garbage", lookup_frames(16, [b"\x11" * 32], True)),
    ]
    out = {}
    for name, frames in cases:
        # A fresh REQ socket per case, as a client that gave up would open: a REQ socket that
        # timed out cannot send again.
        sock = ctx.socket(zmq.REQ)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.RCVTIMEO, timeout_ms)
        sock.setsockopt(zmq.SNDTIMEO, timeout_ms)
        sock.connect(endpoint)
        try:
            sock.send_multipart(frames, copy=False)
            out[name] = sock.recv().hex()
        except zmq.Again:
            out[name] = "timeout"
        sock.close(linger=0)
    ctx.term()
    print(json.dumps(out))


if __name__ == "__main__":
    main()

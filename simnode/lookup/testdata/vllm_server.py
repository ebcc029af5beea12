"""A pyzmq REP server that parses requests the way vLLM's Mooncake store LookupKeyServer does.

Parsing follows vllm/distributed/kv_transfer/kv_connector/v1/mooncake/store/worker.py
(LookupKeyServer.process_request). Usage: vllm_server.py ENDPOINT COUNT TIMEOUT_MS. Prints "ready"
once bound, then one JSON line per request ({"type", "num_tokens", "hash_len", "hashes",
"apply_eagle"}), answering a lookup with num_tokens - 1 hit tokens and a reset with \\x01, and exits
after COUNT requests or when no request came within TIMEOUT_MS.
"""
import json
import sys

import zmq


def main():
    endpoint, count, timeout_ms = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    ctx = zmq.Context()
    sock = ctx.socket(zmq.REP)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.RCVTIMEO, timeout_ms)
    sock.bind(endpoint)
    print("ready", flush=True)
    for _ in range(count):
        try:
            frames = sock.recv_multipart(copy=False)
        except zmq.Again:
            print(json.dumps({"type": "timeout"}), flush=True)
            break
        msg_type = bytes(frames[0])
        if msg_type == b"lookup":
            num_tokens = int.from_bytes(frames[1], byteorder="big")
            hash_len = int.from_bytes(frames[2], byteorder="big")
            blob = bytes(frames[3].buffer)
            apply_eagle = bool(int.from_bytes(frames[4], byteorder="big"))
            hashes = [blob[i:i + hash_len].hex() for i in range(0, len(blob), hash_len)] if hash_len else []
            print(json.dumps({"type": "lookup", "num_tokens": num_tokens, "hash_len": hash_len,
                              "hashes": hashes, "apply_eagle": apply_eagle}), flush=True)
            sock.send(max(num_tokens - 1, 0).to_bytes(4, "big"))
        elif msg_type == b"reset":
            print(json.dumps({"type": "reset"}), flush=True)
            sock.send(b"\x01")
        else:
            print(json.dumps({"type": "unknown"}), flush=True)
            sock.send(b"\x00")
    sock.close(linger=0)
    ctx.term()


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""TCP relay that records a perftest control connection byte for byte.

    capture-relay.py --listen P --connect Q --log FILE [--host 127.0.0.1]

Accepts one client on HOST:P, connects to the server at HOST:Q, forwards both directions
unchanged and appends one JSON line per chunk it forwarded to FILE:

    {"seq": 0, "dir": "c2s", "off": 0, "len": 16, "hex": "362e3036000000000000000000000000"}

seq counts chunks over both directions in the order the relay read them; dir is c2s
(client to server) or s2c; off is the byte offset of the chunk within its direction.
Chunk boundaries are those of the relay's reads, not necessarily the peer's writes.
A half-close is passed on (shutdown(SHUT_WR)); the relay exits when both directions end.
"""
import argparse
import json
import socket
import sys
import threading


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--listen", type=int, required=True, help="port the client connects to")
    ap.add_argument("--connect", type=int, required=True, help="port the server listens on")
    ap.add_argument("--log", required=True, help="JSON-lines output file")
    ap.add_argument("--host", default="127.0.0.1", help="loopback address for both ends")
    a = ap.parse_args()

    lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind((a.host, a.listen))
    lsock.listen(1)
    client, _ = lsock.accept()
    lsock.close()
    try:
        server = socket.create_connection((a.host, a.connect))
    except OSError as e:
        print(f"capture-relay: cannot connect to the server at {a.host}:{a.connect}: {e}; "
              "start the server first", file=sys.stderr)
        return 1
    for s in (client, server):
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    log = open(a.log, "w", encoding="ascii")
    lock = threading.Lock()
    seq = [0]

    def pump(src: socket.socket, dst: socket.socket, direction: str) -> None:
        off = 0
        while True:
            try:
                data = src.recv(65536)
            except OSError:
                data = b""
            if not data:
                break
            # Log before forwarding so the file order follows the protocol's lock-step order.
            with lock:
                rec = {"seq": seq[0], "dir": direction, "off": off, "len": len(data), "hex": data.hex()}
                log.write(json.dumps(rec) + "\n")
                log.flush()
                seq[0] += 1
            off += len(data)
            try:
                dst.sendall(data)
            except OSError:
                break
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    threads = [threading.Thread(target=pump, args=(client, server, "c2s")),
               threading.Thread(target=pump, args=(server, client, "s2c"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    client.close()
    server.close()
    log.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""A tenure node in Python that joins a cluster of `tenure node` processes
(and C nodes): the asyncio driver, one UDP socket, the state file in the
data directory.

    python udp_node.py ID CLUSTER LISTEN DATA_DIR HEARTBEAT_MS DEATH_TIMEOUT_MS \
        PEER_ID=IP:PORT...

With TENURE_KEY_FILE set, frames are authenticated with that cluster key.
Prints `{"ready": ID}` once listening, then events as JSON lines in the
shape `tenure node` prints them (became_leader and leader_changed), others
as event_text.
SIGTERM hands leadership over, then exits.
"""

import asyncio
import json
import os
import signal
import sys
from typing import List

import tenure
import tenure.aio


def line(event: tenure.Event) -> str:
    if event.kind == tenure.EventKind.BECAME_LEADER and event.token is not None:
        token = {"term": event.token.term, "leader": event.token.leader}
        return json.dumps({"event": {"became_leader": {"term": event.term, "token": token}}})
    if event.kind == tenure.EventKind.LEADER_CHANGED:
        return json.dumps({"event": {"leader_changed": {"term": event.term, "leader": event.node}}})
    return json.dumps({"event_text": event.description})


async def main(argv: List[str]) -> int:
    if len(argv) < 8:
        print(__doc__, file=sys.stderr)
        return 2
    node_id, cluster = int(argv[1]), int(argv[2])
    peers = dict(p.split("=", 1) for p in argv[7:])
    try:
        config = tenure.Config(
            node_id,
            [node_id] + [int(p) for p in peers],
            peers={int(p): a for p, a in peers.items()},
            cluster_id=cluster,
            heartbeat_ms=int(argv[5]),
            death_timeout_ms=int(argv[6]),
            key_file=os.environ.get("TENURE_KEY_FILE"),
            data_dir=argv[4],
        )
        node = await tenure.aio.start(config, argv[3])
    except (tenure.ConfigError, tenure.StateError, ValueError) as e:
        # Permanent problems: configuration or a damaged state file.
        print(f"error: node {node_id}: {e}", file=sys.stderr)
        return 2
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)

    async def show() -> None:
        async for event in node.events():
            print(line(event), flush=True)

    printer = asyncio.ensure_future(show())
    await asyncio.sleep(0)  # the printer subscribes before anything is said
    print(json.dumps({"ready": node_id}), flush=True)
    await stop.wait()
    await node.close()
    await printer
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv)))

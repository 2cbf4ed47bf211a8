"""``python -m runners.simulate``: how a campaign starts an embedded simulated endpoint."""

from __future__ import annotations

import argparse
import json
import os
import threading
import time

from runners.simulate.profile import Profile
from runners.simulate.serve import serve


def _exit_with_parent(parent: int) -> None:
    # A campaign killed with SIGKILL cannot stop its endpoint; the endpoint notices
    # instead, so that no orphan keeps the port and the campaign's output pipes open.
    while os.getppid() == parent:
        time.sleep(0.2)
    os._exit(0)


parser = argparse.ArgumentParser(prog="python -m runners.simulate")
parser.add_argument("--fd", type=int, required=True)
parser.add_argument("--profile-json", required=True)
parser.add_argument("--parent-pid", type=int, required=True)
args = parser.parse_args()
threading.Thread(target=_exit_with_parent, args=(args.parent_pid,), daemon=True).start()
serve(Profile.from_mapping(json.loads(args.profile_json)), fd=args.fd)

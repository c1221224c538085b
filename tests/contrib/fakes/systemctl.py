"""A stand-in for systemctl, for the hooks' tests: units kept in a JSON file ($FAKE_STATE,
{"app.service": "active" | "inactive"}; a unit not in it is not found), each call's words
appended as a JSON line to $FAKE_CALLS, and a verb made to fail or stall where
$FAKE_SYSTEMCTL says: "stop=fail", "start=fail", "stop=hang", "show=slow" (answers what
it read a second later: a window for another run to change things meanwhile)."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path


def main(argv: list[str]) -> int:
    with open(os.environ["FAKE_CALLS"], "a", encoding="utf-8") as calls:
        calls.write(json.dumps(argv) + "\n")
    verb, unit = argv[0], argv[-1]
    told = dict(item.split("=", 1) for item in os.environ.get("FAKE_SYSTEMCTL", "").split(",")
                if item)
    state_file = Path(os.environ["FAKE_STATE"])
    units = json.loads(state_file.read_text())
    if verb == "show":
        if told.get("show") == "slow":
            time.sleep(1)
        found = unit in units
        print(f"LoadState={'loaded' if found else 'not-found'}")
        print(f"ActiveState={units.get(unit, 'inactive')}")
        return 0
    if unit not in units:
        print(f"Failed to {verb} {unit}: Unit {unit} not found.", file=sys.stderr)
        return 5
    if told.get(verb) == "fail":
        print(f"Job for {unit} failed (the fake systemctl).", file=sys.stderr)
        return 1
    if told.get(verb) == "hang":
        time.sleep(3600)
    units[unit] = "inactive" if verb == "stop" else "active"
    # Replaced whole, as a server's state is: a reader running beside never sees it
    # half written.
    part = state_file.with_name(f"{state_file.name}.{os.getpid()}")
    part.write_text(json.dumps(units))
    os.replace(part, state_file)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

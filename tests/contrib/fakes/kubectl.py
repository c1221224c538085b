"""A stand-in for kubectl, for the hooks' tests: nodes kept in a JSON file ($FAKE_STATE,
{"node": {"unschedulable": bool, "annotations": {...}}}), each call's words appended as a
JSON line to $FAKE_CALLS, and a verb made to fail or stall where $FAKE_KUBECTL says:
"cordon=fail", "drain=fail" (refused at once), "drain=slow" (gives up at its --timeout, as
kubectl does), "drain=hang" (ignores its --timeout), "get=slow" (answers what it read a
second later: a window for another run to change the node meanwhile)."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

DONE = {"cordon": "cordoned", "uncordon": "uncordoned", "drain": "drained",
        "annotate": "annotated"}


def main(argv: list[str]) -> int:
    with open(os.environ["FAKE_CALLS"], "a", encoding="utf-8") as calls:
        calls.write(json.dumps(argv) + "\n")
    words = argv[2:] if argv[:1] == ["--kubeconfig"] else argv
    verb = words[0]
    told = dict(item.split("=", 1) for item in os.environ.get("FAKE_KUBECTL", "").split(",")
                if item)
    state_file = Path(os.environ["FAKE_STATE"])
    nodes = json.loads(state_file.read_text())
    name = words[2] if verb in ("get", "annotate") else words[1]
    node = nodes.get(name)
    if node is None:
        print(f'Error from server (NotFound): nodes "{name}" not found', file=sys.stderr)
        return 1
    if told.get(verb) == "fail":
        print(f"error: {verb} refused by the fake kubectl", file=sys.stderr)
        return 1
    if verb == "get":
        if told.get("get") == "slow":
            time.sleep(1)
        spec = {"unschedulable": True} if node["unschedulable"] else {}
        metadata = {"name": name, **({"annotations": node["annotations"]}
                                     if node["annotations"] else {})}
        print(json.dumps({"kind": "Node", "metadata": metadata, "spec": spec}))
        return 0
    if verb in ("cordon", "uncordon", "drain"):
        node["unschedulable"] = verb != "uncordon"  # a drain cordons first
    elif verb == "annotate":
        for word in words[3:]:
            if word.endswith("-"):
                node["annotations"].pop(word[:-1], None)
            elif "=" in word:
                key, _, value = word.partition("=")
                node["annotations"][key] = value
    # Replaced whole, as a server's state is: a reader running beside never sees it
    # half written.
    part = state_file.with_name(f"{state_file.name}.{os.getpid()}")
    part.write_text(json.dumps(nodes))
    os.replace(part, state_file)
    if verb == "drain":
        timeout = int(next(w for w in words if w.startswith("--timeout="))[10:-1])
        if told.get("drain") == "slow":
            time.sleep(timeout)
            print(f"error: drain did not complete within {timeout}s", file=sys.stderr)
            return 1
        if told.get("drain") == "hang":
            time.sleep(3600)
    print(f"node/{name} {DONE[verb]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

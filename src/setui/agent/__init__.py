"""setui agent: acts on scheduled events by a policy, says so, and is watched."""

"""The agent's local API: one JSON object per line over a Unix socket (docs/api.md).

``protocol`` (frames, limits, the version) and ``codec`` (the domain objects on the wire)
are pure; ``peer`` asks the kernel who a client is; ``server`` runs in the agent;
``client`` is what front ends use, and never reaches the store's write paths, the
approver or the agent (an import contract in pyproject.toml says so).
"""

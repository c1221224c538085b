"""Files shipped with setui that are not Python: ``setui-agent.service``, the agent's
systemd unit, which setui.install.unit writes out with this Python in ExecStart=."""

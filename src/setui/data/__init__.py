"""Files shipped with setui that are not Python: the systemd unit of the recorder."""

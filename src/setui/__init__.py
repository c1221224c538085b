"""setui: a terminal dashboard for Azure Scheduled Events."""

__version__ = "0.1.0"

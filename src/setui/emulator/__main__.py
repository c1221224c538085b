"""``python -m setui.emulator``: the same as ``setui emulator``, without the rest of setui."""

from __future__ import annotations

import argparse
import sys

from setui.emulator.command import add_arguments, run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m setui.emulator",
        description="Serve a scenario over HTTP on loopback, like the Azure Scheduled Events "
                    "endpoint.")
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())

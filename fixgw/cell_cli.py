"""``fixgw-cell``: a matching cell's process (``conductor`` or ``outbox``, ``matching/__main__.py``),
or ``relocate``, which moves a partition with the gateway's configuration
(``fixgw/relocate_cli.py``). Lives above both: the cell knows nothing of the gateway's settings."""

from __future__ import annotations

import sys

from matching.__main__ import main as cell_main

from .relocate_cli import main as relocate_main


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["relocate"]:
        return relocate_main(args[1:])
    return cell_main(args)


if __name__ == "__main__":
    sys.exit(main())

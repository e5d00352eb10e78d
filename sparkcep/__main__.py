"""``python -m sparkcep``: the command line, as ``sparkcep``."""

from sparkcep.cli.main import main

if __name__ == "__main__":
    main()

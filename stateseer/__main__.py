"""``python -m stateseer``: the command line (the same as the ``stateseer`` command)."""

import sys

from stateseer.app.cli.main import main

if __name__ == "__main__":
    sys.exit(main())

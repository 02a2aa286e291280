"""``python -m stateseer.app.cli``: the ``stateseer`` command."""

import sys

from stateseer.app.cli.main import main

sys.exit(main())

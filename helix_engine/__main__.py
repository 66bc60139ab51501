"""`python -m helix_engine ...`: the engine CLI without the cockpit."""

import sys

from helix_engine.cli import main

sys.exit(main())

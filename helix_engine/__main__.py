"""`python -m helix_engine ...`: the engine CLI without the cockpit."""

import sys

from helix_engine.isolated import drop_cwd_entry

drop_cwd_entry()  # before any other import: the folder helix runs in may hold a json.py

from helix_engine.cli import main  # noqa: E402

sys.exit(main())

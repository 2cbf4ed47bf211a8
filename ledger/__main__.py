"""``python -m ledger``."""

import sys

from ledger._cli import main

sys.exit(main())

"""``python -m physics_trainer``: see physics_trainer.cli."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())

"""``python -m tokenrelay.docgen``, as the docs name it: the generator lives in ``config.docgen``."""

import sys

from tokenrelay.config.docgen import main

if __name__ == "__main__":
    sys.exit(main())

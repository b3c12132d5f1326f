import sys

from kubescale.cli import main

sys.exit(main())

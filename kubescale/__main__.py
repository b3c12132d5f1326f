import sys

from kubescale.cli.main import main

sys.exit(main())

import sys

from privreg.cli.main import main

sys.exit(main())

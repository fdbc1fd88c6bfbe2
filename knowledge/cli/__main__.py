import sys

from knowledge.cli.main import main

sys.exit(main())

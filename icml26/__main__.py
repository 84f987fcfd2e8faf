import sys

from icml26.cli import main

sys.exit(main())

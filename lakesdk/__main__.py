import sys

from lakesdk.cli.main import main

sys.exit(main())

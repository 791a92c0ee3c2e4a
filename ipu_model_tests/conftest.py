import os
import sys

# Tests run against the installed package; a developer build can be selected
# with IPUXL_CORE_DIR (see scripts/dev_build.sh) and PYTHONPATH=python.
sys.path.insert(0, os.path.dirname(__file__))

"""``python -m synapse_retriever.cli``: the ``synapse-retriever`` command."""

import sys

from synapse_retriever.cli import main

sys.exit(main())

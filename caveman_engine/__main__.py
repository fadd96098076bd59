"""``python -m caveman_engine``: the same entry point as the ``caveman-engine`` console script."""

from .launcher import main

main()

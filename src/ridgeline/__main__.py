"""`python -m ridgeline`: the same command as `ridgeline`."""

from ridgeline.cli import main

main()

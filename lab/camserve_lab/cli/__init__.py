"""The lab's commands, each registered on camserve's command line (``camserve.cli.common``) when
``camserve.cli.lazy_commands`` imports its module."""

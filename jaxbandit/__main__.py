"""``python -m jaxbandit``: the ``jaxbandit`` command (:func:`jaxbandit.cli.console`)."""

from jaxbandit.cli import console

if __name__ == "__main__":
    console()

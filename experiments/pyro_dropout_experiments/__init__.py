"""Paper reproductions and the demo, run by the ``pyro-dropout`` command."""

__all__: list[str] = []

"""run_bash core: plain Python, importable and testable without Neovim.

The pynvim adapter in ``rplugin/python3/run_bash_host`` is the only code that imports pynvim.
"""

__version__ = "0.1.0"

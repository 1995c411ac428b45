"""run_bash core: plain Python, importable and testable without Neovim.

The RPC adapter in ``rplugin/python3/run_bash_host`` is the only code that speaks to Neovim.
"""

__version__ = "0.1.0"

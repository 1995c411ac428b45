"""Start the run_bash host: ``python boot.py`` from ``jobstart(..., {rpc = true})``.

This script only makes the plugin's modules importable and calls ``run_bash_host.start.main``
(the keeper, the host, and what each does: ``start.py``). A script run by its path is compiled
again at every start (1.7 ms here); a module it imports is kept as bytecode.
"""

import gc

# No garbage collection while the host starts: imports make many objects and no cycles worth
# collecting, and the collector's passes over them are a tenth of the start. ``Service.hello``
# freezes what start-up loaded (it lives as long as the host) and turns collection back on.
gc.disable()

import os  # noqa: E402
import sys  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
RPLUGIN = os.path.dirname(HERE)
ROOT = os.path.dirname(os.path.dirname(RPLUGIN))
sys.path[:0] = [os.path.join(ROOT, "python"), RPLUGIN]
# The host keeps its bytecode cache (``__pycache__`` beside the plugin's own modules, as ``make
# deps`` writes it) even when PYTHONDONTWRITEBYTECODE is set in the user's environment: without
# it every start compiles every module again, the largest part of a cold start. A checkout that
# is not writable just keeps compiling. (A fork server started anew runs with -I, which ignores the
# variable, so it already did.)
sys.dont_write_bytecode = False

if __name__ == "__main__":
    from run_bash import modcache

    # The modules the last start imported, from one file (``modcache``): before anything else is.
    modcache.install()

    from run_bash_host.start import main

    main()

"""Sandbox backends (sandlock, bubblewrap, none) behind one contract; see ``base``."""

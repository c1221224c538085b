"""Settings: the config file, the environment and the command line, in that rank.

* ``config``: Config, its defaults, the file read and written, every value checked.
* ``environment``: the SETUI_* variables that stand for settings, and how they rank.
* ``tomlread``: TOML read one way on every Python setui runs on.
"""

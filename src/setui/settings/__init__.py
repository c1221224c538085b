"""Settings: the config file, the environment and the command line, in that rank.

* ``config``: Config, its defaults, the file read and written, every value checked.
* ``environment``: the SETUI_* variables that stand for settings, and their rule (set and
  not empty, one wins over the config file), asked alike by the config, the store's place
  and its audit forwarding.
* ``tomlread``: TOML read one way on every Python setui runs on (tomllib, or tomli on
  3.10, loaded at the first read; nesting too deep for the parser is bad TOML, not a
  traceback): the config file, the policy, scenarios, themes.
"""

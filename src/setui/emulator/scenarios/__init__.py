"""Built-in scenarios of the emulator, as data files (see README.md for the schema)."""

"""Exceptions with one-line messages that name the key, file or value at fault."""


class OracleError(ValueError):
    """Base class: bad input to the library. The message is one line for the user."""


class ConfigError(OracleError):
    """A configuration key is missing, unknown or has a value of the wrong type or range."""


class DataError(OracleError):
    """A data file or folder is missing, unreadable or not in the expected layout."""


class ShardError(OracleError):
    """A sample shard is incomplete, corrupt or inconsistent with its siblings."""


class WorldError(OracleError):
    """A world is mis-specified: bad prior, class-count mismatch, non-finite log-likelihood."""

"""The exceptions ldpstream raises, as ``polars.exceptions`` gives polars' own.

Every error ldpstream raises on purpose is an :class:`LdpError`. Each class also
subclasses the built-in exception that was raised before the hierarchy existed, so code
that catches ``ValueError`` (the caller's fault) or ``RuntimeError`` (ldpstream's) keeps
working:

- :class:`ConfigError` (``ValueError``): a config, a mechanism's parameters, an integer
  argument out of range, or the privacy ledger's location;
- :class:`InputError` (``ValueError``): data, columns or sketch bytes that cannot be taken
  (a missing or mistyped column, invalid Arrow data, damaged sketch bytes, an input
  counted twice);
- :class:`BudgetError` (``ValueError``): the privacy ledger refuses (a changed budget, a
  renamed stream over spent input, a damaged ledger file);
- :class:`MechanismMismatchError` (``ValueError``): sketches counted under other settings
  than the config's (mechanism, ε, d, columns, windows);
- :class:`InternalError` (``RuntimeError``): a fault of ldpstream itself; please report it.

A type error (a list where Arrow data is expected, a float where an integer is) stays a
plain ``TypeError``.

Example:
    >>> try:
    ...     ldpstream.Mechanism.grr(epsilon=1.0, domain=-1)
    ... except ldpstream.ConfigError as e:
    ...     print(e)
    domain = -1: must be an integer from 0 to 4294967295
"""

from __future__ import annotations

__all__ = [
    "BudgetError",
    "ConfigError",
    "InputError",
    "InternalError",
    "LdpError",
    "MechanismMismatchError",
]


class LdpError(Exception):
    """The base of every error ldpstream raises on purpose."""


class ConfigError(LdpError, ValueError):
    """A config, a mechanism's parameters, an argument out of range, or the ledger's
    location."""


class InputError(LdpError, ValueError):
    """Data, columns or sketch bytes that cannot be taken, or an input counted twice."""


class BudgetError(LdpError, ValueError):
    """The privacy ledger refuses: a changed budget, a renamed stream over spent input,
    or a damaged ledger file."""


class MechanismMismatchError(LdpError, ValueError):
    """Sketches counted under other settings than the config's."""


class InternalError(LdpError, RuntimeError):
    """A fault of ldpstream itself (please report it)."""

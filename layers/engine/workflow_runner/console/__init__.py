"""The operator console: a web page over any database `wfr` can reach (`wfr console`).

Standard library only; pages rendered on the server, a small CSS and script bundled as
package data (works offline). See app.py for the safety rules, access.py for who may
use it (the Host allow-list, the operator token).
"""

from __future__ import annotations

from .access import allowed_hosts
from .app import ConsoleApp, ConsoleConfig, StorePool, make_console_server

__all__ = ["ConsoleApp", "ConsoleConfig", "StorePool", "allowed_hosts", "make_console_server"]

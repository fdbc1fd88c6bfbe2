"""Agents (MCP clients) read knowledge bases and propose additions; a person approves them.

The face: ``access`` (the on/off setting, the client configuration, recent agent calls), ``proposals``
(file, list, accept, dismiss) and ``server`` (the MCP server; imported on demand, since it loads the SDK).
"""

from knowledge.agents import access, proposals

__all__ = ["access", "proposals", "server"]

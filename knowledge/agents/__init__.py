"""Agents (MCP clients) read knowledge bases and propose additions; a person approves (issue 13)."""

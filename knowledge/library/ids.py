"""Typed ids for the rows that are easiest to mix up: a base, an item, a folder run (a job's id is
``jobs.queue.JobId``). At run time they are plain ints; mypy keeps an item id out of a base id's place."""

from typing import NewType

BaseId = NewType("BaseId", int)
ItemId = NewType("ItemId", int)
RunId = NewType("RunId", int)

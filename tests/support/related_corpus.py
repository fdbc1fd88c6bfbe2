"""Six short documents on three subjects (pottery glazes, Python packaging, sailing), two each, in three folders
that mix them: what the "related documents" tests index with the real model."""

from __future__ import annotations

from pathlib import Path

from knowledge.lifecycle import operations
from knowledge.runtime import Quire
from tests.knowledge.helpers import drain, make_base
from tests.support.files import write_tree

SUBJECT = {
    "desk/celadon.md": "pottery",
    "shelf/crawling.md": "pottery",
    "desk/wheels.md": "packaging",
    "shelf/pyproject.md": "packaging",
    "boat/reefing.md": "sailing",
    "boat/tides.md": "sailing",
}

DOCS = {
    "desk/celadon.md": """# Celadon glazes

A celadon is a transparent stoneware glaze that owes its soft green to a little iron oxide, usually between one
and two percent, fired in a reduction atmosphere. In the kiln the potter starves the burners of air near cone
10 so that the ferric oxide in the glaze gives up oxygen and turns to ferrous iron, which colours the glass
jade green or blue-green instead of amber.

The glaze pools in the carved lines of a bowl and looks darker where it is thick, which is why celadons
are applied over incised or slip-trailed decoration. Too much iron makes the glaze olive and muddy; an oxidation
firing leaves it a pale straw yellow. Potters test their recipes on tiles of the same clay body, because
the body's own iron and titanium shift the colour.
""",
    "shelf/crawling.md": """# Why a glaze crawls

Crawling is the glaze defect in which the melted glaze pulls back from the pot and leaves bare patches of
clay with thick, rolled edges. It starts before the firing: a glaze with a lot of raw clay or zinc oxide shrinks
as it dries, cracks on the bisque ware, and the cracks open further in the kiln as the glaze melts.

Potters cure it by calcining part of the kaolin in the recipe, by applying the glaze thinner, and by keeping
dust and oil off the bisqueware before glazing, since a greasy fingerprint stops the glaze from bonding. Some
studio potters use a crawl glaze on purpose, with magnesium carbonate, to get a lichen-like surface on a vase
fired to stoneware temperature.
""",
    "desk/wheels.md": """# Building wheels for a Python project

A wheel is the built distribution format of a Python package: a zip archive named after the project, its
version, the Python tag, the ABI tag and the platform tag, which pip can install without running any build
step. A pure Python project produces one universal wheel tagged py3-none-any; a project with C extensions
needs one wheel per platform and interpreter, which is why maintainers build them in CI with cibuildwheel.

Run python -m build in the project directory to get both a source distribution and a wheel in dist/, then
upload them to the Python Package Index with twine. Installing the wheel into a fresh virtual environment
before publishing catches missing package data and modules left out of the build.
""",
    "shelf/pyproject.md": """# Project metadata in pyproject.toml

The pyproject.toml file tells packaging tools how to build a Python project. Its build-system table names
the build backend, such as setuptools, hatchling or flit-core, and the requirements pip installs into an
isolated environment before calling it. The project table holds the metadata: the distribution name, the
version, the required Python version, the dependencies with their version specifiers, optional extras and
the console scripts to generate as entry points.

Keeping this metadata declarative replaces the old setup.py script, so pip and other installers can read the
dependencies of a source distribution without executing code. A dynamic version can come from a git tag
through setuptools-scm.
""",
    "boat/reefing.md": """# When to reef the mainsail

Reefing reduces the area of the mainsail so that a sailing boat stays upright and under control when the
wind rises. The old rule is to reef when you first think about it: once the boat heels so far that the rail
dips and the helm pulls hard to windward, the sail is too big for the breeze.

With slab reefing the crew eases the main halyard, hooks the reef cringle onto the horn at the gooseneck,
tightens the halyard again and hauls in the reefing line at the boom end. Single-line reefing leads both ends
back to the cockpit. Shaking out a reef is the same steps in reverse, done when the gusts have eased.
""",
    "boat/tides.md": """# Planning a passage around the tides

A coastal passage is planned around the tidal streams, which can run faster than a small yacht sails in light
winds. The skipper reads the tidal atlas for the hours after high water at the standard port and times the
departure so that the boat carries a fair tide through the headlands and tidal gates.

Wind against tide raises short steep waves off a headland, so a crossing is timed for slack water or for wind
and stream running the same way. The navigator plots the course to steer with the set and drift of each hour's
stream, checks the depth over the sandbanks against the height of tide, and keeps a bolt-hole harbour in mind.
""",
}


def indexed_related_base(quire: Quire, root: Path, name: str = "kb") -> tuple[int, dict[str, int]]:
    """The six documents added as one folder (``library``) and indexed by an in-process worker; the base id and
    the items by path below ``library`` (its folders too: ``desk``, ``shelf``, ``boat``; ``""`` the folder)."""
    base = make_base(quire, name)
    folder = write_tree(root / "library", dict(DOCS))
    operations.add_items(quire, base.id, [operations.PathInput(folder)])
    drain(quire)
    ids = {(i.relative_path or "").replace("\\", "/"): i.id for i in operations.list_items(quire, base.id, flat=True)}
    return base.id, ids

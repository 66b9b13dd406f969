"""`glue`: hand a computed value to the book's text, and show it to a reader running the chapter in JupyterLab.

In the built book, `{glue:text}` roles in the prose are replaced by the value (myst-nb). JupyterLab's MyST renderer
cannot do that — it shows the value's name — so outside the book build the value is also printed in the cell's
output, where the reader finds it right above the text that names it.
"""

from __future__ import annotations

import os
from typing import Any

BOOK_BUILD = "ADDNORM_BOOK_BUILD"     # set to 1 by tools/build_book.py


def glue(name: str, value: Any, display: bool = False) -> None:
    """myst_nb.glue(name, value, display); outside the book build, also print `name = value` (text and numbers)."""
    from myst_nb import glue as myst_glue     # imported here: the lab works without the book's packages

    myst_glue(name, value, display=display)
    if os.environ.get(BOOK_BUILD) != "1" and not display and isinstance(value, (str, int, float)):
        print(f"{name} = {value}")

"""Collecting submissions from nbgrader's exchange without following symbolic links.

The exchange's inbound folder is writable by every student, and nbgrader's collect copies a submission as the
instructor with `shutil.copytree`, which follows links: a submission with a link to an instructor file (a solution
notebook, the gradebook) would bring that file's content into submitted/ and from there into autograding.
`SafeCollect` copies only regular files and folders: a link inside a submission is left out (and logged), and a
submission folder that is itself a link is not collected at all. nbgrader_config.py names it
(`c.ExchangeFactory.collect`).
"""

from __future__ import annotations

import os
import shutil

from nbgrader.exchange.default.collect import ExchangeCollect
from nbgrader.utils import ignore_patterns


def links_in(folder: str) -> list[str]:
    """The symbolic links under folder (files and folders), as paths relative to it."""
    found = []
    for directory, folders, files in os.walk(folder):           # os.walk does not descend into linked folders
        for name in folders + files:
            path = os.path.join(directory, name)
            if os.path.islink(path):
                found.append(os.path.relpath(path, folder))
    return sorted(found)


class SafeCollect(ExchangeCollect):
    """nbgrader's collect, copying no symbolic link (see the module's docstring)."""

    def do_copy(self, src, dest, log=None):
        if os.path.islink(src):
            self.log.error("Not collected: the submission %s is a symbolic link (to %s), not a folder the student "
                           "submitted", src, os.path.realpath(src))
            return
        links = links_in(src)
        if links:
            self.log.warning("Submission %s: symbolic links left out, not followed: %s", src, ", ".join(links))
        size = self.get_size(src)
        if size > 1000 * self.coursedir.max_dir_size:
            self.log.error("Directory size is too big")
            raise RuntimeError(f"Directory size is too big. Size is {size}, maximum size is "
                               f"{1000 * self.coursedir.max_dir_size}")
        usual = ignore_patterns(exclude=self.coursedir.ignore, include=self.coursedir.include,
                                max_file_size=self.coursedir.max_file_size, log=self.log)

        def ignore(directory, names):
            return set(usual(directory, names)) | {n for n in names if os.path.islink(os.path.join(directory, n))}

        shutil.copytree(src, dest, ignore=ignore)
        if self.coursedir.groupshared:
            for directory, _, files in os.walk(dest):
                os.chmod(directory, (os.stat(directory).st_mode | 0o2770) & 0o2777)
                for name in files:
                    path = os.path.join(directory, name)
                    os.chmod(path, os.stat(path).st_mode | 0o660)
